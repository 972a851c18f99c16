"""Names only a framework calls, for vulture (tests/unit/test_layout.py): nothing else belongs here."""

ignore_errors  # ansible calls a stdout callback's v2_runner_on_failed(result, ignore_errors=False)
