"""A minimal asyncssh fan-out: the same payload on stdin to the same command on every host, bounded
concurrency, each host's stdout parsed as JSON. bench_sweep.py's `asyncssh` peer (the floor a small
asyncio client reaches in Python). The key and known_hosts are read once, as sweep reads them.

    python bench/asyncssh_client.py HOSTS_FILE KEY KNOWN_HOSTS FORKS PAYLOAD_FILE COMMAND

Prints {"ok": N, "failed": M}. Needs `pip install asyncssh` (pyproject's [bench] extra).
"""
import asyncio
import json
import sys

import asyncssh


async def one(address, key, known, payload, command, slots):
    async with slots:
        try:
            async with asyncssh.connect(address, username="root", client_keys=[key], known_hosts=known,
                                        kex_algs=["curve25519-sha256"], agent_path=None,
                                        config=[], connect_timeout=60) as conn:
                result = await conn.run(command, input=payload, encoding=None, timeout=300)
            health = json.loads(result.stdout)
            return isinstance(health, dict) and "schema_version" in health
        except (OSError, asyncssh.Error, ValueError, asyncio.TimeoutError):
            return False


async def main(hosts_file, key, known, forks, payload_file, command):
    hosts = open(hosts_file).read().split()
    payload = open(payload_file, "rb").read()
    key, known = asyncssh.read_private_key(key), asyncssh.read_known_hosts(known)
    slots = asyncio.Semaphore(int(forks))
    results = await asyncio.gather(*(one(h, key, known, payload, command, slots) for h in hosts))
    ok = sum(results)
    print(json.dumps({"ok": ok, "failed": len(hosts) - ok}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
