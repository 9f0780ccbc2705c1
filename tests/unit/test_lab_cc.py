"""The lab rig's congestion-control preflight: which algorithms, which hosts, which command."""

from __future__ import annotations

import shlex
from pathlib import Path

from mprig.campaign.spec import Variant
from mprig.stack import knobs, lab_cc


def test_needed_maps_presets_to_kernel_names_once_each() -> None:
    variants = [
        Variant(name="a", cc="tcpdoor", recovery="tcpdoor"),
        Variant(name="b", cc="uncoupled"),
        Variant(name="c", cc="door"),
        Variant(name="d", cc="lia"),
    ]
    assert knobs.congestion_controls(variants) == ["door", "reno", "lia"]


def test_missing_lists_per_host_what_it_lacks() -> None:
    offered = {"client": ("reno", "cubic", "prr"), "server": ("reno", "cubic")}
    assert lab_cc.missing(offered, ["reno", "prr"]) == {"server": ["prr"]}
    assert lab_cc.missing(offered, ["cubic"]) == {}


def test_message_gives_the_site_yml_command_with_the_campaigns_programs() -> None:
    host, text = lab_cc.message(
        {"server": ["prr", "lia", "vegas"], "client": ["prr"]}, Path("inventory/my lab")
    )
    command = text.split("Register mprig's BPF programs with: ")[1].split(". vegas")[0]
    assert host == "server"
    assert shlex.split(command) == [
        "ANSIBLE_CONFIG=playbooks/ansible.cfg", ".venv/bin/ansible-playbook",
        "-i", "inventory/my lab", "playbooks/site.yml", "--limit", "client,server",
        "-e", '{"bpf_cc_programs": ["prr", "lia"]}',
    ]  # fmt: skip
    assert text.startswith(
        "congestion control not available (server lacks prr lia vegas; client lacks prr). "
    )
    assert text.endswith(
        ". vegas: not an mprig program; load its kernel module (modprobe tcp_<name>) "
        "or choose another cc"
    )
