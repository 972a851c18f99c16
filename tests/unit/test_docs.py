"""The docs are checked: every command has help and is in the generated reference docs/cli.md (which
must be what `python -m sweep.cli.reference` prints now), the README links it; CI runs the README's
test command; the README stays a front page whose map names every page of docs/; the project layout
(docs/architecture.md) is checked against the tree."""
import re
from pathlib import Path

import pytest
import typer.main

from sweep.cli import app, main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CLI_MD = ROOT / "docs" / "cli.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def commands():
    group = typer.main.get_command(app)
    return sorted(group.commands)


def first_block():
    return re.search(r"```sh\n(.*?)```", README, re.S).group(1)


@pytest.mark.parametrize("name", commands())
def test_every_command_has_help_and_is_in_the_reference(name, capsys):
    assert main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage:" in out and len(out.splitlines()) > 3
    assert f"\n## sweep {name}\n" in CLI_MD.read_text(), f"sweep {name} is not in docs/cli.md"


def test_docs_cli_md_is_the_clis_own_help_as_generated_now():
    from sweep.cli.reference import reference

    assert CLI_MD.read_text() == reference(), "docs/cli.md is stale: python -m sweep.cli.reference > docs/cli.md"
    assert "(docs/cli.md)" in README  # the front page links the reference


def test_readme_starts_with_the_demo_and_the_test_command():
    lines = [l for l in first_block().splitlines() if l and not l.startswith("#")]
    assert len(lines) == 2
    assert lines[0].endswith("sweep demo")
    assert "pytest" in lines[1]


def readme_commands() -> list[str]:
    """The README's two commands, as a user copies them."""
    return [l for l in first_block().splitlines() if l and not l.startswith("#")]


def test_ci_runs_the_readmes_test_command_verbatim():
    """.ci/run is command 2: the same line (packages, --no-install-recommends, mkdir -p /run/sshd, the
    test extra, pytest), run as a command, not quoted in a comment."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = readme_commands()[1]
    executed = [l for l in ci if l.strip() and not l.lstrip().startswith("#")]
    assert command in executed, f".ci/run does not run the README's command 2:\n{command}"
    installs = [l for l in executed if "apt-get install" in l or "pip install" in l]
    assert installs == [command], "everything .ci/run installs must be in the README's command 2"


def test_readme_commands_install_without_recommends():
    for command in readme_commands():
        for part in command.split("&&"):
            if "apt-get install" in part:
                assert "--no-install-recommends" in part.split(), part


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "tools").glob("*_*.sh")
                                           if p.name != "screenshot_demo.sh"))
def test_recording_scripts_take_an_output_folder_and_no_lab_settings(script):
    """A contributor with a GPU of their own re-records a fixture with `tools/SCRIPT OUTDIR`."""
    import subprocess

    path = ROOT / "tools" / script
    text = path.read_text()
    assert f"#   tools/{script} OUTDIR" in text
    assert not re.search(r"\$\{?OUT\b|NCCL_|build/agent", text), "an environment variable or path of one lab"
    proc = subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and f"usage: tools/{script} OUTDIR" in proc.stderr


def _options(cmd, name):
    """(command, long option) of every visible option of every command."""
    for sub in getattr(cmd, "commands", {}).values():
        yield from _options(sub, f"{name} {sub.name}")
    for param in cmd.params:
        if param.param_type_name == "option" and not param.hidden:
            spellings = [opt for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")]
            if spellings and spellings != ["--help"]:
                yield name, spellings


def test_every_option_of_every_command_is_in_the_reference():
    reference = CLI_MD.read_text()
    missing = [f"{name} {spellings[0]}" for name, spellings in _options(typer.main.get_command(app), "sweep")
               if not any(re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", reference) for opt in spellings)]
    assert not missing, f"options not in docs/cli.md: {', '.join(missing)}"


def _layout_block() -> str:
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Project layout"):]
    return section.split("```")[1]


def _layout_paths() -> list[str]:
    """The path each line of the layout starts with (one module or package a line)."""
    return [line.split()[0] for line in _layout_block().splitlines() if line.strip()]


def _tree() -> list[str]:
    """Every module of sweep/ and probe_agent/ (not __init__, __main__) and every package folder of both."""
    modules = [p for p in [*(ROOT / "sweep").rglob("*.py"), *(ROOT / "probe_agent").rglob("*.py")]
               if p.stem not in ("__init__", "__main__") and "__pycache__" not in p.parts]
    folders = [d for d in [*(ROOT / "sweep").rglob("*"), *(ROOT / "probe_agent").rglob("*")]
               if d.is_dir() and not d.name.startswith("__") and (d / "__init__.py").exists() or d.parent.name == "sweep"
               and d.is_dir() and not d.name.startswith("__")]
    return sorted([str(p.relative_to(ROOT)) for p in modules] + [f"{d.relative_to(ROOT)}/" for d in folders])


def test_the_project_layout_names_every_module_and_package_of_the_tree():
    """docs/architecture.md's "Project layout" is checked against the tree: every module of sweep/ and
    probe_agent/ and every subpackage has its own line, by path (issue 41: the README's missed 21 modules)."""
    listed = set(_layout_paths())
    missing = [path for path in _tree() if path not in listed]
    assert not missing, f"docs/architecture.md's Project layout does not name: {', '.join(missing)}"


def test_every_path_the_project_layout_names_exists():
    """No line for a module that was moved or renamed: a stale layout fails as a missing one does."""
    stale = [path for path in _layout_paths() if not (ROOT / path).exists()]
    assert not stale, f"docs/architecture.md's Project layout names paths not in the tree: {', '.join(stale)}"


def test_the_readme_is_a_front_page_and_its_map_names_every_page_of_docs():
    """The README stays a front page (issue 41: it was 820 lines); the reference lives in docs/, and the
    README's map of docs/ links each page, so a page is never orphaned."""
    assert len(README.splitlines()) <= 220, f"README.md is {len(README.splitlines())} lines: move reference to docs/"
    section = README[README.index("## Documentation"):]
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name})" not in section]
    assert not unlinked, f"README's map of docs/ does not link: {', '.join(unlinked)}"
    for link in re.findall(r"\]\(((?:docs|bench|tests)/[^)#]+)", README):
        assert (ROOT / link).exists(), f"README links {link}, which is not in the tree"
