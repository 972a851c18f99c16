"""Names only a framework calls, for vulture (tests/unit/test_layout.py): nothing else belongs here."""

ignore_errors  # ansible calls a stdout callback's v2_runner_on_failed(result, ignore_errors=False)
frame  # the signal module calls a handler as handler(signum, frame) (probe_agent.wrap.command.wait_forwarding)
