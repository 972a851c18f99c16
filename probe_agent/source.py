"""Where the agent's raw answers come from: the live driver, a recording of it, or a replay.

Every raw answer the agent reads goes through one `Source`:
- `nvml(key, fn, *args)`: one NVML query; the key names the query and its arguments
  ("nvmlDeviceGetEnforcedPowerLimit:0").
- `command(argv, timeout)`: one command's exit code, stdout and stderr (nvidia-smi, the framework
  inspector).
- `env()`, `files()`, `host()`: the environment and host facts.
- `pci()`: the NVIDIA GPUs on the PCI bus (sysfs, no driver needed); None when unknown.

`LiveSource` asks the driver; `RecordingSource` wraps it and keeps every answer, so that
`capture()` can write a capture file; `ReplaySource` answers from a capture file through the same
code path. The capture format is documented in docs/capture-format.md.
"""
import json
import os
import platform
import socket
import subprocess
import time

ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_MPS_PIPE_DIRECTORY",
    "LD_LIBRARY_PATH",
)
HOST_FILES = ("/proc/driver/nvidia/version", "/etc/os-release")


class NVMLQueryError(Exception):
    """An NVML query answered with an error; `name` is pynvml's class name (NVMLError_NotSupported)."""

    def __init__(self, name, message=""):
        Exception.__init__(self, "%s: %s" % (name, message))
        self.name = name
        self.message = message


def error_name(exc):
    """pynvml's error class name, or the Python exception's."""
    return type(exc).__name__


