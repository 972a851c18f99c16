# Sourced by the recording scripts once OUTDIR is set (`. "$(dirname "$0")/bundle.sh"`): the repository
# becomes the working folder, OUTDIR is made absolute (and created), and $A runs the agent, bundled by
# this host's python3 into a temporary folder removed on exit (it then carries that python's byte code;
# bundling needs nvidia-ml-py).
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || exit 2
BUILD=$(mktemp -d); trap 'rm -rf "$BUILD"' EXIT
export PYTHONUNBUFFERED=1
python3 -c "import sys; sys.path.insert(0, '.'); from sweep.collect.bundle import build_bundle; build_bundle('$BUILD/agent.pyz')" || exit 1
A="python3 -I -S $BUILD/agent.pyz"
