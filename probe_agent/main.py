"""The agent's command line: probe this host (or replay a capture) and print health.json.

Exit codes: 0 health.json was emitted (whatever its verdict), 2 usage error, 1 internal error.
"""

import argparse
import json
import os
import sys
import time

from probe_agent import AGENT_VERSION
from probe_agent.probe import check_paths, run_probe, write_atomic
from probe_agent.source import LiveSource, RecordingSource, ReplaySource

SPEED_DEADLINE_S = 30  # --speed's bound (20 s at most) and the children's start and end


def _option(*flags, **settings):
    return flags, settings


# Every option of the agent, in --help's order. `env`: the environment variable that gives the
# default (read when the parser is built, not when the module is imported).
OPTIONS = (
    _option("--out", metavar="DIR", help="also write health.json and health-report.md into DIR"),
    _option(
        "--deep", action="store_true", help="import torch and ask CUDA (seconds), not only metadata"
    ),
    _option(
        "--interpreter",
        action="append",
        metavar="PYTHON",
        help="python whose torch build to check (repeatable; default: python3 on PATH)",
    ),
    _option(
        "--deadline",
        type=float,
        default=30.0,
        metavar="S",
        help="emit what was read after S seconds, marked incomplete (default 30)",
    ),
    _option(
        "--framework-timeout",
        type=float,
        default=20.0,
        metavar="S",
        help="seconds each interpreter's torch check may take before it is recorded as timed out "
        "(default 20; --deep imports torch, which takes seconds)",
    ),
    _option(
        "--load",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="run a short GPU load and sample clocks, power and reasons while it runs",
    ),
    _option(
        "--load-engine",
        choices=("auto", "torch", "ptx"),
        default="auto",
        metavar="ENGINE",
        help="what --load runs: torch (a bf16 matmul in the first interpreter with a CUDA torch), "
        "ptx (an FMA loop through the CUDA driver API, no framework needed), auto (torch where "
        "a CUDA torch is found, else ptx; the default)",
    ),
    _option(
        "--interval",
        type=float,
        default=0.2,
        metavar="S",
        help="seconds between samples under --load and --wrap (default 0.2)",
    ),
    _option(
        "--speed",
        action="store_true",
        help="measure what each selected GPU delivers (HBM, PCIe, peer copies, FP32 through the "
        "CUDA driver API; bf16 GEMM and NCCL all-reduce where the host's python has a CUDA torch): "
        "at most 15 s on one GPU, 20 s on eight; refused on GPUs other processes use; adds %d s to "
        "--deadline" % SPEED_DEADLINE_S,
    ),
    _option(
        "--force",
        action="store_true",
        help="run --load or --speed even when other processes use the GPUs (recorded)",
    ),
    _option(
        "--replay",
        metavar="CAPTURE",
        env="SWEEP_REPLAY",
        help="answer from a capture file instead of the driver (env SWEEP_REPLAY)",
    ),
    _option(
        "--kernel-log",
        metavar="FILE",
        env="SWEEP_KERNEL_LOG",
        help="read the kernel log's Xid lines from FILE (a saved dmesg, a syslog file) instead of "
        "/dev/kmsg, journalctl -k and /var/log/kern.log; also under --replay (env "
        "SWEEP_KERNEL_LOG)",
    ),
    _option("--record", metavar="CAPTURE", help="save every raw answer read into CAPTURE"),
    _option("--note", metavar="TEXT", help="a note stored in the capture (--record)"),
    _option("--no-json", action="store_true", help="print the report instead of health.json"),
    _option(
        "--wrap",
        action="store_true",
        help="run the command after -- : probe before, sample every --interval during, probe "
        "after; write DIR/provenance.json (--out DIR); exit with the command's exit code",
    ),
    _option(
        "--emit",
        action="store_true",
        help="--wrap: print provenance.json on stdout, with the tail of the command's output "
        "(which it captures; the command reads /dev/null and runs in its own process group)",
    ),
    _option(
        "--refuse",
        action="store_true",
        help="--wrap: do not start the command on a host with a broken contract or another process "
        "on its GPUs (unless --force, which is recorded)",
    ),
    _option(
        "--command-timeout",
        type=float,
        default=None,
        metavar="S",
        help="--wrap: end the command (its process group with --emit) after S seconds",
    ),
    _option(
        "--tether",
        action="store_true",
        help="--wrap --emit: end the command when the agent's stdin ends (the controller's session "
        "closed)",
    ),
    _option(
        "--max-samples",
        type=int,
        default=1000,
        metavar="N",
        help="--wrap: keep at most N samples, thinned as the run grows (figures use every sample)",
    ),
    _option(
        "--output-tail",
        type=int,
        default=65536,
        metavar="BYTES",
        help="--wrap --emit: bytes of the command's output kept (the last ones)",
    ),
    _option("--version", action="version", version="sweep-agent " + AGENT_VERSION),
)


