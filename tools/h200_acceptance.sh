#!/bin/bash
# issue 34: the acceptance run on a real GPU host, over real OpenSSH, the agent pushed as `sweep run`
# pushes it (loaded from stdin on each host), every figure beside the owner of the fact.
#   tools/h200_acceptance.sh OUTDIR        (as root, from anywhere; reads .accept/ of the repository)
# .accept/deb: Debian 12 openssh-server, openssh-client and their libraries (dpkg -x, LD_LIBRARY_PATH),
#              sudo (installed with dpkg -i only when the host has none; removed again at the end)
# .accept/whl: the controller's wheels, installed into a temporary folder (pip --no-index --no-deps); `tools/accept_wheels.sh .accept/whl` writes them
# The device takes at most 64 MiB of working tree and carried paths: carry .accept/deb and .accept/whl only, and leave out
# of .accept/deb the libraries Ubuntu 24.04 has (libssl3, libgcrypt20, libsystemd0, libzstd1, liblzma5, libudev1: 3.7 MB).
# Hosts: one sshd per loopback alias 127.0.0.2..9 (port 22; ACCEPT_NET=127.x.y for another /24). Cases, each independent (a failure is a row):
# plain on 8 aliases; --load 10; --speed on one alias; --speed on two at once (contended); --wrap of a
# bf16 matmul with --metric; --transport openssh; user op without --become; op with --become and a
# NOPASSWD rule; op with --become where sudo is not on PATH. Owners: nvidia-smi -q -x, nvidia-smi samples
# during the load, tools/torch_speed.py right after each --speed, the benchmark run unwrapped, dmesg.
# Never changes a GPU setting (nvidia-smi -q before and after, diffed), leaves nothing running.
# Prints the table (tools/h200_acceptance_table.py) and keeps it in OUTDIR/table.md.
set -u
OUTDIR=${1:?usage: tools/h200_acceptance.sh OUTDIR}
REPO=$(cd "$(dirname "$0")/.." && pwd)
ACC=${ACCEPT:-$REPO/.accept}
mkdir -p "$OUTDIR/owner" "$OUTDIR/cases" && OUTDIR=$(cd "$OUTDIR" && pwd) || exit 2
W=$(mktemp -d /tmp/sweep-accept.XXXXXX) && chmod 755 "$W" || exit 2
HPY=${HOST_PYTHON:-/usr/bin/python3}                       # what a session on each alias runs the agent with
TPY=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}          # the host's training python (CUDA torch)
CPY=${CONTROLLER_PYTHON:-$TPY}; [ -x "$CPY" ] || CPY=python3  # runs sweep (needs pip for the wheels)
USER_OP=${OP_USER:-op}
NET=${ACCEPT_NET:-127.0.0}  # the aliases NET.2 .. NET.9 (a dry run elsewhere picks a free /24 of 127/8)
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUTDIR/acceptance.log" >&2; }
PIDS=(); CREATED_USER=""; INSTALLED_SUDO=""

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
    rm -f /etc/sudoers.d/sweep-accept
    [ -n "$CREATED_USER" ] && userdel "$CREATED_USER" 2>/dev/null
    [ -n "$INSTALLED_SUDO" ] && dpkg -r --force-depends sudo > /dev/null 2>&1
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_controller() {  # the wheels into $W/site; sweep itself from the repository
    if ls "$ACC"/whl/*.whl > /dev/null 2>&1; then
        if "$CPY" -m pip --version > /dev/null 2>&1; then
            "$CPY" -m pip install -q --no-index --no-deps --target "$W/site" "$ACC"/whl/*.whl > "$OUTDIR/pip.log" 2>&1 \
                || log "pip install of the wheels failed (see pip.log)"
        else  # a venv without pip (uv): a wheel is a zip of what lands in site-packages
            "$CPY" -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" \
                "$W/site" "$ACC"/whl/*.whl || log "cannot unpack the wheels"
        fi
    fi
    export PYTHONPATH="$REPO:$W/site"
    "$CPY" -c "import sweep.cli, paramiko, pandas, jinja2, typer, jsonschema, ClusterShell, orjson, pynvml" \
        || { log "the controller cannot import its dependencies with $CPY"; return 1; }
}

setup_ssh() {  # Debian's sshd and ssh unpacked beside their libraries, unless the host has its own
    SSHD=$(command -v sshd || echo /usr/sbin/sshd); SSHBIN=$(dirname "$(command -v ssh || echo /usr/bin/ssh)")
    LIBS=""
    if [ ! -x "$SSHD" ] || ! command -v ssh > /dev/null || [ -n "${ACCEPT_UNPACK:-}" ]; then
        for deb in "$ACC"/deb/*.deb; do dpkg -x "$deb" "$W/root" || log "cannot unpack $deb"; done
        SSHD=$W/root/usr/sbin/sshd; SSHBIN=$W/root/usr/bin
        LIBS=$W/root/usr/lib/x86_64-linux-gnu:$W/root/lib/x86_64-linux-gnu
    fi
    [ -x "$SSHD" ] || { log "no sshd (put openssh-server's .deb in $ACC/deb)"; return 1; }
    id sshd > /dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd
    mkdir -p /run/sshd && chmod 755 /run/sshd
    LD_LIBRARY_PATH=$LIBS "$SSHBIN/ssh-keygen" -q -t ed25519 -N '' -f "$W/hostkey" -C host || return 1
    LD_LIBRARY_PATH=$LIBS "$SSHBIN/ssh-keygen" -q -t ed25519 -N '' -f "$W/client" -C sweep || return 1
    cp "$W/client.pub" "$W/authorized_keys" && chmod 644 "$W/authorized_keys"
    mkdir -p "$W/nosudo-bin" "$W/home-ctl" && ln -sf "$HPY" "$W/nosudo-bin/python3"
    ln -sf "$(command -v nvidia-smi)" "$W/nosudo-bin/nvidia-smi"
    : > "$W/known_hosts"
    for i in 2 3 4 5 6 7 8 9; do
        setenv=""; [ "$i" = 9 ] && setenv="SetEnv PATH=$W/nosudo-bin"  # alias .9: sudo not on PATH
        cat > "$W/sshd-$i.conf" <<EOF
ListenAddress $NET.$i:22
HostKey $W/hostkey
PidFile none
UsePAM no
AuthorizedKeysFile $W/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
MaxStartups 200:30:400
MaxSessions 64
UseDNS no
PrintMotd no
LogLevel ERROR
$setenv
EOF
        LD_LIBRARY_PATH=$LIBS "$SSHD" -D -e -f "$W/sshd-$i.conf" > "$OUTDIR/sshd-$i.log" 2>&1 &
        PIDS+=($!)
        echo "$NET.$i $(cut -d' ' -f1,2 "$W/hostkey.pub")" >> "$W/known_hosts"
    done
    for _ in $(seq 50); do
        "$HPY" -c "import socket; [socket.create_connection(('$NET.%d' % i, 22), 1).close() for i in range(2, 10)]" \
            2> /dev/null && return 0
        sleep 0.1
    done
    log "sshd did not listen on every alias (see sshd-*.log)"; return 1
}

setup_users() {  # op: a login user; NOPASSWD for the host python through sudo (dpkg -i sudo where absent)
    if ! id "$USER_OP" > /dev/null 2>&1; then
        useradd -M -d "$W/home-op" -s /bin/bash -p '*' "$USER_OP" && CREATED_USER=$USER_OP
    fi
    mkdir -p "$W/home-op" && chown "$USER_OP" "$W/home-op"
    if ! command -v sudo > /dev/null; then
        deb=$(ls "$ACC"/deb/sudo_*.deb 2> /dev/null | head -1)
        # Ubuntu 24.04 names some of Debian's dependencies otherwise (libssl3t64): then force them
        if [ -n "$deb" ] && { dpkg -i "$deb" || dpkg -i --force-depends "$deb"; } > "$OUTDIR/sudo-install.log" 2>&1 \
            && command -v sudo > /dev/null; then INSTALLED_SUDO=1
        else log "no sudo (and none installed from $ACC/deb): the passwordless-sudo case will say so"; fi
    fi
    mkdir -p /etc/sudoers.d
    echo "$USER_OP ALL=(root) NOPASSWD: $HPY" > /etc/sudoers.d/sweep-accept && chmod 440 /etc/sudoers.d/sweep-accept
}

inventory() {  # inventory FILE USER "NAME:ALIAS ..." [extra host vars]
    local file=$1 user=$2 hosts=$3 extra=${4:-}
    { echo "[gpus]"
      for h in $hosts; do echo "${h%%:*} ansible_host=$NET.${h##*:}"; done
      echo "[all:vars]"
      echo "ansible_user=$user"
      echo "ansible_ssh_private_key_file=$W/client"
      echo "ansible_python_interpreter=$HPY"
      echo "sweep_interpreters=$TPY"
      [ -n "$extra" ] && echo "$extra"; } > "$file"
}

ORDER=0
run_case() {  # run_case NAME KIND INVENTORY [sweep run options...]: one sweep, its meta, never fatal
    local name=$1 kind=$2 inv=$3; shift 3
    local dir=$OUTDIR/cases/$name; mkdir -p "$dir"; ORDER=$((ORDER + 1))
    local t0 t1 rc
    t0=$(date +%s.%N)
    HOME=$W/home-ctl timeout 240 "$CPY" -m sweep.cli run "$inv" --known-hosts "$W/known_hosts" -o "$dir/run" "$@" \
        > "$dir/stdout.txt" 2> "$dir/stderr.txt"; rc=$?
    t1=$(date +%s.%N)
    local wall; wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    printf '{"order": %d, "kind": "%s", "rc": %d, "wall_s": %s%s}\n' "$ORDER" "$kind" "$rc" "$wall" \
        "${META_EXTRA:-}" > "$dir/meta.json"
    log "$name: exit $rc in $wall s"
}

ALL8="h02:2 h03:3 h04:4 h05:5 h06:6 h07:7 h08:8 h09:9"
nvidia-smi -q > "$OUTDIR/before-q.txt"
nvidia-smi -q -x > "$OUTDIR/owner/smi.xml"
dmesg 2> /dev/null | grep -c "NVRM: Xid" > "$OUTDIR/owner/dmesg-xid.txt"
setup_controller && setup_ssh && setup_users || { log "setup failed: no case can run"; exit 1; }
log "setup done (sshd $SSHD${LIBS:+, libraries under $W/root})"

inventory "$W/all.ini" root "$ALL8"
run_case plain plain "$W/all.ini"

inventory "$W/one.ini" root "h02:2"
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 250 \
    > "$OUTDIR/owner/load-smi.raw" 2> /dev/null &
SMI=$!; PIDS+=($SMI)
run_case load10 load "$W/one.ini" --load 10
kill "$SMI" 2> /dev/null; wait "$SMI" 2> /dev/null
# clocks.sm, the idle power (first sample), power now: what h200_acceptance_table.py reads
idle=$(head -1 "$OUTDIR/owner/load-smi.raw" | cut -d, -f2 | tr -d ' ')
awk -F', *' -v idle="${idle:-100}" '{print $1 ", " idle ", " $2}' "$OUTDIR/owner/load-smi.raw" > "$OUTDIR/owner/load-smi.csv"

META_EXTRA=', "torch": "torch-speed1.json"' run_case speed1 speed "$W/one.ini" --speed
"$TPY" "$REPO/tools/torch_speed.py" > "$OUTDIR/owner/torch-speed1.json" 2> "$OUTDIR/owner/torch-speed1.err"

inventory "$W/two.ini" root "h03:3 h04:4"  # two tiers on one GPU at once: each sees the other's children
META_EXTRA=', "torch": "torch-speed2.json"' run_case speed2-contended speed "$W/two.ini" --speed --forks 2
"$TPY" "$REPO/tools/torch_speed.py" > "$OUTDIR/owner/torch-speed2.json" 2> "$OUTDIR/owner/torch-speed2.err"

cat > "$W/bench.py" <<'EOF'
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(20): a @ b
torch.cuda.synchronize(); s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
best = 0.0
for _ in range(10):
    s.record(); [a @ b for _ in range(20)]; e.record(); e.synchronize()
    best = max(best, 2 * 8192 ** 3 * 20 / (s.elapsed_time(e) / 1000) / 1e12)
print("bf16: %.1f TFLOP/s" % best)
EOF
chmod 644 "$W/bench.py"
inventory "$W/wrap.ini" root "h05:5"
run_case wrap wrap "$W/wrap.ini" --metric 'tflops=bf16: ([0-9.]+) (TFLOP/s)' --wrap -- "$TPY" "$W/bench.py"
"$TPY" "$W/bench.py" > "$OUTDIR/owner/wrap-unwrapped.txt" 2>&1

PATH=$SSHBIN:$PATH LD_LIBRARY_PATH=$LIBS run_case openssh openssh "$W/all.ini" --transport openssh

inventory "$W/op.ini" "$USER_OP" "h06:6"
META_EXTRA=', "expect_user": "'"$USER_OP"'"' run_case user-no-become user "$W/op.ini"
inventory "$W/op-become.ini" "$USER_OP" "h07:7"
META_EXTRA=', "expect_user": "root"' run_case user-become-sudo user "$W/op-become.ini" --become
inventory "$W/op-nosudo.ini" "$USER_OP" "h09:9"
run_case user-become-no-sudo nosudo "$W/op-nosudo.ini" --become

nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv > "$OUTDIR/apps-after.csv"
nvidia-smi -q > "$OUTDIR/after-q.txt"
settings="Power Limit|ECC Mode|Persistence|MIG Mode|Compute Mode|Applications Clocks|Accounting Mode"
settings_of() { grep -E "$settings" -A2 "$1" | grep -v -i -E "draw|reading|current"; }  # settings, not readings
diff <(settings_of "$OUTDIR/before-q.txt") <(settings_of "$OUTDIR/after-q.txt") \
    > "$OUTDIR/settings-diff.txt" && log "GPU settings unchanged" || log "GPU settings CHANGED: settings-diff.txt"
log "compute processes left: $(($(wc -l < "$OUTDIR/apps-after.csv") - 1))"
"$CPY" "$REPO/tools/h200_acceptance_table.py" "$OUTDIR" | tee "$OUTDIR/table.md"
log "done: $(git -C "$REPO" rev-parse --short HEAD 2> /dev/null) $(date -u +%Y-%m-%dT%H:%MZ)"
