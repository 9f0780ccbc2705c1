"""path_manager userspace (mprig/stack/userpm.py): mptcpd with mprig's plugin on the client, pm_type
1 there and 0 on the server, no client endpoints, and mptcpd's log read back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_commands import LINKS, make_run

from mprig.campaign.spec import Variant
from mprig.errors import UsageError
from mprig.run import commands
from mprig.stack import isolation, knobs, userpm
from mprig.stack.isolation import HostSettings

ROLE_DEFAULTS = (
    Path(__file__).resolve().parents[2] / "playbooks/roles/mptcpd_plugin/defaults/main.yml"
)
USERSPACE = Variant(name="upm", path_manager="userspace")

# mptcpd 0.12's stderr with the plugin, from a two-path transfer in namespaces on 6.18
LOG = """\
mprig_fullmesh: loaded; interfaces h4c1,h4c2
mprig_fullmesh: path manager ready
mprig_fullmesh: token e3db60b9: established 10.121.1.1:54461 -> 10.121.1.2:5999 (client side)
mprig_fullmesh: token e3db60b9: add subflow 10.121.2.1:0 (local id 1) -> 10.121.1.2:5999: requested
mprig_fullmesh: token e3db60b9: subflow established 10.121.2.1:55677 -> 10.121.1.2:5999
mprig_fullmesh: token e3db60b9: closed
mprig_fullmesh: stopped
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "mprig_fullmesh.so").write_bytes(b"\x7fELF")
    monkeypatch.setenv("MPRIG_MPTCPD_PLUGIN_DIR", str(tmp_path))
    return tmp_path


def test_userspace_starts_mptcpd_with_the_plugin_on_the_client(plugin: Path) -> None:
    cmds = commands.build(make_run(USERSPACE), LINKS)
    argv = ["env", "MPRIG_FULLMESH_IFACES=wlan0,wwan0", "/usr/libexec/mptcpd", "--log=stderr",
            f"--plugin-dir={plugin}", "--load-plugins=mprig_fullmesh",
            "--path-manager=mprig_fullmesh"]  # fmt: skip
    assert [b for b in cmds.background if b[0] == "client"] == [("client", argv, "mptcpd.log")]


def test_only_the_variants_paths_interfaces(plugin: Path) -> None:
    run = make_run(Variant(name="upm", path_manager="userspace", paths=("cell",)))
    assert userpm.background(run, LINKS)[0][1][1] == "MPRIG_FULLMESH_IFACES=wwan0"


def test_kernel_and_rbpm_start_no_mptcpd(plugin: Path) -> None:
    for pm in ("kernel", "rbpm"):
        run = make_run(Variant(name="v", path_manager=pm))
        assert (userpm.background(run, LINKS), userpm.files(run)) == ([], [])
        assert userpm.ready_logs(run, lambda h: f"/r/{h}") == []


def test_missing_plugin_names_the_make_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MPRIG_MPTCPD_PLUGIN_DIR", str(tmp_path))
    with pytest.raises(UsageError, match="make mptcpd-plugin"):
        userpm.background(make_run(USERSPACE), LINKS)


def test_a_lab_client_uses_the_roles_plugin_directory_unchecked_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lab client has its own file system: mptcpd gets the directory the mptcpd_plugin
    role builds into, and this machine's missing plugin is no error."""
    monkeypatch.setenv("MPRIG_MPTCPD_PLUGIN_DIR", str(tmp_path))  # no plugin here
    cmds = commands.build(make_run(USERSPACE), LINKS, lab=True)
    (argv,) = [b[1] for b in cmds.background if b[0] == "client"]
    assert "--plugin-dir=/usr/local/lib/mprig/mptcpd-plugins" in argv
    defaults = yaml.safe_load(ROLE_DEFAULTS.read_text())
    assert Path(defaults["mptcpd_plugin_dir"]) == userpm.LAB_PLUGIN_DIR


def test_runner_waits_for_ready_and_fetches_the_log() -> None:
    run = make_run(USERSPACE)
    got = userpm.ready_logs(run, lambda h: f"/r/{h}")
    assert got == [("client", "/r/client/mptcpd.log", "mprig_fullmesh: path manager ready")]
    assert userpm.files(run) == ["mptcpd.log"]


def test_pm_type_1_on_the_client_only_and_no_endpoints() -> None:
    cmds = knobs.apply_commands(USERSPACE, LINKS)
    pm = {h: [a for a in argv if a.startswith("net.mptcp.pm_type")] for h, argv in cmds[:2]}
    assert pm == {"client": ["net.mptcp.pm_type=1"], "server": ["net.mptcp.pm_type=0"]}
    assert cmds[-1] == (
        "client",
        knobs.ip_batch(["mptcp limits set subflows 8 add_addr_accepted 8", "mptcp endpoint flush"]),
    )


def test_read_back_expects_what_was_set() -> None:
    base = {h: HostSettings() for h in ("client", "server")}
    want = isolation.expected(base, USERSPACE, LINKS, [])
    pm = {h: want[h].sysctls["net.mptcp.pm_type"] for h in ("client", "server")}
    assert (pm, want["client"].endpoints) == ({"client": "1", "server": "0"}, ())


def test_parse_log() -> None:
    assert userpm.parse_log(LOG) == userpm.LogSummary(
        ready=True, stopped=True, requested=1, refused=0, established=1, errors=()
    )


def test_parse_log_counts_refusals_and_errors() -> None:
    text = LOG.replace(": requested", ": Invalid argument") + "Unable to load plugins.\n"
    got = userpm.parse_log(text)
    assert (got.requested, got.refused, got.errors) == (1, 1, ("Unable to load plugins.",))


def test_problem(tmp_path: Path) -> None:
    run = make_run(USERSPACE)
    assert userpm.problem(tmp_path, run) == (
        "client: mptcpd's log mptcpd.log is missing (No such file or directory)"
    )
    (tmp_path / "mptcpd.log").write_text(LOG)
    assert userpm.problem(tmp_path, run) is None
    (tmp_path / "mptcpd.log").write_text(LOG.replace("mprig_fullmesh: stopped\n", ""))
    assert userpm.problem(tmp_path, run) == (
        "client: mptcpd exited before the run's end (no error logged)"
    )
    (tmp_path / "mptcpd.log").write_text("Unable to load path manager plugins.\n")
    assert userpm.problem(tmp_path, run) == (
        "client: mptcpd logged errors (Unable to load path manager plugins.); " + userpm.SETUP_HINT
    )
    assert userpm.problem(tmp_path, make_run(Variant(name="k"))) is None


def test_doctor_names_the_missing_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPRIG_MPTCPD_PLUGIN_DIR", str(tmp_path))
    monkeypatch.setattr(userpm, "MPTCPD", "/bin/sh")  # present everywhere
    assert userpm.doctor_check() == (
        False,
        f"{tmp_path}/mprig_fullmesh.so missing (make mptcpd-plugin)",
    )
    (tmp_path / "mprig_fullmesh.so").write_bytes(b"")
    assert userpm.doctor_check() == (True, f"/bin/sh, {tmp_path}/mprig_fullmesh.so")
