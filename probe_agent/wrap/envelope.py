"""`--wrap`'s envelope: probe, run the command while sampling, probe again, write provenance.json.

The command is passed through untouched: it inherits the agent's stdin, stdout and stderr and
environment, and the agent exits with its exit code (128+N when a signal N ended it, as a shell
reports it; 127 / 126 when it cannot be started). The agent itself writes nothing to stdout or
stderr in this mode except a message when its own work fails (exit 125 then, as `timeout` and
`env` do).
"""

import argparse
import json
import os
import sys

from probe_agent import AGENT_VERSION
from probe_agent.probe import check_paths, run_probe, write_atomic
from probe_agent.wrap.command import OutputTail, run_command
from probe_agent.wrap.sample_stream import Stream
from probe_agent.wrap.sampler import Attribution, Sampler
from probe_agent.wrap.verdict import refusal, verdict

PROVENANCE_SCHEMA_VERSION = "1.1"

EXIT_WRAPPER_FAILED = 125

# --refuse without --force: the command was not started (provenance.json says why)
EXIT_REFUSED = 124


def split_command(argv):
    """(the agent's own arguments, the command after the first `--` or None)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, None


def usage_error(message):
    sys.stderr.write("sweep-agent: %s\n" % message)
    return 2


def main(opts, command):
    """`--wrap`: probe, run the command while sampling, probe again; write OUT/provenance.json
    (or, with `--emit`, print it on stdout with the tail of the command's output)."""
    src = open_source(opts, command)
    if isinstance(src, int):
        return src
    opts = argparse.Namespace(**dict(vars(opts), load=0.0))  # the command is the load
    import statistics  # noqa: F401  imported now: the first sample must not pay for it
    import probe_agent.load  # noqa: F401

    before, before_done = run_probe(src, opts)
    count = (before.get("driver") or {}).get("gpu_count") or 0
    replay_own = recorded_own_pids(src) if src.replaying else None
    state = {}

    def on_start(pid, t0):
        state["attribution"] = Attribution(pid, replay_own)
        if before_done and (count or src.replaying):
            state["sampler"] = Sampler(
                src, count, opts.interval, t0, state["attribution"], opts.max_samples
            )
            state["sampler"].start()

    reasons = refusal(before, replay_own) if opts.refuse else []
    capture = OutputTail(opts.output_tail) if opts.emit else None
    section = run_unless_refused(opts, command, on_start, capture, reasons)
    sampler = state.get("sampler")
    attribution = state.get("attribution") or Attribution(None, set())
    if sampler is not None:
        sampler.stop()
        sampler.join(5.0)
    stream = (sampler.stream if sampler is not None else Stream(opts.max_samples)).finish()
    after, after_done = run_probe(src, opts, attribution.own_pids())
    try:
        provenance = document(opts, section, sampler, stream, (before, before_done), after)
        provenance["verdict"] = verdict(before, stream, after, attribution)
        if capture is not None:
            provenance["output"] = capture.section()
        write_provenance(opts, src, provenance, attribution)
    except Exception as exc:
        sys.stderr.write(
            "sweep-agent: the command ended (exit %s) but provenance.json was not written: %s: %s\n"
            % (section["exit_code"], type(exc).__name__, exc)
        )
        return EXIT_WRAPPER_FAILED
    code = exit_code(opts, section)
    hung = not (before_done and after_done) or (sampler is not None and sampler.is_alive())
    return finish(src, hung, code)


def recorded_own_pids(src):
    """Under --replay: the pids the recorded run's command had, so its samples attribute alike."""
    recorded = src.data.get("load") or {}
    return set([recorded.get("pid")] + list(recorded.get("own_pids") or [])) - set([None])


def document(opts, section, sampler, stream, before_probe, after):
    """provenance.json but its verdict: the agent, the command, the sampler, both probes, the
    samples."""
    before, before_done = before_probe
    return {
        "kind": "sweep.provenance",
        "schema_version": PROVENANCE_SCHEMA_VERSION,
        "agent": {
            "version": AGENT_VERSION,
            "python": sys.version.split()[0],
            "replay": opts.replay,
        },
        "command": section,
        "sampler": sampler_report(sampler, section, opts.interval, before_done),
        "before": before,
        "samples": stream.samples(),
        "thinning": stream.report(),
        "intervals": stream.intervals,
        "after": after,
    }


def exit_code(opts, section):
    """The command's exit code (EXIT_REFUSED where it did not start; said on stderr), or 0 under
    --emit, whose caller reads the code from provenance.json."""
    if opts.emit:
        return 0
    if section.get("refused"):
        sys.stderr.write(
            "sweep-agent: not started: %s; --force to run it anyway\n" % section["refused"]
        )
    return section["exit_code"] if section["exit_code"] is not None else EXIT_REFUSED


def run_unless_refused(opts, command, on_start, capture, reasons):
    """The command section: the command run, or (`reasons` under --refuse, no
    --force) not started."""
    if reasons and not opts.force:
        section = {
            "argv": list(command),
            "cwd": os.getcwd(),
            "pid": None,
            "exit_code": None,
            "signal": None,
            "started_at": None,
            "wall_s": 0.0,
            "error": None,
            "timeout_s": opts.command_timeout,
            "timed_out": False,
        }
    else:
        section, _ = run_command(
            command, on_start, capture, opts.command_timeout, opts.emit and opts.tether
        )
    if opts.refuse:
        section["refused"] = None if (opts.force or not reasons) else "; ".join(reasons)
        section["forced"] = list(reasons) if (opts.force and reasons) else None
    return section


def write_provenance(opts, src, provenance, attribution):
    """provenance.json into OUT (--emit: on stdout), and with --record the
    capture a replay reads."""
    section = provenance["command"]
    if opts.emit:
        sys.stdout.write(json.dumps(provenance, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    else:
        write_atomic(
            os.path.join(opts.out, "provenance.json"), json.dumps(provenance, indent=1) + "\n"
        )
    if opts.record:  # replayed later, the wrapped command's processes are its own again
        src.load_meta = {
            "engine": "wrap",
            "argv": section["argv"],
            "seconds": section["wall_s"],
            "interval_s": opts.interval,
            "pid": section["pid"],
            "exit_code": section["exit_code"],
            "own_pids": sorted(attribution.own_pids()),
        }
        write_atomic(opts.record, json.dumps(src.capture(opts.note), indent=1) + "\n")


def open_source(opts, command):
    """The source of GPU answers for --wrap (live, recording or replay), or the usage
    error's exit code."""
    from probe_agent.source import LiveSource, RecordingSource, ReplaySource

    if not command:
        return usage_error(
            "--wrap needs a command after --: sweep-agent --wrap --out DIR -- COMMAND ..."
        )
    if not opts.out and not opts.emit:
        return usage_error(
            "--wrap needs --out DIR: the command owns stdout, provenance.json goes to DIR"
        )
    if not opts.interval > 0:
        return usage_error("--interval must be > 0 seconds (got %g)" % opts.interval)
    if opts.command_timeout is not None and not opts.command_timeout > 0:
        return usage_error("--command-timeout must be > 0 seconds (got %g)" % opts.command_timeout)
    if opts.max_samples < 2:
        return usage_error("--max-samples must be 2 or more (got %d)" % opts.max_samples)
    if opts.replay and opts.record:
        return usage_error("--replay and --record exclude each other")
    problem = check_paths(opts)
    if problem:
        return usage_error(
            problem.replace("for health.json and health-report.md", "for provenance.json")
        )
    try:
        return (
            ReplaySource(opts.replay)
            if opts.replay
            else (RecordingSource() if opts.record else LiveSource())
        )
    except (OSError, ValueError) as exc:
        return usage_error("cannot replay %s: %s" % (opts.replay, exc))


def sampler_report(sampler, section, interval, before_done):
    """provenance.json's "sampler": what the sampler did, or why it never started."""
    if sampler is not None:
        return sampler.report(section["wall_s"])
    return {
        "interval_s": interval,
        "samples": 0,
        "read_ms_median": None,
        "read_ms_max": None,
        "cpu_s": None,
        "busy_fraction": None,
        "niced": False,
        "error": "not started: "
        + (
            "the command was refused"
            if section.get("refused")
            else "no GPU"
            if before_done
            else "the probe before did not finish"
        ),
    }


def finish(src, hung, exit_code):
    """Shut NVML down (once per probe's nvmlInit) and return `exit_code`; after a hung
    query, exit at once."""
    if not hung:
        for _ in range(2):
            try:
                src.nvml("nvmlShutdown", "nvmlShutdown")
            except Exception:
                pass
    if hung:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)  # a hung driver query must not keep the process alive
    return exit_code
