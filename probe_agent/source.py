"""Where the agent's raw answers come from: the live driver, a recording of it, or a replay.

Every raw answer the agent reads goes through one `Source`:
- `nvml(key, fn, *args)`: one NVML query; the key names the query and its arguments
  ("nvmlDeviceGetEnforcedPowerLimit:0").
- `command(argv, timeout)`: one command's exit code, stdout and stderr (nvidia-smi, the framework
  inspector).
- `env()`, `files()`, `host()`: the environment and host facts.
- `fs(op, path)`: one read of /sys, /proc or /dev (`read` text, `bytes` as hex, `list` a folder,
  `link` a symlink's target); the live source reads under its `root` (tests build fake trees).
- `kernel_log()`: the kernel log's Xid and SXid events since boot, folded per kind with their
  counts (`probe_agent.kernlog`: /dev/kmsg, else `journalctl -k`, else /var/log/kern.log), bounded.

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

from probe_agent import kernlog

ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_MPS_PIPE_DIRECTORY",
    "LD_LIBRARY_PATH",
)
HOST_FILES = ("/proc/driver/nvidia/version", "/etc/os-release")
JOURNALCTL = ("journalctl", "-k", "-b", "0", "--no-pager", "-q", "-o", "short-monotonic")
STRUCT_QUERIES = {  # NVML queries that fill a structure the caller passes
    "nvmlDeviceGetGpuFabricInfoV": "c_nvmlGpuFabricInfoV_t",
    "nvmlDeviceGetGpuFabricInfo": "c_nvmlGpuFabricInfo_t",
}


class NVMLQueryError(Exception):
    """An NVML query answered with an error; `name` is pynvml's class name
    (NVMLError_NotSupported)."""

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

    def __init__(self, root=None, journalctl=JOURNALCTL):
        self._pynvml = None
        self.root = root or "/"
        self.journalctl = journalctl

    def real_path(self, path):
        return path if self.root == "/" else os.path.join(self.root, path.lstrip("/"))

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
            if fn in STRUCT_QUERIES:
                import ctypes

                struct = getattr(nv, STRUCT_QUERIES[fn])()
                func(args[0], ctypes.byref(struct))
                value = struct
            else:
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
            return {
                "rc": 127,
                "stdout": "",
                "stderr": "%s: command not found" % argv[0],
                "seconds": 0.0,
            }
        except subprocess.TimeoutExpired:
            return {
                "rc": None,
                "stdout": "",
                "stderr": "timed out after %.1f s" % timeout,
                "timeout": True,
                "seconds": time.monotonic() - start,
            }
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

    def fs(self, op, path, limit=65536):
        """One read under /sys, /proc or /dev; an OSError is the answer
        {"error": its class name}."""
        real = self.real_path(path)
        try:
            if op == "read":
                with open(real, "rb") as fh:
                    return {"text": fh.read(limit).decode("utf-8", "replace")}
            if op == "bytes":
                with open(real, "rb") as fh:
                    return {"hex": fh.read(limit).hex()}
            if op == "list":
                return {"list": sorted(os.listdir(real))}
            if op == "link":
                return {"link": os.readlink(real)}
        except OSError as exc:
            return {"error": type(exc).__name__}
        raise ValueError("unknown path operation %r" % op)

    def kernel_log(self):
        """NVIDIA's events since boot (`probe_agent.kernlog`) from the first kernel log that can be
        read; `tried` says why the others failed."""
        tried, boot = {}, kernlog.boot(self.real_path)
        fold, err = kernlog.read_kmsg(self.real_path("/dev/kmsg"))
        if err is None:
            return kernlog.answer("/dev/kmsg", fold, tried, boot)
        tried["/dev/kmsg"] = err
        if self.journalctl:
            fold, err = kernlog.read_journal(list(self.journalctl))
            if err is None:
                return kernlog.answer("journalctl -k", fold, tried, boot)
            tried["journalctl -k"] = err
        fold, err = kernlog.read_tail(self.real_path("/var/log/kern.log"))
        if err is None:
            return kernlog.answer("/var/log/kern.log", fold, tried, boot)
        tried["/var/log/kern.log"] = err
        return {"source": None, "events": [], "tried": tried, "boot": boot}

    def files(self):
        out = {}
        for path in HOST_FILES:
            try:
                with open(path) as fh:
                    out[path] = fh.read(65536)
            except (OSError, UnicodeDecodeError):
                out[path] = None
        return out

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

    def __init__(self, root=None, journalctl=JOURNALCTL):
        LiveSource.__init__(self, root, journalctl)
        self.nvml_answers = {}
        self.command_answers = {}
        self.samples = []
        self.load_meta = None
        self.speed_meta = None
        self.path_answers = {}
        self.kernel_log_answer = None
        self._env = self._files = self._host = None

    def fs(self, op, path, limit=65536):
        answer = LiveSource.fs(self, op, path, limit)
        self.path_answers["%s %s" % (op, path)] = answer
        return answer

    def kernel_log(self):
        self.kernel_log_answer = LiveSource.kernel_log(self)
        return self.kernel_log_answer

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
            "nvml": self.nvml_answers,
            "commands": self.command_answers,
            "paths": self.path_answers,
            "kernel_log": self.kernel_log_answer,
            "samples": self.samples,
            "load": self.load_meta,
            "speed": self.speed_meta,
        }


class ReplaySource(object):
    """Answers from a capture file, through the same code as the live driver.

    A key missing from the capture answers NVMLError_NotSupported (the query did not exist when
    the capture was made). An answer {"hang": true} never returns: it stands for a driver query
    that hangs, and lets tests prove the agent's deadline.

    With SWEEP_REPLAY_MEASURE=1 in the environment (`measures`), --speed and --load start
    their children and measure for real while every NVML answer still comes from the
    capture: how the tests run the tiers' real children against a stand-in libcuda
    (tests/cuda_shim.c) where no GPU is.
    """

    replaying = True

    def __init__(self, path):
        self.path = path
        self.measures = os.environ.get("SWEEP_REPLAY_MEASURE") == "1"
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
            return {
                "rc": 127,
                "stdout": "",
                "stderr": "%s: not in capture" % argv[0],
                "seconds": 0.0,
            }
        if answer.get("hang"):
            time.sleep(timeout)
            return {
                "rc": None,
                "stdout": "",
                "stderr": "timed out after %.1f s" % timeout,
                "timeout": True,
            }
        return dict(answer)

    def env(self):
        return dict(self.data.get("env", {}))

    def fs(self, op, path, limit=65536):
        answer = (self.data.get("paths") or {}).get("%s %s" % (op, path))
        if answer is None and "pci" in self.data and "paths" not in self.data:
            answer = legacy_pci(self.data["pci"], op, path)
        return dict(answer) if answer is not None else {"error": "NotInCapture"}

    def kernel_log(self):
        answer = self.data.get("kernel_log")
        if answer is None:
            return {"source": None, "events": [], "tried": {"capture": "NotInCapture"}}
        answer = dict(answer)
        if "events" not in answer:  # a version-2 capture kept the matching lines one by one
            answer["events"] = kernlog.legacy_fold(answer.pop("lines", None))
        return answer

    def files(self):
        return dict(self.data.get("files", {}))

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


def legacy_pci(found, op, path):
    """The answers of a capture that kept only the bus's GPU functions ("pci", before version 2)."""
    if op == "list" and path == "/sys/bus/pci/devices":
        return (
            {"error": "NotReadable"} if found is None else {"list": [f["address"] for f in found]}
        )
    for f in found or ():
        for name, value in (
            ("vendor", "0x10de"),
            ("class", f.get("class")),
            ("device", f.get("device")),
        ):
            if op == "read" and path == "/sys/bus/pci/devices/%s/%s" % (f["address"], name):
                return {"text": value + "\n"}
    return None


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
