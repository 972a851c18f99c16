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
        out["devices"] = []
        for i in range(out["device_count"] if out["cuda_available"] else 0):
            props = torch.cuda.get_device_properties(i)
            uuid = getattr(props, "uuid", None)
            out["devices"].append({"name": props.name,
                                   "capability": "%d.%d" % (props.major, props.minor),
                                   "uuid": None if uuid is None else "GPU-" + str(uuid)})
    except ImportError as exc:
        out["torch_version"] = None
        out["import_error"] = str(exc)
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
else:
    # find_spec locates torch without importing it (and without scanning every dist-info)
    import importlib.util
    spec = importlib.util.find_spec("torch")
    out["torch_version"] = None
    if spec is not None and spec.submodule_search_locations:
        folder = list(spec.submodule_search_locations)[0]
        try:
            text = open(os.path.join(folder, "version.py")).read()
            def field(name):
                m = re.search(r"^%s\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]" % name, text, re.M)
                return m.group(1) if m else None
            out["torch_version"] = field("__version__")
            out["cuda_runtime"] = field("cuda")
            out["hip_runtime"] = field("hip")
        except (OSError, UnicodeDecodeError) as exc:
            out["version_file_error"] = str(exc)
        cudnn = os.path.join(os.path.dirname(folder), "nvidia", "cudnn", "include",
                             "cudnn_version.h")
        try:
            h = open(cudnn).read()
            parts = [re.search(r"#define CUDNN_%s\s+(\d+)" % k, h)
                     for k in ("MAJOR", "MINOR", "PATCHLEVEL")]

            out["cudnn"] = ".".join(p.group(1) for p in parts) if all(parts) else None
        except OSError:
            out["cudnn"] = None
print(json.dumps(out))
"""


def inspect(src, interpreter, deep, timeout):
    """Run the inspector under `interpreter`; returns a dict (with `error` on failure)."""
    mode = "deep" if deep else "metadata"
    from probe_agent.children import command

    answer = src.command(
        command("framework", [mode], python=interpreter)[0],
        timeout=timeout,
        key="framework %s %s" % (interpreter, mode),
    )
    result = {"interpreter": interpreter, "mode": mode}
    if answer.get("timeout"):
        result["error"] = "the %s check did not finish within %.0f s" % (mode, timeout)
        return result
    if answer.get("rc") == 127:
        result["error"] = "interpreter not found: %s" % interpreter
        result["not_found"] = True
        return result
    if answer.get("rc") != 0:
        result["error"] = "exit %s: %s" % (
            answer.get("rc"),
            (answer.get("stderr") or "").strip()[-500:],
        )
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
