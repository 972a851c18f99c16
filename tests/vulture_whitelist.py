"""Names only a framework calls, for vulture (tests/unit/test_layout.py): nothing else belongs here.

vulture runs at 60% confidence over sweep/, probe_agent/, bench/ and tools/ (the benchmarks and
the maintainers' tools use the packages as users do); each name below is read by something vulture
cannot see, and says what. Code only tests read is not listed here: it lives in tests/."""

# ansible: a stdout callback plugin is the module's CallbackModule class, its DOCUMENTATION and
# CALLBACK_* constants and its v2_* hooks (sweep/collect/engines/ansible_callbacks/sweep_lines.py)
DOCUMENTATION, CallbackModule, CALLBACK_VERSION, CALLBACK_TYPE, CALLBACK_NAME
v2_runner_on_start, v2_runner_on_ok, v2_runner_on_failed, v2_runner_on_unreachable
v2_runner_on_skipped
ignore_errors  # ansible calls a stdout callback's v2_runner_on_failed(result, ignore_errors=False)

# typer: commands and the app's callback are registered by their decorators, never called by name
baseline_set, baseline_show, baseline_check  # sweep/cli/baseline.py, @baseline_app.command
prometheus  # sweep/cli/export.py, @export_app.command("prometheus")
_top  # sweep/cli/app.py, @app.callback(): the --version option and the app's help
# click: SweepCommand overrides click.Command's hooks for the usage line and the options list
collect_usage_pieces, format_options

# Python: PEP 562 module hooks (sweep/__init__.py's lazy public names), an OSError's second file
# name (str(err) reads it)
__getattr__, __dir__, filename2

# paramiko: MissingHostKeyPolicy.missing_host_key is called by SSHClient.connect; Transport calls
# its Packetizer's start_handshake and complete_handshake, and its own _parse_debug
# (sweep/collect/ssh/packets.py)
missing_host_key, start_handshake, complete_handshake, _parse_debug

# enum: FailureClass members are looked up by value (FailureClass("dns")) from records and engines
DNS, TIMEOUT, HOST_KEY_UNKNOWN, HOST_KEY_CHANGED, AUTH, BECOME_FAILED, NO_PYTHON, PYTHON_TOO_OLD
AGENT_ERROR, OUTPUT_TOO_LARGE, BAD_OUTPUT, NOT_PROBED

# registries of "module:NAME" strings, imported by name: the agent's child programs
# (probe_agent/children.py) and the engines (sweep/collect/engines/__init__.py)
INSPECT, TORCH_LOAD, PTX_LOAD, TORCH_CHILD
SSHEngine, AnsibleEngine, SlurmEngine
# the engines' declarations, read by sweep.collect.engines.base.declared(runner, "name") (getattr)
reads_ssh_config, become_applies, one_inventory, splits_hosts
# the base of one-subprocess-per-host engines (issue 48's declared extension point; a subclass
# declares argv(host), which runs remote(host)): no engine in the tree subclasses it yet
HostProcessEngine, remote

# dataclass fields written out whole: HostDrift.as_dict() copies every field (its __dict__) into
# history.json and drift.csv
min_run_mhz, power_baseline_w, power_recent_w
# ReportResult.assessment: the library's sweep.build_report returns the whole judgment it wrote
assessment

# a Python name called from a shell tool: tools/history-screenshot.sh runs
# sweep.demo.history.change_window
change_window

# provenance the catalogue keeps beside its data (the brief: each corpus value with its source):
# the codes sweep itself bucketed, and where the codes past NVIDIA's page were read
SWEEP_CHOSEN, LATER_SOURCE
