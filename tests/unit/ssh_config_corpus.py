"""The corpus of public ssh client configs (tests/fixtures/ssh_configs/corpus) against ``ssh -G``, the oracle.

For every config of the manifest and every name generated from it (each Host pattern made a matching
name, the same name in mixed case, and one name nothing matches), sweep's reading of the fields that
decide the connection must be what ``ssh -G`` prints, and sweep must not refuse a name ssh reads. A
``Match exec`` command is replaced by ``true`` (and the config read again with ``false``). ssh runs
under ``unshare -rmn`` with a scratch home bind-mounted over its passwd home (it takes ``~`` from
passwd, not $HOME: ../shared/NOTES.md) and no network; sweep's side gets the scratch home as $HOME;
both see XDG_RUNTIME_DIR set, as in a login session (configs name ${XDG_RUNTIME_DIR} in forwardings).

``python tests/unit/ssh_config_corpus.py`` prints the figures (the issue's before/after: run it with
PYTHONPATH of another tree to measure that tree; it uses only the API 970fdb3 already had).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "ssh_configs" / "corpus"
FIELDS = ("hostname", "port", "user", "identityfile", "certificatefile", "proxyjump", "proxycommand",
          "userknownhostsfile", "stricthostkeychecking", "hostkeyalias", "identitiesonly", "connecttimeout")
UNMATCHED = "unmatched-zz9"
_EXEC = re.compile(r"(\bexec\s+)(\"[^\"]*\"|\S+)", re.I)


def entries() -> list[dict]:
    return json.loads((CORPUS / "manifest.json").read_text())["files"]


def variants(text: str) -> list[tuple[str, str]]:
    """(label, text): the config as it is, or with every Match exec command made true, then false."""
    if not _EXEC.search(text):
        return [("", text)]
    return [(f" [exec {word}]", _EXEC.sub(lambda m: m.group(1) + word, text)) for word in ("true", "false")]


def names(text: str, limit: int = 12) -> list[str]:
    """Names to ask about: each Host pattern made a name that matches it, that name in mixed case, one unmatched."""
    found: list[str] = []
    for line in text.splitlines():
        words = line.strip().split()
        if len(words) < 2 or words[0].lower() != "host":
            continue
        for pattern in words[1:]:
            if pattern.startswith(("!", "#")) or not pattern.strip("*?"):
                continue
            name = pattern.replace("*", "x1").replace("?", "a").strip('"')
            if re.fullmatch(r"[A-Za-z0-9._:@%\[\]-]+", name):
                found += [name, _mixed(name)]
    unique = list(dict.fromkeys(found))[:limit - 1]
    return unique + [UNMATCHED]


def _mixed(name: str) -> str:
    return "".join(ch.upper() if i % 2 == 0 else ch.lower() for i, ch in enumerate(name))


def ssh_g(config: Path, hosts: list[str], home: Path) -> dict[str, dict[str, list[str]] | str]:
    """`ssh -G` for each name (its fields, or its error text), under the scratch home, without network."""
    script = ('home=$(getent passwd "$(id -u)" | cut -d: -f6); mount --bind "$0" "$home" || exit 99; cfg=$1; shift; '
              'for n; do printf "@@@ %s\\n" "$n"; ssh -G -F "$cfg" -- "$n" 2>&1 </dev/null; printf "@@@rc %s\\n" $?; done; '
              'printf "@@@home %s\\n" "$home"')
    done = subprocess.run(["unshare", "-rmn", "sh", "-c", script, str(home), str(config), *hosts],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    passwd_home = done.stdout.rsplit("@@@home ", 1)[1].strip()
    out: dict[str, dict[str, list[str]] | str] = {}
    for chunk in done.stdout.split("@@@ ")[1:]:
        name, _, rest = chunk.partition("\n")
        body, _, rc = rest.rpartition("@@@rc ")
        if rc.split()[0] != "0":
            out[name] = body.strip() or "ssh -G failed"
            continue
        fields: dict[str, list[str]] = {}
        for line in body.splitlines():
            key, _, value = line.partition(" ")
            fields.setdefault(key, []).append(value.replace(passwd_home, str(home)))
        out[name] = fields
    return out


def _words(value: str) -> list[str]:
    return value.split()


def ours(config: Path, name: str) -> tuple[str, dict[str, list[str]] | str]:
    """("read", fields) / ("through ssh", why) / ("refused", message): what sweep makes of the name."""
    from sweep.collect.ssh.config import SSHConfigFile
    from sweep.errors import SSHConfigError
    from sweep.inventory.model import Host

    try:
        from sweep.collect.ssh.config import NeedsOpenSSH
    except ImportError:  # before issue 50: every refusal refused the host
        NeedsOpenSSH = ()  # noqa: N806
    file = SSHConfigFile(str(config), local_user="root")
    host = Host(name=name, address=name, port=None, user=None, key_file=None, python="python3",
                ssh_common_args=None, proxy_jump=None, groups=(), vars={}, settings={})
    verdict = "read"
    try:
        file.check(host)
    except NeedsOpenSSH as need:
        verdict = f"through ssh: {need.message}"
    except SSHConfigError as exc:
        return "refused", str(exc)
    try:
        return verdict, fields_of(file.reader.resolve(name), file)
    except SSHConfigError as exc:
        return verdict, f"unreadable: {exc}"


def fields_of(resolved, file) -> dict[str, list[str]]:
    """The FIELDS as ssh -G prints them (unset ones: ssh's defaults for the few it always prints)."""
    from sweep.collect.ssh.openssh_config import expand, local_tokens, tilde

    try:
        from sweep.collect.ssh.config_words import dollar_expand
    except ImportError:  # before issue 50: no ${NAME}
        def dollar_expand(text, *_):
            return text

    user = resolved.user("root")
    tokens = local_tokens(resolved, user, "root")
    strict = (resolved.get("stricthostkeychecking") or "ask").lower()
    timeout = resolved.get("connecttimeout")
    known = resolved.get("userknownhostsfile")
    out = {"hostname": [resolved.hostname], "port": [str(_port(resolved))], "user": [user],
           "stricthostkeychecking": [{"yes": "true", "no": "false", "off": "false"}.get(strict, strict)],
           "identitiesonly": [{"true": "yes", "false": "no"}.get((resolved.get("identitiesonly") or "no").lower(),
                                                                  (resolved.get("identitiesonly") or "no").lower())],
           "connecttimeout": [_timeout(timeout)],
           "userknownhostsfile": [" ".join(tilde(expand(dollar_expand(w, "", ""), tokens, "UserKnownHostsFile", ""))
                                           for w in _words(known))]
           if known else [f"{tilde('~')}/.ssh/known_hosts {tilde('~')}/.ssh/known_hosts2"]}
    for key in ("identityfile", "certificatefile"):
        values = [s.value for s in resolved.all(key)]
        if values:
            out[key] = values
    alias = getattr(type(resolved), "host_key_alias", None)  # before issue 50: the value as written
    for key in ("proxyjump", "proxycommand", "hostkeyalias"):
        value = resolved.host_key_alias if key == "hostkeyalias" and alias is not None else resolved.get(key)
        if value and not (key != "hostkeyalias" and value.lower() == "none"):
            out[key] = [value]
    return out


def _port(resolved) -> int:
    setting = resolved.first("port")
    if setting is not None and not setting.value.isdigit():
        import socket

        return socket.getservbyname(setting.value, "tcp")
    return resolved.port


def _timeout(value: str | None) -> str:
    if not value or value.lower() == "none":
        return "none"
    try:
        from sweep.collect.ssh.policy import seconds
    except ImportError:  # before issue 50: whole seconds only
        return value
    return str(seconds(value.lower()))


def compare(theirs: dict[str, list[str]], mine: dict[str, list[str]]) -> list[str]:
    """The fields that differ (identityfile only where sweep has one: ssh -G lists its defaults otherwise)."""
    differ = []
    for key in FIELDS:
        if key == "identityfile" and key not in mine:
            continue
        if theirs.get(key) != mine.get(key):
            differ.append(f"{key}: ssh {theirs.get(key)} sweep {mine.get(key)}")
    return differ


@dataclass
class Tally:
    configs: int = 0
    names: int = 0
    read_by_ssh: int = 0
    fields: Counter = field(default_factory=Counter)  # agree / differ
    refused_where_ssh_reads: list[str] = field(default_factory=list)
    through_ssh: list[str] = field(default_factory=list)
    refused_with_ssh: int = 0
    differences: list[str] = field(default_factory=list)


def run() -> Tally:
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="sweep-ssh-corpus-") as scratch:
        home = Path(scratch) / "home"
        (home / ".ssh").mkdir(parents=True)
        saved = {name: os.environ.get(name) for name in ("HOME", "XDG_RUNTIME_DIR")}
        os.environ.update(HOME=str(home), XDG_RUNTIME_DIR=str(home / "run"))  # as in a login session, both sides
        try:
            for entry in entries():
                text = (CORPUS / entry["file"]).read_text(errors="replace")
                for label, variant in variants(text):
                    _one(tally, f"{entry['file']}{label}", variant, home)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return tally


