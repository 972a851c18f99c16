"""sweep's probe agent: a read-only, self-contained probe of one GPU host.

It imports nothing from `sweep` and only the standard library plus the pynvml it carries, so
that a bare python3 (3.8+) can run it from a zipapp.
"""

AGENT_VERSION = "0.1.0"
HEALTH_SCHEMA_VERSION = "1.7"
CAPTURE_FORMAT_VERSION = 3
