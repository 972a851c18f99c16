"""The framework build of each interpreter the host trains with, read in a subprocess.

Default mode reads package metadata and torch/version.py without importing torch (milliseconds);
`--deep` imports torch and asks CUDA (seconds), under a timeout.
"""
import json

INSPECT = r"""
import json, os, re, sys
mode = sys.argv[1] if len(sys.argv) > 1 else "metadata"
out = {"python": sys.version.split()[0], "executable": sys.executable, "mode": mode}
try:
    from importlib import metadata
except ImportError:
    metadata = None
def dist_version(name):
    try:
        return metadata.version(name)
    except Exception:
        return None
if mode == "deep":
    try:
        import torch
        out["torch_version"] = torch.__version__
        out["cuda_runtime"] = torch.version.cuda
        out["hip_runtime"] = getattr(torch.version, "hip", None)
        try:
            out["cudnn"] = torch.backends.cudnn.version()
        except Exception as exc:
            out["cudnn"] = None
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["device_count"] = torch.cuda.device_count()
        out["arch_list"] = list(torch.cuda.get_arch_list()) if out["cuda_available"] else None
        out["devices"] = [{"name": torch.cuda.get_device_name(i),
                           "capability": "%d.%d" % torch.cuda.get_device_capability(i)}
                          for i in range(out["device_count"])] if out["cuda_available"] else []
    except ImportError as exc:
        out["torch_version"] = None
        out["import_error"] = str(exc)
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
else:
    version = dist_version("torch") if metadata else None
    out["torch_version"] = version
    if version:
        try:
            path = metadata.distribution("torch").locate_file("torch/version.py")
            text = open(str(path)).read()
            m = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
            out["cuda_runtime"] = m.group(1) if m else None
            m = re.search(r"^hip\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
            out["hip_runtime"] = m.group(1) if m else None
        except Exception as exc:
            out["version_file_error"] = str(exc)
        cudnn = [dist_version(n) for n in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11")]
        out["cudnn"] = next((c for c in cudnn if c), None)
print(json.dumps(out))
"""


def inspect(src, interpreter, deep, timeout):
    """Run the inspector under `interpreter`; returns a dict (with `error` on failure)."""
    mode = "deep" if deep else "metadata"
    answer = src.command([interpreter, "-c", INSPECT, mode], timeout=timeout,
                         key="framework %s %s" % (interpreter, mode))
    result = {"interpreter": interpreter, "mode": mode}
    if answer.get("timeout"):
        result["error"] = "the %s check did not finish within %.0f s" % (mode, timeout)
        return result
    if answer.get("rc") == 127:
        result["error"] = "interpreter not found: %s" % interpreter
        result["not_found"] = True
        return result
    if answer.get("rc") != 0:
        result["error"] = "exit %s: %s" % (answer.get("rc"), (answer.get("stderr") or "").strip()[-500:])
        return result
    try:
        result.update(json.loads(answer.get("stdout") or ""))
    except ValueError:
        result["error"] = "unreadable inspector output"
    result["interpreter"] = interpreter
    return result


def version_tuple(text):
    parts = []
    for p in (text or "").split("+")[0].split("."):
        if not p.isdigit():
            break
        parts.append(int(p))
    return tuple(parts)
