#!/bin/bash
# Raw host facts for the agent's PCIe / NVLink / Xid / host checks, as small text files in OUTDIR.
# Read-only. Each file starts with the command that made it; what cannot be read says so.
#   tools/host_facts.sh OUTDIR
set -u
D=${1:?usage: tools/host_facts.sh OUTDIR}; mkdir -p "$D" || exit 2
run() { local f=$1; shift; { echo "\$ $*"; timeout 20 "$@" 2>&1; echo "[rc=$?]"; } > "$D/$f"; }
sh_() { local f=$1; shift; { echo "\$ $*"; timeout 20 bash -c "$*" 2>&1; echo "[rc=$?]"; } > "$D/$f"; }
{
    echo "# PCI devices of vendor 0x10de and their parent bridges (sysfs)"
    for dev in /sys/bus/pci/devices/*; do
        [ "$(cat "$dev/vendor" 2>/dev/null)" = "0x10de" ] || continue
        real=$(readlink -f "$dev"); echo "== $dev -> $real"
        p=$real
        while [ -n "$p" ] && [ "$p" != "/sys/devices" ] && [ -e "$p/vendor" ]; do
            echo "-- $p"
            for f in vendor device class current_link_speed current_link_width max_link_speed max_link_width numa_node; do
                printf '  %s: %s\n' "$f" "$(cat "$p/$f" 2>&1)"
            done
            p=$(dirname "$p")
        done
    done
    echo "# ls -l /sys/bus/pci/devices/"
    ls -l /sys/bus/pci/devices/ 2>&1
} > "$D/pci-sysfs.txt"
run nvlink-status.txt nvidia-smi nvlink -s
run nvlink-errors.txt nvidia-smi nvlink -e
run topo.txt nvidia-smi topo -m
run smi-q-temp-clock-perf.txt nvidia-smi -q -d TEMPERATURE,CLOCK,PERFORMANCE
{
    for f in /dev/kmsg /var/log/kern.log /var/log/syslog /var/log/messages; do
        if [ -e "$f" ]; then
            if [ "$f" = /dev/kmsg ]; then
                out=$(timeout 3 dd if=/dev/kmsg iflag=nonblock bs=8192 count=4000 2>/dev/null | tr -d '\0'); rc=$?
                echo "$f: exists, read rc=$rc, $(printf '%s' "$out" | wc -l) lines"
                printf '%s\n' "$out" | grep -E 'NVRM|Xid|nvidia' | tail -40
            elif [ -r "$f" ]; then echo "$f: readable, $(wc -l < "$f") lines"; grep -E 'NVRM|Xid' "$f" | tail -40
            else echo "$f: exists, not readable"; fi
        else echo "$f: absent"; fi
    done
    echo "\$ journalctl -k"; if command -v journalctl >/dev/null; then timeout 10 journalctl -k --no-pager 2>&1 | grep -E 'NVRM|Xid|No journal|Failed' | tail -40; echo "[rc=${PIPESTATUS[0]}]"; else echo "journalctl: not installed"; fi
    echo "\$ dmesg"; timeout 10 dmesg 2>&1 | grep -E 'NVRM|Xid|Operation not permitted|denied' | tail -40; echo "[rc=${PIPESTATUS[0]}]"
} > "$D/kernel-log.txt"
sh_ infiniband.txt 'ls -la /sys/class/infiniband/ /sys/class/infiniband/*/ports/*/ 2>&1 | head -80'
sh_ host-tuning.txt 'for f in /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor /sys/devices/system/cpu/cpufreq/policy0/scaling_governor /proc/sys/kernel/numa_balancing /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag /proc/cmdline; do printf "%s: " $f; cat $f 2>&1 || true; done; ls /sys/devices/system/cpu/cpu0/ 2>&1 | tr "\n" " "; echo; grep -E "^(nvidia|nouveau|nvidia_peermem|nvidia_uvm|nvidia_drm|nvidia_modeset|ib_core|mlx5_core) " /proc/modules; echo "numa nodes: $(ls -d /sys/devices/system/node/node* 2>&1 | tr "\n" " ")"; uname -a; cat /proc/driver/nvidia/version'
python3 "$(dirname "$0")/pynvml_facts.py" > "$D/pynvml-facts.txt" 2>&1
