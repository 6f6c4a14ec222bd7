"""The docs cannot drift from the code: every relative link in README.md and docs/
resolves, and every `./run_bench.sh ...` / `python -m bench ...` command in their code
blocks names a subcommand (or strategy) and flags that the parsers accept."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import ROOT

NO_TENSORFLOW = True  # conftest: these tests read files and run commands; TensorFlow is not imported for them

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
NOT_SHELL = {"text", "json", "python", "csv"}  # blocks that show output or code, not commands
SHELL_ENDS = {"|", "||", "&&", ";", ">", ">>", "2>&1", "&"}
LAUNCHER_ONLY = {"test", "setup", "-h", "--help", "help"}  # run_bench.sh's own, not python -m bench's


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    missing = [t for t in relative_links(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not missing, f"{page.name}: {missing}"


def commands(page: Path) -> list[list[str]]:
    """Each distbench command in the page's code blocks, as the arguments after
    `./run_bench.sh` (marked by a leading None) or `python -m bench`."""
    found = []
    for language, block in FENCE.findall(page.read_text()):
        if language.strip() in NOT_SHELL:
            continue
        for line in block.replace("\\\n", " ").splitlines():
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            for i, word in enumerate(words):
                if word.endswith("run_bench.sh"):
                    rest, tag = words[i + 1:], [None]
                elif words[i:i + 3] == ["python", "-m", "bench"]:
                    rest, tag = words[i + 3:], []
                else:
                    continue
                end = next((k for k, w in enumerate(rest) if w in SHELL_ENDS), len(rest))
                found.append([*tag, *rest[:end]])
                break
    return found


def refusal(args: list[str]) -> str | None:
    """Why the parsers refuse `args` (`python -m bench ARGS`), or None."""
    from bench.cli import SUBCOMMANDS, run_parser
    from strategies import registry

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            if args and args[0] in SUBCOMMANDS:
                module = importlib.import_module(SUBCOMMANDS[args[0]].partition(":")[0])
                namespace, extra = module.parser().parse_known_args(args[1:])
                if extra:
                    run_parser().parse_args(extra)
            else:
                namespace = run_parser().parse_args(args)
                if namespace.strategy is not None and namespace.strategy not in registry.all_strategies():
                    return f"no strategy {namespace.strategy}"
    except SystemExit as exc:
        return f"exit {exc.code}: {err.getvalue().strip()}"
    return None


def as_bench(args: list) -> list[str] | None:
    """`./run_bench.sh ARGS` as the `python -m bench` arguments it runs (None: the launcher's own)."""
    if not args or args[0] is None:
        rest = args[1:]
        if not rest or rest[0].startswith("-") and rest[0] not in LAUNCHER_ONLY:
            return ["all", *rest]
        if rest[0] in LAUNCHER_ONLY:
            return None
        from bench.cli import SUBCOMMANDS

        return rest if rest[0] in SUBCOMMANDS else ["--strategy", *rest]
    return args


def test_the_pages_hold_commands_to_check():
    assert sum(len(commands(p)) for p in PAGES) >= 30


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_in_the_docs_is_accepted_by_the_parsers(page):
    refused = []
    for args in commands(page):
        bench_args = as_bench(args)
        if bench_args is None:
            continue
        why = refusal(bench_args)
        if why:
            refused.append(f"{' '.join(a or './run_bench.sh' for a in args)}: {why}")
    assert not refused, "\n".join(refused)


def test_a_command_with_a_flag_no_parser_has_is_caught():
    assert refusal(["--strategy", "ps-sync", "--no-such-flag", "1"])
    assert refusal(["all", "--no-such-flag"])
    assert refusal(["--strategy", "no-such-strategy"])
    assert refusal(["cluster", "sideways"])
    assert refusal(["--strategy", "ps-sync", "--workers", "2"]) is None
