"""Certificates read as ssh-keygen reads them: `ssh-keygen -L` is the oracle for what a certificate says."""
from __future__ import annotations

import re
import shutil
import subprocess
from datetime import datetime, timezone

import pytest

from sweep.collect.ssh.certs import FOREVER, CertificateError, read_file

from helpers import require

KEYGEN = shutil.which("ssh-keygen")


def _keygen(*args: str) -> str:
    return subprocess.run([KEYGEN, *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture()
def ca(tmp_path):
    require(KEYGEN is not None, "needs OpenSSH's ssh-keygen (apt-get install -y openssh-client)")
    _keygen("-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "ca"))
    return tmp_path


@pytest.mark.parametrize("key_type", ["ed25519", "ecdsa", "rsa"])
@pytest.mark.parametrize("validity,principals", [
    ("20200101:20200102", "root"), ("always:forever", "alice,bob"), ("-1h:+1h", ""), ("+1d:+2d", "ops"),
])
def test_certificate_fields_agree_with_ssh_keygen_L(ca, key_type, validity, principals):
    key = ca / f"id_{key_type}"
    _keygen("-q", "-t", key_type, "-N", "", "-f", str(key))
    _keygen("-q", "-s", str(ca / "ca"), "-I", f"id for {key_type}", "-V", validity,
            *(["-n", principals] if principals else []), f"{key}.pub")
    cert = read_file(f"{key}-cert.pub")
    listing = _keygen("-L", "-f", f"{key}-cert.pub")
    assert f'Key ID: "{cert.key_id}"' in listing
    assert cert.user_cert and "user certificate" in listing
    named = re.search(r"Principals: (\(none\))?\n((?:\s{16}\S.*\n)*)", listing).group(2).split()
    assert list(cert.principals) == named
    valid = re.search(r"Valid: (.*)", listing).group(1)
    if valid == "forever":
        assert cert.valid_after == 0 and cert.valid_before == FOREVER
    else:
        start, end = re.fullmatch(r"from (\S+) to (\S+)", valid).groups()
        # ssh-keygen -L prints local time; the test machine's TZ may be anything
        assert datetime.fromtimestamp(cert.valid_after).strftime("%Y-%m-%dT%H:%M:%S") == start
        assert datetime.fromtimestamp(cert.valid_before).strftime("%Y-%m-%dT%H:%M:%S") == end


def test_the_reason_a_server_refuses_is_named(ca):
    key = ca / "id"
    _keygen("-q", "-t", "ed25519", "-N", "", "-f", str(key))
    _keygen("-q", "-s", str(ca / "ca"), "-I", "old", "-V", "20200101:20200102", "-n", "root", f"{key}.pub")
    # -V dates are local time: the hour depends on the machine's TZ
    assert re.fullmatch(r"expired at 2020-01-0[12]T\d\d:00:00Z", read_file(f"{key}-cert.pub").problem("root"))
    _keygen("-q", "-s", str(ca / "ca"), "-I", "alice's", "-V", "-5m:+1h", "-n", "alice", f"{key}.pub")
    cert = read_file(f"{key}-cert.pub")
    assert cert.problem("root") == "is for the principal alice, not the user 'root' logged in as"
    assert cert.problem("alice") is None
    assert datetime.now(timezone.utc).timestamp() < cert.valid_before


def test_a_public_key_is_not_a_certificate(ca):
    key = ca / "plain"
    _keygen("-q", "-t", "ed25519", "-N", "", "-f", str(key))
    with pytest.raises(CertificateError):
        read_file(f"{key}.pub")
