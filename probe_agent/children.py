"""Every child process the agent starts that runs agent code: one table, and how each is started.

On a host the agent is imported from memory: the bootstrap (`IMPORTER`, which
sweep/collect/bundle.py's BOOTSTRAP also uses) reads the bundle from stdin and serves imports
from it, so no probe_agent file exists there for a child to import. A child that runs an agent
module therefore gets the same bootstrap (`CHILD_BOOTSTRAP`) and the bundle's bytes first on its
stdin; a child that runs an embedded source (`python -c SOURCE`) needs nothing from the agent.
Loaded from a file (`python3 agent.pyz`) or a source checkout, a module child puts that file or
folder on its sys.path. Either way nothing is written on the host.

`CHILDREN` is the one list: a child started any other way is a bug, and
tests/unit/test_children.py starts every entry from a memory-loaded bundle.
"""

import collections
import importlib
import os
import sys

# The in-memory importer, as Python 3.8 source. `sweep_bundle_install(data)` serves imports from the
# zip's bytes (its .pyc when the magic number matches, else its .py) and keeps the bytes as they
# came on the finder (`sweep_bundle`), so that the agent can hand them to its own children.
IMPORTER = r"""
def sweep_bundle_read(n):
    import sys
    data = b''
    while len(data) < n:
        chunk = sys.stdin.buffer.read(n - len(data))
        if not chunk: break
        data += chunk
    return data
def sweep_bundle_install(data):
    import io, sys, zipfile, zlib, importlib.abc, importlib.util
    # the bundle as sent, a zlib stream of the zipapp (sweep.collect.bundle.wire_bytes), or a zip
    z = zipfile.ZipFile(io.BytesIO(data if data[:2] in (b'#!', b'PK') else zlib.decompress(data)))
    names = set(z.namelist())
    class F(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        sweep_bundle = data
        def find_spec(self, name, path=None, target=None):
            base = name.replace('.', '/')
            if base + '/__init__.py' in names:
                return importlib.util.spec_from_loader(name, self, is_package=True)
            if base + '.py' in names:
                return importlib.util.spec_from_loader(name, self)
        def create_module(self, spec): return None
        def exec_module(self, module):
            base = module.__name__.replace('.', '/')
            fn = base + '/__init__.py' if base + '/__init__.py' in names else base + '.py'
            module.__file__ = '<sweep-bundle>/' + fn
            if fn.endswith('__init__.py'): module.__path__ = []
            pyc = z.read(fn + 'c') if fn + 'c' in names else b''
            if pyc[:4] == importlib.util.MAGIC_NUMBER:
                import marshal
                code = marshal.loads(pyc[16:])
            else:
                code = compile(z.read(fn), module.__file__, 'exec')
            exec(code, module.__dict__)
    sys.meta_path.insert(0, F())
"""

# argv: SIZE MODULE ARGS...; the bundle's SIZE bytes first on stdin (then whatever the child reads).
CHILD_BOOTSTRAP = (
    IMPORTER
    + r"""
import sys, importlib
sweep_bundle_install(sweep_bundle_read(int(sys.argv[1])))
module = sys.argv[2]
sys.argv = ['-c'] + sys.argv[3:]
sys.exit(importlib.import_module(module).main())
"""
)

# module: an agent module whose main() the child runs; source: "module:NAME", an embedded source
# run as `python -c`; python: "agent" (the interpreter running the agent, isolated) or "framework"
# (the host's training python, which the caller names).
Entry = collections.namedtuple("Entry", "name module source python purpose")
CHILDREN = (
    Entry(
        "speed-driver",
        "probe_agent.speed.driver_child",
        None,
        "agent",
        "--speed: HBM, PCIe, peer copies, FP32 through the CUDA driver API",
    ),
    Entry(
        "speed-torch",
        None,
        "probe_agent.speed.torch_child:TORCH_CHILD",
        "framework",
        "--speed: bf16 GEMM and NCCL all-reduce through torch",
    ),
    Entry(
        "load-ptx",
        None,
        "probe_agent.load:PTX_LOAD",
        "agent",
        "--load --load-engine ptx: an FMA loop",
    ),
    Entry(
        "load-torch", None, "probe_agent.load:TORCH_LOAD", "framework", "--load --load-engine torch"
    ),
    Entry(
        "framework",
        None,
        "probe_agent.framework:INSPECT",
        "framework",
        "the framework contract: each interpreter's torch build",
    ),
)
BY_NAME = {e.name: e for e in CHILDREN}
ISOLATED = ("-I", "-S")  # the agent's own python: no site, no user paths, no PYTHON* variables


def bundle_bytes():
    """The bundle this agent was imported from (memory), or None (a file or a source checkout)."""
    import probe_agent

    loader = getattr(getattr(probe_agent, "__spec__", None), "loader", None)
    data = getattr(loader, "sweep_bundle", None)
    return data if isinstance(data, bytes) else None


def agent_root():
    """The folder (or zipapp) that holds probe_agent, for a module child's sys.path."""
    import probe_agent

    return os.path.dirname(os.path.dirname(os.path.abspath(probe_agent.__file__)))


def source_of(entry):
    module, name = entry.source.split(":")
    return getattr(importlib.import_module(module), name)


def command(name, args=(), python=None):
    """(argv, bytes to write first on the child's stdin) that start child `name` with `args`.

    `python` is the framework interpreter for "framework" entries; "agent" entries run under this
    agent's own interpreter.
    """
    entry = BY_NAME[name]
    interpreter = sys.executable if entry.python == "agent" else python
    flags = list(ISOLATED) if entry.python == "agent" else []
    args = [str(a) for a in args]
    if entry.source is not None:
        return [interpreter] + flags + ["-c", source_of(entry)] + args, b""
    bundle = bundle_bytes()
    if bundle is not None:
        return [interpreter] + flags + [
            "-c",
            CHILD_BOOTSTRAP,
            str(len(bundle)),
            entry.module,
        ] + args, bundle
    code = "import sys; sys.path.insert(0, %r); from %s import main; sys.exit(main())" % (
        agent_root(),
        entry.module,
    )
    return [interpreter] + flags + ["-c", code] + args, b""
