"""Every command the README and the docs pages show works as shown: each is parsed by its own entry point's parser
(train.py's, `python -m zoo.X`'s, a bench, docs or example script's), so a flag that no longer exists fails here, and
the quick ones (`--help`, `--print-config`, `python -m zoo.papers list`, a run of a few steps on generated data) are
run. The commands are the lines of the pages' shell code blocks; a program the test does not know fails it, so a
new kind of command is classified here, not skipped."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL = {"bash", "sh", "shell", "console", ""}
EXTERNAL = {"pip", "pip3", ".", "source", "mkdocs", "ruff", "tfds", "cd", "head"}  # not zoo's: shown, not checked
PYTHON_EXTERNAL = {"pytest", "venv", "pip"}  # python -m of another project
PLACEHOLDERS = {"RUN_DIR": "runs/x", "RUN": "runs/x", "DIR": "runs/dir", "OUT": "runs/out", "N": "2", "STEP": "2"}
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def shell_lines(text: str) -> Iterator[str]:
    """The command lines of a page's shell code blocks (continuation lines joined)."""
    for lang, body in FENCE.findall(text):
        if lang in SHELL:
            yield from (line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip())


def commands(text: str) -> list[list[str]]:
    """Each command of a page as argv, comments dropped, `a && b` and `a | b` split, environment assignments and
    `nice -n K` taken off the front, whole-word placeholders (RUN_DIR, N) given example values."""
    out = []
    for line in shell_lines(text):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        argv: list[str] = []
        for token in [*lexer, "&&"]:
            if token not in ("&&", "|", ";"):
                argv.append(PLACEHOLDERS.get(token, token))
                continue
            while argv and ENV.match(argv[0]):
                argv.pop(0)
            if argv[:1] == ["nice"]:
                argv = argv[3:] if argv[1:2] == ["-n"] else argv[1:]
            if argv:
                out.append(argv)
            argv = []
    return out


PAGE_COMMANDS = {page.relative_to(ROOT).as_posix(): commands(page.read_text()) for page in PAGES}


class Parsed(SystemExit):
    """Raised in place of returning from a parser's parse_args: the command line parsed, nothing else ran."""

    def __init__(self, namespace: argparse.Namespace):
        super().__init__(0)
        self.namespace = namespace


@contextlib.contextmanager
def stop_after_parsing() -> Iterator[None]:
    parse_args = argparse.ArgumentParser.parse_args

    def parse(self, args=None, namespace=None):
        raise Parsed(parse_args(self, args, namespace))

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse):
        yield


def zoo_main(module: str) -> Callable:
    """The `main` behind `python -m zoo.X` (zoo/cli/X.py), without its error boundary (which starts a backend)."""
    assert importlib.util.find_spec(module) is not None, f"python -m {module}: no such module"
    main = importlib.import_module(f"zoo.cli.{module.rsplit('.', 1)[-1]}").main
    return getattr(main, "__wrapped__", main)


