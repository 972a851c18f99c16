"""ansible stdout callback of sweep's ansible engine: one JSON line per host result, as it arrives.

Loaded by ansible itself (ANSIBLE_CALLBACK_PLUGINS points at this folder, ANSIBLE_STDOUT_CALLBACK
names it), never imported by sweep. Each line: {"sweep": 1, "host", "event" (ok | failed |
unreachable | skipped), "started" (epoch s), "rc", "stdout", "stderr", "msg"}.
"""

from __future__ import annotations

import json
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: sweep_lines
    type: stdout
    short_description: one JSON line per host result, for sweep's ansible engine
    description:
        - Prints each host's result as one JSON object on a line of its own, as soon as it arrives.
"""


def _text(value):
    return "" if value is None else str(value)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "sweep_lines"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started = {}

    def _line(self, result, event):
        host = getattr(result, "host", None) or result._host
        data = getattr(result, "result", None)
        if data is None:
            data = result._result
        name = host.get_name()
        rc = data.get("rc")
        line = {
            "sweep": 1,
            "host": name,
            "event": event,
            "started": self._started.get(name),
            "rc": rc if isinstance(rc, int) else None,
            "stdout": _text(data.get("stdout")),
            "stderr": _text(data.get("stderr")),
            "msg": _text(data.get("msg")),
        }
        self._display.display(json.dumps(line, default=str))

    def v2_runner_on_start(self, host, task):
        self._started[host.get_name()] = time.time()

    def v2_runner_on_ok(self, result):
        self._line(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._line(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._line(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._line(result, "skipped")
