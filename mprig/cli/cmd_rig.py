"""`mprig rig up|down|status`: build, tear down and inspect a virtual rig."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

EPILOG = """\
examples:
  mprig rig up                         the default rig "main" (the one `mprig run` uses): client,
                                       ap (wlan0), cell (wwan0), server, each with its own sshd;
                                       provisioned with Ansible
  mprig rig up --campaign experiments/papers/x.yaml
                                       one client interface and router per path of the campaign
  mprig rig up --wifi hwsim            the Wi-Fi hop as real 802.11 (mac80211_hwsim radios, hostapd
                                       and wpa_supplicant from playbooks/site.yml; needs a kernel
                                       with mac80211_hwsim: run it inside `vng`, see docs/rig.md)
  mprig rig status                     hosts, addresses, qdiscs, MPTCP endpoints, sshd state
  mprig rig status --json
  mprig rig down                       tear it down; fails listing anything that remains
  mprig rig provision --check --diff   what playbooks/site.yml would change on the virtual rig,
                                       per host and task (nothing is changed)
  mprig rig provision --inventory inventory/lab --check --diff \
      --vault-password-file ~/.mprig-vault-password
                                       the same for a lab; without --check it applies site.yml
                                       and lists what changed (a second run: 0 on every host)
  mprig rig up --rig lab2              a second rig next to the first (namespaces mprig-lab2-*)
  ip netns exec mprig-main-ctl ssh -F /run/mprig/main/ssh_config client
                                       log into a virtual host the way the runner does
"""


def register(subparsers: Any) -> None:
    """Add `rig` with its subcommands."""
    raw = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "rig",
        help="build, inspect or tear down the virtual rig",
        description="Manage the virtual rig: network namespaces mprig-NAME-HOST on this "
        "machine, each host with its own sshd on a management bridge, provisioned with "
        "playbooks/rig.yml over SSH.",
        epilog=EPILOG,
        formatter_class=raw,
    )
    sub = p.add_subparsers(dest="rig_command", metavar="SUBCOMMAND", required=True)
    up = sub.add_parser(
        "up", help="build the rig (reused if already up)", epilog=EPILOG, formatter_class=raw
    )
    _name(up)
    up.add_argument("--campaign", metavar="FILE", help="take the paths from this campaign file")
    up.add_argument(
        "--no-provision", action="store_true", help="skip ansible-playbook playbooks/rig.yml"
    )
    up.add_argument(
        "--wifi",
        choices=("veth", "hwsim"),
        help="the first wifi path's client hop: veth (default; or the campaign's rig.wifi) or "
        "hwsim, a real 802.11 link set up by playbooks/site.yml (needs mac80211_hwsim)",
    )
    up.set_defaults(func=cmd_up)
    down = sub.add_parser(
        "down", help="tear the rig down and verify", epilog=EPILOG, formatter_class=raw
    )
    _name(down)
    down.set_defaults(func=cmd_down)
    _provision_parser(sub, raw)
    st = sub.add_parser("status", help="show the rig", epilog=EPILOG, formatter_class=raw)
    _name(st)
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    st.set_defaults(func=cmd_status)


def _provision_parser(sub: Any, raw: Any) -> None:
    pr = sub.add_parser(
        "provision",
        help="apply site.yml to a rig, or predict what it would change (--check)",
        description="Run a playbook (default playbooks/site.yml) against the virtual rig or a "
        "lab inventory and list, per host, every task that changed it; with --check nothing "
        "is changed and the list is what a real run would change.",
        epilog=EPILOG,
        formatter_class=raw,
    )
    _name(pr)
    pr.add_argument(
        "--inventory", metavar="DIR", type=Path, help="a lab inventory instead of --rig"
    )
    pr.add_argument("--playbook", default="site.yml", help="a playbook of playbooks/")
    pr.add_argument("--check", action="store_true", help="predict: change nothing")
    pr.add_argument(
        "--diff", action="store_true", help="also print ansible's output with its diffs"
    )
    pr.add_argument("--limit", metavar="HOSTS", help="only these hosts (ansible --limit)")
    pr.add_argument(
        "--vault-password-file",
        metavar="FILE",
        help="the inventory's vault password (default on the virtual rig: its committed one)",
    )
    pr.add_argument(
        "-e", "--extra-vars", action="append", default=[], metavar="VARS",
        help="ansible-playbook -e (repeatable)",
    )  # fmt: skip
    pr.set_defaults(func=cmd_provision)


def _name(p: argparse.ArgumentParser) -> None:
    from mprig.rig.layout import DEFAULT_RIG

    p.add_argument(
        "--rig",
        "--name",
        dest="name",
        default=DEFAULT_RIG,
        help=f"rig name, as `mprig run --rig` (default: {DEFAULT_RIG})",
    )


def default_paths() -> tuple[Any, ...]:
    """The smoke campaign's two paths (layout only needs names and kinds)."""
    from mprig.campaign.spec import Direction, Path

    d = Direction(rate_mbit=10)
    return (
        Path(name="wifi", kind="wifi", down=d, up=d),
        Path(name="cell", kind="cellular", down=d, up=d),
    )


