"""Issue 50: real public ssh client configs (tests/fixtures/ssh_configs/corpus, each with its project, path, commit
and licence) read by sweep as ``ssh -G`` reads them, field by field, for generated names: matching, mixed case,
unmatched. `ssh_config_corpus` runs the real OpenSSH client (no network, a scratch home)."""
from __future__ import annotations

import shutil

from helpers import require
from ssh_config_corpus import FIELDS, entries, run

# the only names sweep refuses where ssh -G reads the config: ProxyJump chains that loop, which ssh itself
# refuses when it connects ("jumphost loop"), so no ssh connects them either
JUMPHOST_LOOPS = {"fabric+fabric/tests/_support/ssh_config/proxyjump_recursive.conf x1.tld",
                  "fabric+fabric/tests/_support/ssh_config/proxyjump_multi_recursive.conf x1.tld"}


def test_the_corpus_is_kept_with_its_source_and_an_apache_compatible_licence():
    for entry in entries():
        assert entry["licence"] in {"MIT", "ISC", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0"}, entry
        assert entry["project"] and entry["path"] and len(entry["commit"]) == 40, entry


def test_every_field_that_decides_the_connection_agrees_with_ssh_G_and_no_host_ssh_reads_is_refused():
    require(shutil.which("ssh") is not None, "needs OpenSSH's ssh (apt-get install -y openssh-client)")
    require(shutil.which("unshare") is not None, "needs unshare (util-linux)")
    tally = run()
    assert tally.configs >= 30 and tally.names >= 116 and tally.read_by_ssh >= 96
    assert tally.differences == []  # every field of every name ssh reads; every name ssh refuses, refused
    assert tally.fields["differ"] == 0 and tally.fields["agree"] >= 94 * len(FIELDS)
    assert {line.split(": ", 1)[0] for line in tally.refused_where_ssh_reads} == JUMPHOST_LOOPS
    assert tally.through_ssh  # IdentityAgent sockets, SetEnv, cipher lists: swept through OpenSSH's ssh
