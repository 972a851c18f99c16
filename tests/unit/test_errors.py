"""One error hierarchy: every exception class defined in sweep/ descends from SweepError, and errors.py draws them all."""
import ast
import importlib
import re
from pathlib import Path

import pytest

from sweep import errors
from sweep.errors import ConfigError, SSHConfigError, SweepError

ROOT = Path(__file__).resolve().parents[2]


def _exception_classes():
    for path in sorted((ROOT / "sweep").rglob("*.py")):
        names = [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
        if not names:
            continue
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts).replace(".__init__", ""))
        for name in names:
            cls = getattr(module, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                yield f"{module.__name__}.{name}", cls


EXCEPTIONS = dict(_exception_classes())


def test_the_walk_finds_the_exceptions_raised_across_the_tree():
    found = {name.rsplit(".", 1)[1] for name in EXCEPTIONS}
    assert {"HostFailure", "KeyFileMissing", "UnknownHostKey", "NeedsOpenSSH", "DepthError",
            "CertificateError", "EngineError", "InventoryWarning"} <= found


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_exception_descends_from_sweep_error(name):
    assert issubclass(EXCEPTIONS[name], SweepError), f"{name} stands outside sweep.errors.SweepError"


def test_the_module_docstring_draws_every_exception():
    drawn = set(re.findall(r"\+ (\w+)", errors.__doc__)) | {"SweepError"}
    missing = {name.rsplit(".", 1)[1] for name in EXCEPTIONS} - drawn
    assert not missing, f"sweep/errors.py's tree does not show {sorted(missing)}"


def test_the_tree_draws_each_class_under_its_base():
    by_name = {name.rsplit(".", 1)[1]: cls for name, cls in EXCEPTIONS.items()}
    parents = ["SweepError"]
    for line in errors.__doc__.splitlines():
        found = re.match(r"^  ((?:\|   )*)\+ (\w+)", line)
        if not found:
            continue
        depth = len(found.group(1)) // 4 + 1
        parents[depth:] = [found.group(2)]
        parent = by_name.get(parents[depth - 1], SweepError)
        assert issubclass(by_name[found.group(2)], parent), f"{found.group(2)} is drawn under {parents[depth - 1]}"


def test_one_class_for_an_ssh_setting_sweep_cannot_read_or_honour(tmp_path):
    """A line sweep cannot read as OpenSSH would and a setting the connection cannot honour: one ConfigError
    (exit 2 from the CLI), with its file:line."""
    from sweep.collect.ssh.config import SSHConfigFile
    from sweep.collect.ssh.openssh_config import ConfigReader
    from sweep.inventory.model import Host

    host = Host(name="gpu01", address="gpu01", port=None, user=None, key_file=None, python="python3",
                ssh_common_args=None, proxy_jump=None, groups=(), vars={}, settings={})
    config = tmp_path / "config"
    config.write_text("Host gpu*\n  User a\nMatch localnetwork 10.0.0.0/8\n  User b\n")
    with pytest.raises(SSHConfigError) as unreadable:
        ConfigReader(str(config)).resolve("gpu01")
    config.write_text("Host *\n  UseKeychain yes\n")
    with pytest.raises(SSHConfigError) as refused:
        SSHConfigFile(str(config)).check(host)
    for err in (unreadable.value, refused.value):
        assert isinstance(err, ConfigError) and err.exit_code == 2
    assert str(refused.value).startswith(f"{config}:2: gpu01: ssh_config UseKeychain is not an ssh_config keyword")
