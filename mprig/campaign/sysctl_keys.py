"""The sysctls a variant may set with `sysctls:`: an allow-list, so that a typo or a key
the runner cannot restore is refused by `mprig validate`, not found on a host mid-campaign.

Every key is per network namespace (a virtual rig's hosts are namespaces: a global key such
as vm.* or net.core.rmem_max would change the machine, and could leak into the next
campaign), writable, and readable back as one value, so the runner can record it and
restore the campaign's baseline after each run. Keys that a variant field already sets
are refused with the field's name, so each setting has one spelling.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# net.ipv4.tcp_* keys per network namespace (Documentation/networking/ip-sysctl.rst, 6.x).
_TCP = """
abort_on_overflow adv_win_scale app_win autocorking backlog_ack_defer base_mss
challenge_ack_limit comp_sack_delay_ns comp_sack_nr comp_sack_slack_ns dsack early_demux
early_retrans ecn ecn_fallback fack fastopen fastopen_blackhole_timeout_sec fin_timeout frto
fwmark_accept invalid_ratelimit keepalive_intvl keepalive_probes keepalive_time l3mdev_accept
limit_output_bytes low_latency max_reordering max_syn_backlog max_tw_buckets migrate_req
min_rtt_wlen min_snd_mss min_tso_segs moderate_rcvbuf mtu_probe_floor mtu_probing
no_metrics_save no_ssthresh_metrics_save notsent_lowat orphan_retries pacing_ca_ratio
pacing_ss_ratio pingpong_thresh plb_cong_thresh plb_enabled plb_idle_rehash_rounds
plb_rehash_rounds plb_suspend_rto_sec probe_interval probe_threshold recovery reflect_tos
reordering retrans_collapse retries1 retries2 rfc1337 rto_max_ms rto_min_us sack
shrink_window slow_start_after_idle stdurg syn_linear_timeouts syn_retries synack_retries
syncookies thin_linear_timeouts timestamps tso_rtt_log tso_win_divisor tw_reuse
tw_reuse_delay window_scaling workaround_signed_windows
"""

# net.mptcp.* (Documentation/networking/mptcp-sysctl.rst), proactive_sched from the patch
# series in kernel-configs/patches, and the out-of-tree multipath-tcp.org kernel's mptcp_*.
_MPTCP = """
add_addr_timeout allow_join_initial_addr_port blackhole_timeout checksum_enabled
close_timeout stale_loss_cnt syn_retrans_before_tcp_fallback proactive_sched
mptcp_checksum mptcp_syn_retries mptcp_debug
"""

SETTABLE: frozenset[str] = frozenset(
    [f"net.ipv4.tcp_{k}" for k in _TCP.split()] + [f"net.mptcp.{k}" for k in _MPTCP.split()]
)

# Keys that a variant field sets: one spelling per setting.
FIELD_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "net.ipv4.tcp_congestion_control": "cc",
        "net.ipv4.tcp_rmem": "rmem",
        "net.ipv4.tcp_wmem": "wmem",
        "net.mptcp.enabled": "protocol",
        "net.mptcp.mptcp_enabled": "protocol",
        "net.mptcp.pm_type": "path_manager",
        "net.mptcp.path_manager": "path_manager",
        "net.mptcp.mptcp_path_manager": "path_manager",
        "net.mptcp.scheduler": "scheduler",
        "net.mptcp.mptcp_scheduler": "scheduler",
    }
)

ALLOWED_HELP = "the per-namespace net.ipv4.tcp_* and net.mptcp.* keys listed in docs/campaign.md"


def key_problem(key: str) -> str | None:
    """Why `key` may not appear in a variant's `sysctls:`, or None when it may."""
    if key in SETTABLE:
        return None
    if key in FIELD_KEYS:
        return f"set by the variant's `{FIELD_KEYS[key]}:`; use that instead"
    return f"not a sysctl mprig sets and restores; allowed: {ALLOWED_HELP}"
