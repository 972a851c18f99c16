"""The agent payload: probe_agent plus the pynvml of the installed nvidia-ml-py, in one zipapp.

`build_bundle()` writes a .pyz that a bare `python3 -I -S agent.pyz` runs. Over SSH the agent's
sources go in on stdin, one zlib stream (`wire_bytes()`, 157 KB against the .pyz's 527 KB), to a
small bootstrap (`remote_command()`), which inflates them and imports the agent from memory:
nothing is written on the host, and (given a lifetime) the bootstrap ends the agent at the host's
deadline, saying so on stderr (`DEADLINE_MARK`), so nothing keeps running there either.
"""

from __future__ import annotations

import importlib.util
import io
import marshal
import shlex
import zipfile
import zlib
from pathlib import Path
from typing import Any

import probe_agent
from probe_agent.children import IMPORTER
from sweep.collect import become
from sweep.folders import SHARED, make_dirs
from sweep.collect.become import SUDO, become_user  # noqa: F401  (the engines' names for them)

SHEBANG = b"#!/usr/bin/env python3\n"
MAIN = "import sys\nfrom probe_agent.main import main\nsys.exit(main())\n"

# What the bootstrap writes on stderr (and exit 3) under a python older than the agent needs.
TOO_OLD_MARK = "sweep-agent: this python is too old"

# What the bootstrap writes on stderr (and its exit status) when it ends the agent at the host
# deadline: the controller reads it as a timeout, whichever of the two deadlines (its own, the
# host's) came first.
DEADLINE_MARK = "sweep-agent: ended at the host deadline"
DEADLINE_EXIT = 124
# the kernel's SIGALRM backstop, for an agent whose every thread is stuck (the mark's thread
# included): later than the controller's deadline, which has then already recorded the timeout
BACKSTOP_S = 2.0

# The bootstrap's (and the become guard's) python runs isolated, as the agent's children run `-I
# -S`: with `-I` (Python 3.4 and later, 3.8 included) it reads no PYTHON* variable of the login
# session (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME), no user site-packages (~/.local/lib/pythonX.Y: a
# sitecustomize there) and puts neither the working folder nor the script's on sys.path (a
# zipfile.py in the login folder), so nothing of the login user's loads into the agent, nor into
# root's python under --become. A python without -I (2.x, 3.0-3.3) answers "Unknown option: -I":
# python_too_old (sweep.collect.outcome).
ISOLATED = "-I"

MAIN_CALL = "from probe_agent.main import main\nsys.exit(main())\n"  # the bootstrap's last lines

# Runs on the host under its python3 (3.8+): read the zip from stdin, import from memory (the
# agent's own IMPORTER, which its children use too: probe_agent.children), run main. Its first lines
# parse and run under Python 2 and old 3.x, so that such a host says so in words.
BOOTSTRAP = (
    r"""
import sys
if sys.version_info < (3, 8):
    sys.stderr.write('"""
    + TOO_OLD_MARK
    + r""": Python %s; the agent needs 3.8 or later\n' % sys.version.split()[0])
    sys.exit(3)
if sys.argv[1].endswith('+'):  # under become: tell the guard that sudo started us
    sys.argv[1] = sys.argv[1][:-1]
    sys.stderr.write('"""
    + become.STARTED_MARK
    + r"""\n')
    sys.stderr.flush()
import signal
n, _, life = sys.argv[1].partition('/')
if life:
    import os, threading
    def cut(life=float(life)):
        try:
            os.write(2, ('\n"""
    + DEADLINE_MARK
    + r""" after %.1f s\n' % life).encode())
        finally:
            os._exit("""
    + str(DEADLINE_EXIT)
    + r""")
    cutter = threading.Timer(float(life), cut)
    cutter.daemon = True
    cutter.start()
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, float(life) + """
    + str(BACKSTOP_S)
    + r""" + float(life) / 10)
"""
    + IMPORTER
    + r"""
sweep_bundle_install(sweep_bundle_read(int(n)))
sys.argv = ['sweep-agent'] + sys.argv[2:]
"""
    + MAIN_CALL
)


def _pynvml_source() -> bytes:
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None:
        from sweep.errors import ConfigError

        raise ConfigError(
            "pynvml is not installed", fix="pip install nvidia-ml-py, then bundle again"
        )
    return Path(spec.origin).read_bytes()


