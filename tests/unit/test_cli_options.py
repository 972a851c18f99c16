"""`sweep run`'s options are declared once (`sweep.cli.options.RUN`), and what ``--resume`` reuses is derived
from that declaration: a run option added to the command without saying which kept run option
(`sweep.collect.resume.OPTIONS`) it sets fails here. The commands' help is made through click's public
Command hooks, not by patching a parameter's private methods."""
import inspect

import pytest
import typer

from sweep.cli import command, run as run_module
from sweep.cli.app import SweepCommand
from sweep.cli.options import RUN
from sweep.collect.resume import OPTIONS
from sweep.collect.run import run_sweep

# the options of `sweep run` that set no kept run option: the inventory (the manifest keeps it apart), where
# the run goes, how it resumes, what it lists; --load-engine rides with --load (given alone on --resume, the
# kept agent_args win). A new option belongs here only when a resumed run must not reuse it.
SETS_NOTHING = {"inventory", "inventory_option", "nodes", "out", "resume", "retry_failed", "trust_manifest",
                "list_hosts", "as_json", "load_engine"}
# the kept run options no flag of `sweep run` sets: run_sweep's library callers set them
LIBRARY_ONLY = {"ssh_config", "allow_agent", "look_for_keys", "retries", "loader", "engine_settings"}


def _run_command():
    return command().commands["run"]


def test_the_run_signature_is_the_run_table():
    """Every parameter of `sweep run` takes its declaration from RUN, and RUN declares nothing else."""
    params = {name: p for name, p in inspect.signature(run_module.run).parameters.items() if name != "ctx"}
    assert set(params) == set(RUN)
    assert [name for name, p in params.items() if p.default is not RUN[name].param] == []


def test_every_run_option_says_which_kept_run_options_it_sets():
    unknown = {name: declared.sets for name, declared in RUN.items() if not set(declared.sets) <= set(OPTIONS)}
    assert unknown == {}, "sets names no option of sweep.collect.resume.OPTIONS: add it there, or fix the name"
    assert {name for name, declared in RUN.items() if not declared.sets} == SETS_NOTHING
    assert set(OPTIONS) - {kept for declared in RUN.values() for kept in declared.sets} == LIBRARY_ONLY


# the flags whose value is the kept run option of the same name (--wrap is a switch; the kept wrap, the benchmark)
SAME_VALUE = [name for name, declared in RUN.items() if declared.sets == (name,) and name != "wrap"]


@pytest.mark.parametrize("name", SAME_VALUE)
def test_a_flag_default_is_the_run_default(name):
    """What a run keeps for a flag left at its default is what it keeps for the run's own default."""
    kept = OPTIONS[name]
    assert kept.kept(RUN[name].param.default) == kept.kept(kept.default)


def test_forks_is_declared_once():
    assert RUN["forks"].param.default == OPTIONS["forks"].default == \
        inspect.signature(run_sweep).parameters["forks"].default


@pytest.mark.parametrize("argv,given", [
    (["inv.yml"], set()),
    (["inv.yml", "--forks", "4", "--deep"], {"forks", "agent_args"}),
    (["inv.yml", "-e", "a=1", "--shard-by", "index", "--max-range-hosts", "9"], {"inventory_vars", "shard",
                                                                                 "inventory_limits"}),
    (["inv.yml", "--force", "--out", "x", "--list-hosts"], {"wrap", "agent_args"}),
    (["--resume", "r", "--engine", "slurm", "--nodelist", "n1", "--expect", "e.yml"], {"engine", "expect"}),
])
def test_given_options_are_those_typed(argv, given):
    """--resume reuses the manifest's options but those the command line gives again, as RUN maps them."""
    cmd = _run_command()
    ctx = cmd.make_context("run", list(argv))
    assert run_module.given_options(ctx) == given


def test_no_parameter_of_any_command_is_patched():
    """Help and usage come from SweepCommand's public hooks; no parameter carries a patched method."""
    stack, patched, commands = [command()], [], []
    while stack:
        cmd = stack.pop()
        subs = list(getattr(cmd, "commands", {}).values())
        stack += subs
        commands += [sub for sub in subs if not hasattr(sub, "commands")]
        patched += [f"{cmd.name} {param.name}" for param in cmd.params
                    if {"_usage_display_name", "display_type_rich"} & set(vars(param))]
    assert patched == []
    assert commands and [c.name for c in commands if not isinstance(c, SweepCommand)] == []