class LiveSource(object):
    """Answers from this host's driver, nvidia-smi and environment."""

    replaying = False

    def __init__(self):
        self._pynvml = None

    def pynvml(self):
        if self._pynvml is None:
            import pynvml  # carried in the bundle; imported late so that --help needs no NVML

            self._pynvml = pynvml
        return self._pynvml

    def nvml(self, key, fn, *args):
        """Call pynvml's `fn` (a function name) with args; errors become NVMLQueryError."""
        try:
            nv = self.pynvml()
            func = getattr(nv, fn, None)
            if func is None:
                raise NVMLQueryError("NVMLError_FunctionNotFound", "pynvml has no %s" % fn)
            value = func(*args)
        except NVMLQueryError:
            raise
        except Exception as exc:  # pynvml raises a distinct class per NVML return code
            raise NVMLQueryError(error_name(exc), str(exc))
        return plain(value)

    def handle(self, index):
        return self.pynvml().nvmlDeviceGetHandleByIndex(index)

    def mig_handle(self, handle, index):
        return self.pynvml().nvmlDeviceGetMigDeviceHandleByIndex(handle, index)

    def command(self, argv, timeout=10.0, env=None, key=None):
        start = time.monotonic()
        try:
            proc = subprocess.run(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=timeout,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            return {"rc": 127, "stdout": "", "stderr": "%s: command not found" % argv[0], "seconds": 0.0}
        except subprocess.TimeoutExpired:
            return {"rc": None, "stdout": "", "stderr": "timed out after %.1f s" % timeout, "timeout": True,
                    "seconds": time.monotonic() - start}
        except OSError as exc:
            return {"rc": 126, "stdout": "", "stderr": str(exc), "seconds": 0.0}
        return {
            "rc": proc.returncode,
            "stdout": proc.stdout.decode("utf-8", "replace"),
            "stderr": proc.stderr.decode("utf-8", "replace"),
            "seconds": round(time.monotonic() - start, 4),
        }

    def env(self):
        return {k: os.environ[k] for k in ENV_VARS if k in os.environ}

    def files(self):
        out = {}
        for path in HOST_FILES:
            try:
                with open(path) as fh:
                    out[path] = fh.read(65536)
            except (OSError, UnicodeDecodeError):
                out[path] = None
        return out

    def pci(self):
        from probe_agent.pci import read_nvidia_gpus
        return read_nvidia_gpus()

    def host(self):
        uname = platform.uname()
        return {
            "hostname": socket.gethostname(),
            "kernel": uname.release,
            "machine": uname.machine,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        }

    def sleep(self, seconds):
        time.sleep(seconds)


class RecordingSource(LiveSource):
    """A live source that keeps every answer, for `--record`."""

    def __init__(self):
        LiveSource.__init__(self)
        self.nvml_answers = {}
        self.command_answers = {}
        self.samples = []
        self.load_meta = None
        self._env = self._files = self._host = self._pci = None

    def nvml(self, key, fn, *args):
        try:
            value = LiveSource.nvml(self, key, fn, *args)
        except NVMLQueryError as exc:
            self.nvml_answers[key] = {"error": exc.name, "message": exc.message}
            raise
        self.nvml_answers[key] = {"value": value}
        return value

    def command(self, argv, timeout=10.0, env=None, key=None):
        answer = LiveSource.command(self, argv, timeout, env)
        self.command_answers[key or command_key(argv)] = answer
        return answer

    def env(self):
        self._env = LiveSource.env(self)
        return self._env

    def files(self):
        self._files = LiveSource.files(self)
        return self._files

    def host(self):
        self._host = LiveSource.host(self)
        return self._host

    def pci(self):
        self._pci = LiveSource.pci(self)
        return self._pci

    def capture(self, note=None):
        from probe_agent import CAPTURE_FORMAT_VERSION

        return {
            "format": "sweep-capture",
            "version": CAPTURE_FORMAT_VERSION,
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "note": note,
            "host": self._host if self._host is not None else LiveSource.host(self),
            "env": self._env if self._env is not None else LiveSource.env(self),
            "files": self._files if self._files is not None else LiveSource.files(self),
            "pci": self._pci if self._pci is not None else LiveSource.pci(self),
            "nvml": self.nvml_answers,
            "commands": self.command_answers,
            "samples": self.samples,
            "load": self.load_meta,
        }


class ReplaySource(object):
    """Answers from a capture file, through the same code as the live driver.

    A key missing from the capture answers NVMLError_NotSupported (the query did not exist when
    the capture was made). An answer {"hang": true} never returns: it stands for a driver query
    that hangs, and lets tests prove the agent's deadline.
    """

    replaying = True

    def __init__(self, path):
        self.path = path
        with open(path) as fh:
            data = json.load(fh)
        if data.get("format") != "sweep-capture":
            raise ValueError("%s is not a sweep capture (format=%r)" % (path, data.get("format")))
        self.data = data
        self._sample_index = 0

    def nvml(self, key, fn, *args):
        answer = self.data.get("nvml", {}).get(key)
        if answer is None:
            raise NVMLQueryError("NVMLError_NotSupported", "not in capture")
        if answer.get("hang"):
            while True:
                time.sleep(3600)
        if "error" in answer:
            raise NVMLQueryError(answer["error"], answer.get("message", ""))
        return answer.get("value")

    def handle(self, index):
        return index

    def mig_handle(self, handle, index):
        return "%s/mig%s" % (handle, index)

    def command(self, argv, timeout=10.0, env=None, key=None):
        answer = self.data.get("commands", {}).get(key or command_key(argv))
        if answer is None:
            return {"rc": 127, "stdout": "", "stderr": "%s: not in capture" % argv[0], "seconds": 0.0}
        if answer.get("hang"):
            time.sleep(timeout)
            return {"rc": None, "stdout": "", "stderr": "timed out after %.1f s" % timeout, "timeout": True}
        return dict(answer)

    def env(self):
        return dict(self.data.get("env", {}))

    def files(self):
        return dict(self.data.get("files", {}))

    def pci(self):
        """A capture made before the agent read the bus has no "pci": unknown, not "no GPU"."""
        found = self.data.get("pci")
        return None if found is None else list(found)

    def host(self):
        host = dict(self.data.get("host", {}))
        override = os.environ.get("SWEEP_REPLAY_HOSTNAME")
        if override:
            host["hostname"] = override
        return host

    def next_sample(self):
        samples = self.data.get("samples") or []
        if not samples:
            return None
        sample = samples[self._sample_index % len(samples)]
        self._sample_index += 1
        return sample

    def sleep(self, seconds):
        time.sleep(min(seconds, 0.01))


def command_key(argv):
    """The capture key of a command: its argv joined by spaces, the interpreter path kept."""
    return " ".join(argv)


def plain(value):
    """pynvml answers (bytes, ctypes structures, lists of them) as JSON-able values."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__name__ == "nvmlFriendlyObject":  # pynvml's process-info answers
        return {k: plain(v) for k, v in vars(value).items()}
    fields = getattr(value, "_fields_", None)
    if fields is not None:
        return {f[0]: plain(getattr(value, f[0])) for f in fields}
    try:
        return [plain(v) for v in value]  # ctypes arrays
    except TypeError:
        return repr(value)