def _compiled(name: str, source: bytes) -> bytes:
    """Byte code of `source` for this interpreter, as an unchecked hash-based .pyc (PEP 552).

    A host whose python has the same magic number skips compiling (pynvml alone costs ~60-130 ms
    to compile); any other python falls back to the .py beside it.
    """
    code = compile(source, name, "exec", dont_inherit=True)
    flags = (0b01).to_bytes(4, "little")  # hash-based, source not checked
    return (
        importlib.util.MAGIC_NUMBER
        + flags
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def _files(bytecode: bool) -> dict[str, bytes]:
    """The bundle's files by zip name: probe_agent's .py and schema files, pynvml, __main__.py, and
    with `bytecode` each module's .pyc for this interpreter beside its .py."""
    files: dict[str, bytes] = {}
    root = Path(probe_agent.__file__).parent
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
            files["probe_agent/" + path.relative_to(root).as_posix()] = path.read_bytes()
    files["pynvml.py"] = _pynvml_source()
    if bytecode:
        for name in [n for n in files if n.endswith(".py")]:
            files[name + "c"] = _compiled(name, files[name])
    files["__main__.py"] = MAIN.encode()
    return files


def _zipapp(files: dict[str, bytes], compress_type: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.compress_type = compress_type
            zf.writestr(info, data)
    return SHEBANG + buf.getvalue()


def bundle_bytes() -> bytes:
    """The zipapp's bytes: probe_agent's .py and .pyc and schema files, pynvml, __main__.py, each
    deflated (the file `sweep bundle` writes)."""
    return _zipapp(_files(bytecode=True), zipfile.ZIP_DEFLATED)


def wire_bytes() -> bytes:
    """What a sweep sends each host on stdin: the zipapp of the sources alone, stored, in one zlib
    stream (level 9).

    Every byte sent costs the controller CPU (paramiko's packets, AES-GCM, the server's window
    adjusts: 1.4-2 us a KiB, bench/results/bundle-bytes-i52.md), and a controller serves the whole
    fleet. One stream compresses across files: 157 KB against 527 KB for `bundle_bytes()`, whose
    per-file deflate cannot share a dictionary and whose .pyc files (for one interpreter version)
    are twice the source's size compressed. Each host pays instead: it inflates the stream (a few
    ms) and compiles the modules it imports (docs/scaling.md gives the figures). zlib, not lzma: a
    python3 without _lzma exists, one without zlib cannot read a zipapp at all.
    """
    return zlib.compress(_zipapp(_files(bytecode=False), zipfile.ZIP_STORED), 9)


def zipapp_of(payload: bytes) -> bytes:
    """The runnable zipapp (``python3 FILE``) of a payload: a zip (`bundle_bytes()`) as it is,
    `wire_bytes()` inflated (the importer on the host tells them apart the same way)."""
    return payload if payload[:2] in (b"#!", b"PK") else zlib.decompress(payload)


def build_bundle(dest: str | Path) -> Path:
    """Write the zipapp to `dest` (mode 0755 from its creation, whole, never through a link:
    sweep.store's one writer) and return its path."""
    from sweep.store import write_bytes_atomic

    dest = Path(dest)
    make_dirs(dest.parent, SHARED)
    write_bytes_atomic(dest, bundle_bytes(), mode=0o755)
    return dest


def remote_command(
    python: str,
    payload_size: int,
    agent_args: list[str],
    lifetime: float | None = None,
    become_user: str | None = None,
) -> str:
    """The shell command that runs the bootstrap under `python`, reading `payload_size` bytes.

    With `lifetime` (seconds) the bootstrap starts a timer thread before it reads the agent: at
    `lifetime` it writes `DEADLINE_MARK` on stderr and ends the agent with exit `DEADLINE_EXIT`,
    whatever the agent is doing (a hung driver query, a controller that went away), so a host is
    never left with an agent running after the sweep gave up on it, and the controller records a
    timeout whichever deadline came first. SIGALRM at its default action, `BACKSTOP_S` (plus a
    tenth) later, ends an agent whose threads are all stuck.

    With `become_user` the bootstrap runs under ``sudo -n -u USER --``, started by the become guard
    (sweep.collect.become) under the login user's `python`: a sudo that would ask for a password
    fails at once, with its own words on stderr; one that prompts or hangs anyway is ended, with
    what it started, after `become.sudo_wait(lifetime)`, and says so. Every python it starts runs
    isolated (`ISOLATED`), as the agent's children do.
    """
    size = str(payload_size) if lifetime is None else f"{payload_size}/{lifetime:.1f}"
    if not become_user:
        parts = [python, ISOLATED, "-c", BOOTSTRAP, size, *agent_args]
    else:
        parts = [
            python,
            ISOLATED,
            "-c",
            become.guard(TOO_OLD_MARK),
            f"{become.sudo_wait(lifetime):.1f}",
            *SUDO,
            "-u",
            become_user,
            "--",
            python,
            ISOLATED,
            "-c",
            BOOTSTRAP,
            size + "+",
            *agent_args,
        ]
    return " ".join(shlex.quote(p) for p in parts)


def host_agent_args(host: Any, agent_args: list[str]) -> list[str]:
    """The agent's arguments for one host: the run's, plus the host's own sweep_* settings.

    ``sweep_interpreters`` (a list, or one path) names the pythons whose torch build to check
    (training usually runs in a venv or conda env); ``sweep_deep: true`` imports torch there.
    """
    settings = getattr(host, "settings", None) or {}
    args = list(agent_args)
    interpreters = settings.get("interpreters")
    if isinstance(interpreters, str):
        interpreters = [interpreters]
    for interp in interpreters or ():
        args += ["--interpreter", str(interp)]
    if settings.get("deep") and "--deep" not in args:
        args.append("--deep")
    return args