def script_main(path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable:
    """A script's `main` taking argv, as `python path` runs it: its folder first on the path, its module code run
    (not as __main__); a main without an argv parameter reads sys.argv."""
    assert path.is_file(), f"{path.relative_to(ROOT)}: no such script"
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"doc_command_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # as an import would (dataclasses look their module up)
    before = dict(os.environ)
    try:
        spec.loader.exec_module(module)
    finally:  # a script may set defaults in the environment (bench/gpt_step.py: XLA's GPU memory fraction)
        for key in set(os.environ) - set(before):
            monkeypatch.delenv(key)
    assert hasattr(module, "main"), f"{path.relative_to(ROOT)} has no main() to parse its flags"
    if inspect.signature(module.main).parameters:
        return module.main

    def with_sys_argv(argv: list[str]) -> object:
        monkeypatch.setattr(sys, "argv", [str(path), *argv])
        return module.main()

    return with_sys_argv


def entry_point(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, Callable | None, list[str]]:
    """(what the command runs, its main or None where there is nothing of zoo's to parse, the rest of argv)."""
    program, args = argv[0], argv[1:]
    if program in EXTERNAL:
        return program, None, args
    if program in ("python", "python3"):
        if args[:1] == ["-m"]:
            module = args[1]
            if module in PYTHON_EXTERNAL:
                return module, None, args[2:]
            assert module.startswith("zoo."), f"python -m {module}: not a zoo entry point this test knows"
            return module, zoo_main(module), args[2:]
        if args[0] == "train.py":
            return "train.py", zoo_main("zoo.train"), args[1:]
        return args[0], script_main(ROOT / args[0], monkeypatch), args[1:]
    if program == "bash":
        check_shell_script(ROOT / args[0], args[1:])
        return args[0], None, args[1:]
    raise AssertionError(f"{shlex.join(argv)}: a program this test does not know; classify it in EXTERNAL or here")


def check_shell_script(path: Path, args: list[str]) -> None:
    """A shell script shown: it exists, bash reads it, and the arguments after the first (its output folder) are
    among the parts its `case` knows, if it has one."""
    assert path.is_file(), f"{path.relative_to(ROOT)}: no such script"
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    parts = {p for case in re.findall(r"^\s+([\w|-]+)\)", path.read_text(), re.M) for p in case.split("|")}
    if parts:
        assert set(args[1:]) <= parts, f"{path.name}: unknown parts {sorted(set(args[1:]) - parts)}"


def parse(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace | None:
    """Parse argv with its entry point's parser; the namespace, or None for a command not zoo's."""
    name, main, args = entry_point(argv, monkeypatch)
    if main is None:
        return None
    err = io.StringIO()
    with stop_after_parsing(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
        except Parsed as parsed:
            return parsed.namespace
        except SystemExit as e:
            if e.code == 0:  # --help: printed, and a clean exit
                return None
            raise AssertionError(f"{shlex.join(argv)}: {err.getvalue().strip() or f'exit {e.code}'}") from None
    raise AssertionError(f"{shlex.join(argv)}: {name} returned without parsing a command line")


def check_train_config(argv: list[str], namespace: argparse.Namespace) -> None:
    """train.py's flags resolve into a run config (model and plugin options, the schema's checks), unless the
    config file it names is one an earlier command writes."""
    from zoo.cli.train import config_from_args

    if namespace.config is None or Path(ROOT / namespace.config).is_file():
        with contextlib.chdir(ROOT):
            config_from_args(namespace)


def steps(argv: list[str]) -> int | None:
    return int(argv[argv.index("--steps") + 1]) if "--steps" in argv else None


def instant(argv: list[str]) -> bool:
    """Commands that print and leave: help, the resolved config, the claims' list."""
    return "--help" in argv or "--print-config" in argv or argv[-3:] == ["-m", "zoo.papers", "list"]


def short_run(argv: list[str]) -> bool:
    """A training run of a few steps on generated data."""
    return "train.py" in argv and "synthetic" in argv and (steps(argv) or 10**9) <= 5


def run_all(which: Callable[[list[str]], bool], folder: Path, monkeypatch, capsys) -> list[list[str]]:
    """The pages' commands that `which` picks, run for real in `folder` (the data and configs linked in)."""
    for name in ("data", "configs"):
        (folder / name).symlink_to(ROOT / name)
    monkeypatch.chdir(folder)
    ran = []
    for argv in (argv for page in PAGE_COMMANDS.values() for argv in page if which(argv)):
        _, main, args = entry_point(argv, monkeypatch)
        try:
            main(args)
        except SystemExit as e:
            assert e.code == 0, f"{shlex.join(argv)}: exit {e.code}: {capsys.readouterr().err}"
        ran.append(argv)
    return ran


def test_pages_show_commands_and_the_readme_keeps_ci_test_command():
    """The extraction finds the commands (.ci/run runs the README's test command)."""
    assert ["python", "-m", "pytest", "-q", "-n", "2"] in PAGE_COMMANDS["README.md"]
    assert sum(map(len, PAGE_COMMANDS.values())) > 50


def test_every_script_is_shown_with_its_command():
    """Every script in bench/ and beside the docs' pages is shown by a page as a command (so it is parsed here and
    runnable as its page says); bench/torch_models.py is a module the benches import."""
    scripts = {p.relative_to(ROOT).as_posix() for folder in ("bench", "docs") for p in (ROOT / folder).rglob("*")
               if p.suffix == ".sh" or (p.suffix == ".py" and '__name__ == "__main__"' in p.read_text())}
    shown = {a for page in PAGE_COMMANDS.values() for argv in page for a in argv[:2]}
    assert "bench/vs_torch.py" in scripts and "docs/muon/qkv.py" in scripts
    assert scripts <= shown, f"scripts no page shows: {sorted(scripts - shown)}"


@pytest.mark.parametrize("page", sorted(p for p, c in PAGE_COMMANDS.items() if c))
def test_every_command_parses(page, monkeypatch):
    for argv in PAGE_COMMANDS[page]:
        namespace = parse(argv, monkeypatch)
        if namespace is not None and "train.py" in argv:
            check_train_config(argv, namespace)


def test_a_removed_flag_fails_the_parse(monkeypatch):
    """The check has power: a flag train.py does not have, or a bad value, is caught."""
    with pytest.raises(AssertionError, match="--no-such-flag"):
        parse(["python", "train.py", "--no-such-flag", "1"], monkeypatch)
    with pytest.raises(AssertionError, match="--widths"):
        parse(["python", "-m", "zoo.coord_check", "--widths", "abc"], monkeypatch)
    with pytest.raises(AssertionError, match="unrecognized"):
        parse(["python", "docs/muon/qkv.py", "--width", "64"], monkeypatch)


def test_instant_commands_run(tmp_path, monkeypatch, capsys):
    """--help, --print-config and `python -m zoo.papers list`, run: each exits 0 and prints."""
    ran = run_all(instant, tmp_path, monkeypatch, capsys)
    assert {"--help", "--print-config", "list"} <= {a for argv in ran for a in argv}, ran
    assert "model:" in capsys.readouterr().out  # the resolved config, as YAML


@pytest.mark.slow
def test_short_runs_train(tmp_path, monkeypatch, capsys):
    """The pages' runs of a few steps on generated data train and leave a finished run dir."""
    ran = run_all(short_run, tmp_path, monkeypatch, capsys)
    summaries = list((tmp_path / "runs").glob("*/summary.json"))
    assert ran and len(summaries) == len(ran), (ran, summaries)


def test_every_train_flag_is_on_the_training_page():
    """docs/training.md names every flag of train.py (--momentum and --eval-batch-size were on no page)."""
    from zoo.cli.train import parser

    flags = {f for action in parser()._actions for f in action.option_strings if f.startswith("--")} - {"--help"}
    page = set(re.findall(r"--[a-z][a-z0-9-]*", (ROOT / "docs" / "training.md").read_text()))
    assert flags and not flags - page, f"train.py flags docs/training.md does not name: {sorted(flags - page)}"
