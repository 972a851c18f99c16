#!/bin/bash
# issue 52: bench/bench_workers.py on the lent multi-core device machine (as root), with Debian 12's sshd
# unpacked from .accept/deb (the machine has none) and the controller's wheels from .accept/whl.
#   tools/device_workers.sh OUTDIR [bench_workers.py arguments...]
set -u
OUTDIR=${1:?usage: tools/device_workers.sh OUTDIR [ARGS...]}; shift
REPO=$(cd "$(dirname "$0")/.." && pwd)
ACC=${ACCEPT:-$REPO/.accept}
W=$(mktemp -d /tmp/sweep-workers.XXXXXX) || exit 2
mkdir -p "$OUTDIR"
for deb in "$ACC"/deb/*.deb; do dpkg -x "$deb" "$W/root" || exit 2; done
python3 -m pip install -q --no-index --no-deps --target "$W/site" "$ACC"/whl/*.whl > "$OUTDIR/pip.log" 2>&1 || exit 2
LIBS=$W/root/usr/lib/x86_64-linux-gnu:$W/root/lib/x86_64-linux-gnu
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$LIBS" "$W/root/usr/sbin/sshd" > "$W/sshd" && chmod 755 "$W/sshd"
id sshd > /dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd
mkdir -p /run/sshd && chmod 755 /run/sshd
ulimit -n 1048576 2>/dev/null || ulimit -n 65536
export SWEEP_SSHD=$W/sshd PYTHONPATH=$REPO:$W/site PYTHONUNBUFFERED=1
cd "$REPO" && python3 bench/bench_workers.py --out "$OUTDIR/workers.md" "$@"
rc=$?
rm -rf "$W"
exit $rc
