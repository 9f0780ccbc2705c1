"""playbooks/ and inventory/: ansible-lint (production profile), syntax checks, role hygiene,
and the example vault. No hosts are contacted here; tests/ansible/test_converge.py converges
site.yml against the virtual rig."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
ROLES = sorted(p for p in (PLAYBOOKS / "roles").iterdir() if p.is_dir())
LAB = REPO / "inventory" / "lab.example"
VIRTUAL = REPO / "inventory" / "virtual"
BIN = Path(sys.executable).parent


def ansible_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
        "ANSIBLE_HOME": str(tmp_path / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }


@pytest.mark.slow
def test_ansible_lint_production_profile(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "ansible-lint"), "--profile", "production", "--nocolor", "playbooks/"],
        cwd=REPO, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Profile 'production' was required, and it passed." in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("playbook", "inventory"),
    [("site.yml", LAB), ("site.yml", VIRTUAL), ("rig.yml", VIRTUAL)],
    ids=["site-lab", "site-virtual", "rig-virtual"],
)
def test_syntax_check(playbook: str, inventory: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", str(inventory),
         str(PLAYBOOKS / playbook)],
        cwd=REPO, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stderr.count("ERROR")) == (0, 0), done.stderr
    assert f"playbook: {PLAYBOOKS / playbook}" in done.stdout


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_documents_and_types_every_variable(role: Path) -> None:
    text = (role / "defaults" / "main.yml").read_text()
    defaults = yaml.safe_load(text) or {}
    undocumented = [k for k in defaults if not re.search(rf"^# {k}\b", text, re.M)]
    unprefixed = [k for k in defaults if not k.startswith(f"{role.name}_")]
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    typed = set(spec["argument_specs"]["main"]["options"])
    assert (undocumented, unprefixed, sorted(set(defaults) ^ typed)) == ([], [], [])


def test_templates_start_with_ansible_managed() -> None:
    templates = sorted(PLAYBOOKS.glob("roles/*/templates/*.j2"))
    firsts = {t.name: t.read_text().splitlines()[0] for t in templates}
    assert firsts == {t.name: "{{ ansible_managed | comment }}" for t in templates}
    assert len(templates) >= 4


def test_lab_inventory_has_the_documented_groups(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(LAB), "--graph"],
        env=ansible_env(tmp_path), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    groups = set(re.findall(r"@(\w+):", done.stdout))
    assert groups == {"all", "ungrouped", "mptcp_client", "mptcp_server", "wifi_ap", "cellular",
                      "impairment"}  # fmt: skip


def test_example_vault_opens_with_the_documented_password() -> None:
    from ansible.parsing.vault import VaultLib, VaultSecret

    raw = yaml.load((LAB / "group_vars/all/vault.yml").read_text(), Loader=VaultValueLoader)
    secret = VaultSecret((LAB / "vault-password.example").read_bytes().strip())
    passphrase = VaultLib([("default", secret)]).decrypt(raw["vault_wifi_passphrase"]).decode()
    assert 8 <= len(passphrase) <= 63
    # The plaintext appears in no committed file: only the vault holds it, encrypted.
    hits = [p for p in REPO.glob("inventory/**/*") if p.is_file() and passphrase in p.read_text()]
    assert hits == []


class VaultValueLoader(yaml.SafeLoader):
    """YAML loader that returns `!vault` values as their ciphertext."""


VaultValueLoader.add_constructor("!vault", lambda loader, node: loader.construct_scalar(node))


def render(template: Path, dest: Path, extra: dict[str, object], tmp_path: Path) -> str:
    """Render a role template with Ansible's own template module on localhost."""
    (tmp_path / "vars.yml").write_text(yaml.safe_dump(extra))
    done = subprocess.run(
        [str(BIN / "ansible"), "localhost", "-c", "local", "-m", "ansible.builtin.template",
         "-a", f"src={template} dest={dest} mode=0600", "-e", f"@{tmp_path / 'vars.yml'}"],
        env=ansible_env(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return dest.read_text()


AP_VARS: dict[str, object] = {
    "wifi_ap_interface": "wlan0", "wifi_ap_conf_dir": "/run/x", "wifi_ap_instance": "mprig",
    "wifi_ap_ssid": "lab", "wifi_ap_country": "DE", "wifi_ap_channel": 36, "wifi_ap_mode": "ac",
    "wifi_ap_passphrase": "correct horse battery",
}  # fmt: skip


@pytest.mark.skipif(not Path("/usr/sbin/hostapd").exists(), reason="needs hostapd (make setup)")
def test_hostapd_validator_accepts_the_rendered_config_and_rejects_a_bad_one(
    tmp_path: Path,
) -> None:
    role = PLAYBOOKS / "roles" / "wifi_ap"
    conf = tmp_path / "hostapd.conf"
    text = render(role / "templates" / "hostapd.conf.j2", conf, AP_VARS, tmp_path)
    assert [ln for ln in text.splitlines() if ln.startswith(("hw_mode", "ieee80211"))] == [
        "ieee80211d=1", "hw_mode=a", "ieee80211n=1", "ieee80211ac=1",
    ]  # fmt: skip
    check = [str(role / "files" / "hostapd-check"), str(conf)]
    assert subprocess.run(check, capture_output=True, timeout=30).returncode == 0
    bad = render(role / "templates" / "hostapd.conf.j2", conf,
                 {**AP_VARS, "wifi_ap_passphrase": "short"}, tmp_path)  # fmt: skip
    assert "wpa_passphrase=short" in bad
    done = subprocess.run(check, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stderr.strip().split(":")[1:]) == (
        1, [" invalid WPA passphrase length 5 (expected 8..63)"],
    )  # fmt: skip


@pytest.mark.skipif(not Path("/usr/sbin/wpa_supplicant").exists(), reason="needs wpasupplicant")
def test_wpa_supplicant_validator_never_prints_the_passphrase(tmp_path: Path) -> None:
    role = PLAYBOOKS / "roles" / "wifi_client"
    conf = tmp_path / "wpa.conf"
    client = {"wifi_client_conf_dir": "/run/x", "wifi_client_ssid": "lab", "wifi_client_bssid": ""}
    check = [str(role / "files" / "wpa-supplicant-check"), str(conf)]
    render(role / "templates" / "wpa_supplicant.conf.j2", conf,
           {**client, "wifi_client_passphrase": "correct horse battery"}, tmp_path)  # fmt: skip
    assert subprocess.run(check, capture_output=True, timeout=30).returncode == 0
    render(role / "templates" / "wpa_supplicant.conf.j2", conf,
           {**client, "wifi_client_passphrase": "secret7"}, tmp_path)  # fmt: skip
    done = subprocess.run(check, capture_output=True, text=True, timeout=30)
    assert (done.returncode, "secret7" in done.stdout + done.stderr) == (1, False)