def build_parser():
    p = argparse.ArgumentParser(
        prog="sweep-agent",
        description="Read-only probe of this host's GPU stack: prints health.json on stdout.",
    )
    for flags, settings in OPTIONS:
        settings = dict(settings)
        if "env" in settings:
            settings["default"] = os.environ.get(settings.pop("env")) or None
        p.add_argument(*flags, **settings)
    return p


def parse_args(argv):
    return build_parser().parse_args(argv)


def main(argv=None):
    from probe_agent.wrap.envelope import split_command

    argv, command = split_command(sys.argv[1:] if argv is None else list(argv))
    opts = parse_args(argv)
    if opts.wrap or command is not None:
        from probe_agent.wrap import envelope as wrap

        return (
            wrap.main(opts, command)
            if opts.wrap
            else wrap.usage_error("a command after -- needs --wrap")
        )
    started = (time.time(), time.monotonic())
    if opts.replay and opts.record:
        sys.stderr.write("sweep-agent: --replay and --record exclude each other\n")
        return 2
    if opts.speed:
        opts.deadline += SPEED_DEADLINE_S
    problem = check_paths(opts)
    if problem:
        sys.stderr.write("sweep-agent: %s\n" % problem)
        return 2
    try:
        src = (
            ReplaySource(opts.replay)
            if opts.replay
            else (RecordingSource() if opts.record else LiveSource())
        )
    except (OSError, ValueError) as exc:
        sys.stderr.write("sweep-agent: cannot replay %s: %s\n" % (opts.replay, exc))
        return 2
    if opts.kernel_log:
        src.kernel_log = lambda: kernel_log_file(opts.kernel_log)
    health, done = run_probe(src, opts, started=started)
    if done:
        try:
            src.nvml("nvmlShutdown", "nvmlShutdown")
        except Exception:
            pass
    text = json.dumps(health, indent=1, sort_keys=False)
    failed = write_outputs(opts, health, text, src if health["probe"]["complete"] else None)
    if opts.no_json:
        from probe_agent.report import render_markdown

        sys.stdout.write(render_markdown(health))
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if failed:  # what was read is on stdout above: nothing is lost
        sys.stderr.write("sweep-agent: %s\n" % failed)
    if not done:
        os._exit(2 if failed else 0)  # a hung driver query must not keep the process alive
    return 2 if failed else 0


def kernel_log_file(path):
    """The kernel-log answer of --kernel-log FILE: its Xid and SXid events folded as the kernel
    log's are (`probe_agent.kernlog`), with this host's boot, or (not readable) why, as `tried`."""
    from probe_agent import kernlog

    fold, err = kernlog.read_tail(path)
    booted = kernlog.boot(lambda p: p)
    if err is not None:
        return {"source": None, "events": [], "tried": {path: err}, "boot": booted}
    return kernlog.answer(path, fold, {}, booted)


def write_outputs(opts, health, text, src):
    """--out's files and --record's capture (`src` None: not complete, not recorded); why
    one failed, or None."""
    from probe_agent.report import render_markdown

    path = None
    try:
        if opts.out:
            path = opts.out
            write_atomic(os.path.join(opts.out, "health.json"), text + "\n")
            write_atomic(os.path.join(opts.out, "health-report.md"), render_markdown(health))
        if opts.record and src is not None:
            path = opts.record
            write_atomic(opts.record, json.dumps(src.capture(opts.note), indent=1) + "\n")
    except OSError as exc:
        return "cannot write %s (%s); health.json was printed on stdout; give a writable path" % (
            exc.filename or path,
            exc.strerror or exc,
        )
    return None


if __name__ == "__main__":
    sys.exit(main())