def cmd_up(args: argparse.Namespace) -> int:
    from mprig.campaign.spec import load_campaign
    from mprig.rig import virtual

    campaign = load_campaign(args.campaign) if args.campaign else None
    paths = campaign.paths if campaign else default_paths()
    if (args.wifi or (campaign.rig.wifi if campaign else "veth")) == "hwsim":
        from mprig.rig import hwsim

        rig = hwsim.up(args.name, paths)
    else:
        rig = virtual.up(args.name, paths, provision_hosts=not args.no_provision)
    print(f"rig {rig.name} is up ({rig.mode}); state in {virtual.state_dir(rig.name)}")
    for link in rig.paths:
        print(
            f"  path {link.name:<10} client {link.client_if} {link.client_addr} via {link.router}"
        )
    print(f"  server {rig.server_addr}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from mprig.rig import virtual

    virtual.down(args.name)
    print(f"rig {args.name} is down; nothing of it remains")
    return 0


def _provision_target(args: argparse.Namespace) -> tuple[Any, Any, str | None, str | None]:
    """(inventory, state dir, namespace to run Ansible in, default vault password file)."""
    from mprig.errors import UsageError
    from mprig.rig import virtual

    if args.inventory is not None:
        from mprig.rig.inventory import check_inventory, state_for

        path = check_inventory(args.inventory, explicit=True)
        return path, state_for(path), None, None
    if virtual.load(args.name) is None:
        raise UsageError(f"virtual rig {args.name!r} is not up: mprig rig up --rig {args.name}")
    from mprig.rig import hwsim
    from mprig.rig import layout as L

    state = virtual.state_dir(args.name)
    ns = L.namespace(args.name, "ctl")
    return state / "inventory", state, ns, str(hwsim.VAULT_PASSWORD_FILE)


def cmd_provision(args: argparse.Namespace) -> int:
    from mprig.rig import provision

    inventory, state, ns, vault = _provision_target(args)
    extra: list[str] = []
    password = args.vault_password_file or vault
    if password:
        extra += ["--vault-password-file", str(password)]
    if args.limit:
        extra += ["--limit", args.limit]
    for e in args.extra_vars:
        extra += ["-e", e]
    outcome = provision.provision(
        inventory, state, netns=ns, playbook=args.playbook, check=args.check, diff=args.diff,
        extra=tuple(extra),
    )  # fmt: skip
    if args.diff:
        print(outcome.log.read_text())
    print(provision.summary(outcome))
    what = "predicted, nothing changed" if outcome.check else "applied"
    print(f"{args.playbook} {what}; ansible's output (diffs with --diff): {outcome.log}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from mprig.rig import virtual

    st = virtual.status(args.name)
    if args.json:
        print(json.dumps(st, indent=1))
    else:
        print(render_status(st))
    return 0 if st["up"] else 1


def render_status(st: dict[str, Any]) -> str:
    """Human-readable rig status."""
    state = "up" if st["up"] else ("partly built" if st["hosts"] else "down")
    lines = [f"rig {st['rig']}: {state} ({st['mode']}), state {st['state_dir']}"]
    for p in st["paths"]:
        lines.append(
            f"  path {p['name']:<10} {p['kind']:<8} client {p['client_if']} {p['client_addr']}"
            f" via {p['router']}"
        )
    for host, info in st["hosts"].items():
        sshd = f"  mgmt {info['mgmt_addr']}  sshd {info['sshd']}" if "sshd" in info else ""
        lines.append(f"  host {host:<7} netns {info['namespace']}{sshd}")
        lines += [f"      link     {x}" for x in info["links"] if not x.startswith("lo ")]
        lines += [f"      qdisc    {q}" for q in info["qdiscs"] if "noqueue" not in q]
        lines += [f"      endpoint {e}" for e in info["mptcp_endpoints"]]
    return "\n".join(lines)
