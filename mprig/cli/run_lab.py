"""The lab parts of `mprig run`: the MPTCP preflight of every path before the first run, and
the teardown check after the last (every host read before and after; a setting left changed
is named with its host)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def preflight(rig: Any, results: Path, say: Any, python: str | None = None) -> None:
    """Probe every path of a lab rig (mprig.rig.probe) before the first run; record the results
    in RESULTS/preflight.json and refuse (HostError) a path that fails, naming it and what
    failed."""
    from dataclasses import asdict

    from mprig.errors import HostError
    from mprig.rig.probe import probe
    from mprig.run import bundle

    say("preflight: probing every path (MPTCP handshake and a data transfer with DSS)")
    found = probe(rig, python=python)
    bundle.write_json(results / PREFLIGHT_JSON, {"paths": [asdict(r) for r in found]})
    failed = [r for r in found if r.verdict != "ok"]
    if failed:
        why = "; ".join(f"path {r.path} ({r.client_if}): {r.verdict}: {r.detail}" for r in failed)
        raise HostError(
            "client",
            f"MPTCP preflight refused {len(failed)} of {len(found)} paths: {why}. Nothing ran;"
            f" `mprig probe --inventory` shows it again, `mprig run --no-preflight` runs anyway",
        )


PREFLIGHT_JSON = "preflight.json"  # the preflight's per-path results (mprig.rig.probe.PathProbe)
TEARDOWN_JSON = "teardown.json"  # a lab campaign's teardown: settings before, after, problems


def _teardown_reads(rig: Any, variants: Any) -> dict[str, list[str]]:
    from mprig.stack import isolation

    keys = isolation.campaign_keys(variants)
    devs = isolation.teardown_devices(rig.paths, rig.data_ifs)
    return {h: isolation.teardown_argv(keys, devs.get(h, [])) for h in rig.hosts}


def read_teardown(rig: Any, variants: Any) -> Any:
    """What a lab campaign's teardown compares, read from every host before the first run."""
    from mprig.stack import isolation

    argvs = _teardown_reads(rig, variants)
    return {h: isolation.parse(rig.hosts[h].run(argv, check=False).stdout)
            for h, argv in argvs.items()}  # fmt: skip


def verify_teardown(rig: Any, variants: Any, before: Any, results: Path) -> None:
    """After a lab campaign (the runner has put its baseline back): read every host again,
    record both reads in RESULTS/teardown.json, HostError naming each host and setting the
    campaign left changed (BPF congestion controls still registered included)."""
    from mprig.errors import HostError
    from mprig.run import bundle
    from mprig.stack import isolation

    after = read_teardown(rig, variants)
    problems = isolation.teardown_diff(before, after)
    doc = {
        "verified": not problems,
        "problems": problems,
        "before": {h: s.as_json() for h, s in before.items()},
        "after": {h: s.as_json() for h, s in after.items()},
    }
    bundle.write_json(results / TEARDOWN_JSON, doc)
    if problems:
        host = problems[0].split(" ", 1)[0].rstrip(":")
        raise HostError(
            host,
            "the lab rig is not back where the campaign found it: "
            + "; ".join(problems)
            + f" (the runs' results are kept; {results / TEARDOWN_JSON} has both reads)",
        )