def _one(tally: Tally, label: str, text: str, home: Path) -> None:
    config = home / "corpus_config"
    config.write_text(text)
    asked = names(text)
    tally.configs += 1
    theirs = ssh_g(config, asked, home)
    for name in asked:
        tally.names += 1
        verdict, mine = ours(config, name)
        said = theirs[name]
        if isinstance(said, str):  # ssh refuses the file for this name
            tally.refused_with_ssh += verdict == "refused"
            if verdict != "refused":
                tally.differences.append(f"{label} {name}: ssh refuses ({said.splitlines()[0]}), sweep {verdict}")
            continue
        tally.read_by_ssh += 1
        if verdict == "refused":
            tally.refused_where_ssh_reads.append(f"{label} {name}: {mine}")
            continue
        if verdict != "read":
            tally.through_ssh.append(f"{label} {name}: {verdict}")
        if isinstance(mine, str):
            tally.differences.append(f"{label} {name}: {mine}")
            continue
        differ = compare(said, mine)
        tally.fields["agree"] += len(FIELDS) - len(differ)
        tally.fields["differ"] += len(differ)
        tally.differences += [f"{label} {name}: {d}" for d in differ]


def main() -> None:
    if shutil.which("ssh") is None or shutil.which("unshare") is None:
        sys.exit("needs OpenSSH's ssh and unshare")
    tally = run()
    total = tally.fields["agree"] + tally.fields["differ"]
    print(f"{tally.configs} configs (with Match exec variants), {tally.names} names; ssh -G reads {tally.read_by_ssh}, "
          f"refuses {tally.names - tally.read_by_ssh} (sweep refuses {tally.refused_with_ssh} of those)")
    print(f"fields agreeing with ssh -G: {tally.fields['agree']} of {total}")
    print(f"names sweep refuses where ssh reads the config: {len(tally.refused_where_ssh_reads)}")
    print(f"names sent through OpenSSH's ssh: {len(tally.through_ssh)}")
    for line in tally.refused_where_ssh_reads[:40] + tally.differences[:40]:
        print("  " + line[:220])


if __name__ == "__main__":
    main()
