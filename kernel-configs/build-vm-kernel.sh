#!/usr/bin/env bash
# `make kernel-vm`: a small bzImage for the VM lab from Debian's linux-source-6.1, with the
# upstream patch series (0002 adds net.mptcp.proactive_sched) and upstream-mptcp.config.
#
# Why a bzImage and not Debian packages: `vng --run bzImage` boots it directly, so the VM tests
# check the patched kernel without the kernel role's bindeb-pkg/install/reboot cycle.
# Layout of $MPRIG_KERNEL_VM (default /var/cache/mprig/kernel-vm):
#   src/ hard-linked patched copy of the extracted tree (the shared tree is never written)
#   build/ the O= build directory (kept: a rerun only recompiles what changed)
#   bzImage, release, build-seconds  the results, each replaced atomically (tmp + mv)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
py=${PYTHON:-$repo/.venv/bin/python}
out=${MPRIG_KERNEL_VM:-/var/cache/mprig/kernel-vm}
jobs=${MPRIG_KERNEL_JOBS:-$(nproc)}

log() { printf '%s kernel-vm: %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# Write $2 into file $1 atomically: readers see the old or the new content, never a part.
put() { printf '%s\n' "$2" > "$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"; }

# Extract once (shared lock and stamp with tests/integration/test_kernel_configs.py), then a
# fresh patched copy: a series edit must never meet a half-patched tree from a previous run.
log "patched copy of linux-source into $out/src"
mkdir -p "$out"
rm -rf "$out/src"
(cd "$repo/tests/integration" && "$py" - "$out/src" <<'PY'
import sys
from pathlib import Path

from test_kernel_configs import extracted_tree, patched_copy, upstream_series

patched_copy(extracted_tree(), Path(sys.argv[1]), upstream_series())
PY
)

# virtme-ng's defconfig plus what its guests need (virtio, 9p, ...), then our fragments
# (later files win), then olddefconfig resolves the dependencies.
log "config: virtme defconfig + upstream-mptcp.config + vm-small.config"
cd "$out/src"
rm -f "$out/build/.config"
"$repo/.venv/bin/virtme-configkernel" --defconfig "O=$out/build" > "$out/config.log" 2>&1
scripts/kconfig/merge_config.sh -m -O "$out/build" "$out/build/.config" \
    "$here/upstream-mptcp.config" "$here/vm-small.config" >> "$out/config.log" 2>&1
make -s "O=$out/build" olddefconfig >> "$out/config.log" 2>&1
for want in CONFIG_MPTCP=y CONFIG_NET_SCH_NETEM=y CONFIG_VIRTIO_PCI=y CONFIG_NET_9P_VIRTIO=y \
    CONFIG_BRIDGE=y CONFIG_CFG80211=y CONFIG_MAC80211=y CONFIG_MAC80211_HWSIM=y; do
    grep -qx "$want" "$out/build/.config" || { log "config lost $want"; exit 1; }
done

log "make -j$jobs bzImage (nice 19)"
start=$(date +%s)
nice -n 19 make -s "O=$out/build" "-j$jobs" bzImage
seconds=$(( $(date +%s) - start ))
release=$(make -s "O=$out/build" kernelrelease)
cp "$out/build/arch/x86/boot/bzImage" "$out/bzImage.tmp.$$" && mv -f "$out/bzImage.tmp.$$" "$out/bzImage"
put "$out/release" "$release"
put "$out/build-seconds" "$seconds"
log "built $release in ${seconds}s: $out/bzImage"
