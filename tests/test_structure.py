"""The shape of the code, checked from its source: no import cycles in bench/ and
strategies/, and no strategy recognised by its name outside strategies/ (code there asks
what a strategy declares; presets may still list names as arguments)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from strategies import registry

NO_TENSORFLOW = True  # conftest: these tests read files and run commands; TensorFlow is not imported for them

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "strategies")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(*packages: str) -> dict[str, Path]:
    return {module_name(p): p for package in packages for p in sorted((ROOT / package).rglob("*.py"))}


def type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of `known` that `name` imports anywhere in its source (inside functions too,
    where an import only hides a cycle), except imports made for type checkers only."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = sources(*PACKAGES)
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_graph_reads_relative_and_function_level_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from . import x\ndef f():\n    from bench.y import z\n")
    assert imports_of("bench.m", path, {"bench.x", "bench.y", "bench.y.z"}) == {"bench.x", "bench.y.z"}


def test_bench_and_strategies_import_each_other_without_a_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The kinds of code, lowest first (docs/architecture.md): a module imports its own kind, the
# shared modules and the kinds below it. strategies/ sits on one run's machinery: it imports the
# contract (bench.run.contract) and the helpers a worker uses; the machinery never imports it.
KINDS = ("shared", "infra", "run", "strategies", "analysis", "drivers")
DISPATCHERS = ("bench.cli", "bench.__main__")  # each subcommand imported when it is called


def kind_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "strategies":
        return "strategies"
    if module in DISPATCHERS:
        return None
    return parts[1] if len(parts) > 2 and parts[1] in KINDS else "shared"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    rank = {kind: i for i, kind in enumerate(KINDS)}
    found = []
    for module, imported in graph.items():
        mine = kind_of(module)
        for other in imported:
            theirs = kind_of(other)
            if mine is not None and theirs is not None and rank[theirs] > rank[mine]:
                found.append(f"{module} ({mine}) imports {other} ({theirs})")
    return sorted(found)


def test_the_layer_check_sees_an_import_of_a_higher_kind():
    graph = {"bench.run.launch.x": {"bench.drivers.presets.y", "bench.infra.tools"}, "bench.config": {"bench.run.z"},
             "bench.cli": {"bench.drivers.presets.y"}, "bench.run.contract": {"bench.run.process.records"}}
    assert upward_imports(graph) == ["bench.config (shared) imports bench.run.z (run)",
                                     "bench.run.launch.x (run) imports bench.drivers.presets.y (drivers)"]


def test_each_kind_of_code_imports_only_the_kinds_below_it():
    assert upward_imports(import_graph()) == []


def test_the_machinery_imports_no_strategy_and_nothing_imports_a_concrete_one():
    # read from the imports: bench/run and bench/infra import nothing of strategies/ (the contract is
    # theirs); elsewhere in bench/ only the registry is imported, by what starts runs or reads records
    graph = import_graph()
    machinery = [f"{m} imports {i}" for m, imported in graph.items() if m.startswith(("bench.run", "bench.infra"))
                 for i in imported if i.split(".")[0] == "strategies"]
    assert machinery == []
    concrete = [f"{m} imports {i}" for m, imported in graph.items() if m.startswith("bench")
                for i in imported if i.split(".")[0] == "strategies" and i not in ("strategies", "strategies.registry")]
    assert concrete == []


def run_subpackage(module: str) -> str | None:
    """bench.run's sub-package (or module) a module is in: "launch", "process", "contract" ..."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["bench", "run"] and len(parts) > 2 else None


def test_bench_runs_sub_packages_import_one_way():
    graph: dict[str, set[str]] = {}
    for module, imported in import_graph().items():
        mine = run_subpackage(module)
        if mine is not None:
            graph.setdefault(mine, set()).update(p for i in imported if (p := run_subpackage(i)) not in (None, mine))
    cycle = find_cycle(graph)
    assert cycle is None, "a loop among bench/run's sub-packages: " + " -> ".join(cycle)


ANALYSIS_ORDER = ("runs", "projection", "report")  # each part imports only those before it


def analysis_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["bench", "analysis"] and len(parts) > 2 else None


def arrows_back(graph: dict[str, set[str]]) -> list[str]:
    """The imports among bench/analysis's parts that go against ANALYSIS_ORDER (a part outside it, too)."""
    back = []
    for module, imported in graph.items():
        mine = analysis_part(module)
        for name in imported:
            theirs = analysis_part(name)
            if mine is None or theirs is None or theirs == mine:
                continue
            if mine not in ANALYSIS_ORDER or theirs not in ANALYSIS_ORDER or \
                    ANALYSIS_ORDER.index(theirs) > ANALYSIS_ORDER.index(mine):
                back.append(f"{module} imports {name}")
    return back


def test_the_analysis_runs_then_projects_then_reports_with_no_import_back():
    assert arrows_back(import_graph()) == []


def test_the_analysis_check_sees_an_import_back():
    assert arrows_back({"bench.analysis.projection.cli": {"bench.analysis.report.html"},
                        "bench.analysis.runs.collect": {"bench.analysis.projection.files"},
                        "bench.analysis.report.x": {"bench.analysis.runs.collect"}}) == [
        "bench.analysis.projection.cli imports bench.analysis.report.html",
        "bench.analysis.runs.collect imports bench.analysis.projection.files"]


def _names_in(node: ast.AST, constants: dict[str, set[str]]) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value
        elif isinstance(sub, ast.Name) and sub.id in constants:
            yield from constants[sub.id]


def module_constants(tree: ast.Module) -> dict[str, set[str]]:
    """Strings held by the module's top-level constants (a tuple of names tested later)."""
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = {c.value for c in ast.walk(node.value)
                                       if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return out


def decisions_in(tree: ast.Module) -> Iterator[ast.AST]:
    """Every expression a decision is made on: conditions, comparisons, prefix tests, membership."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            yield node.test
        elif isinstance(node, ast.comprehension):
            yield from node.ifs
        elif isinstance(node, ast.Compare):
            yield node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith", "isin", "removeprefix"):
            yield from node.args
        elif isinstance(node, ast.Match):
            yield from (case.pattern for case in node.cases)


def name_branches(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text())
    constants = module_constants(tree)
    prefixes = {n.split("-")[0] + "-" for n in names if "-" in n}
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found: dict[str, None] = {}  # ordered, once each (an if's test is also a comparison)
    for test in decisions_in(tree):
        for text in _names_in(test, constants):
            if text in names or text in prefixes:
                found[f"{shown}:{getattr(test, 'lineno', '?')}: {text!r}"] = None
    return list(found)


def test_the_name_branch_finder_sees_the_ways_a_name_is_tested(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('KNOWN = ("ps-async", "x")\nif s == "single": pass\nok = [r for r in rs if r in KNOWN]\n'
                    'y = s.startswith("ps-")\nargs = ["--strategy", "single"]\n')
    found = {line.split(": ", 1)[1] for line in name_branches(path, {"single", "ps-async"})}
    assert found == {"'single'", "'ps-async'", "'ps-'"}


def test_no_code_outside_strategies_branches_on_a_strategy_name():
    names = set(registry.all_strategies())
    found = [hit for path in sorted((ROOT / "bench").rglob("*.py")) for hit in name_branches(path, names)]
    assert not found, "ask the strategy's declaration instead:\n" + "\n".join(found)


def registry_lookups(path: Path) -> list[int]:
    """Lines where a module looks a strategy up by name (registry.get)."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "registry"]


def test_a_runs_path_looks_its_strategy_up_once_and_hands_it_down():
    # bench.cli.run_from_args looks it up, once on each of its three ways to a config (a child's
    # --config-json, --resume, flags); the launchers, validation and the emulated cluster's
    # record are handed it
    found = {str(path.relative_to(ROOT)): lines for package in ("bench/run", "bench/infra")
             for path in sorted((ROOT / package).rglob("*.py")) if (lines := registry_lookups(path))}
    found.update({name: lines for name in ("bench/cli.py", "bench/run/validation.py")
                  if (lines := registry_lookups(ROOT / name))})
    assert list(found) == ["bench/cli.py"] and len(found["bench/cli.py"]) == 3, found
    source = (ROOT / "bench/cli.py").read_text()
    lookups = source[source.index("def run_from_args"):].split("\ndef ", 1)[0]
    assert lookups.count("registry.get(") == 3


# The host kinds (docs/adding-a-launcher.md) and the one module that picks among them
HOST_KINDS = {"bench.run.launch.this_host", "bench.run.launch.slurm.srun", "bench.run.launch.emulated_hosts",
              "bench.run.launch.ssh_hosts"}
LAUNCHERS = ("bench.run.launch.cluster", "bench.run.launch.mpi", "bench.run.launch.one_host", "bench.run.launch.close")


def test_the_launchers_reach_hosts_only_through_the_host_kind_interface():
    # read from the imports: what starts, watches and closes a multi-process run holds a HostKind that
    # bench.run.launch.run_hosts picked, and imports none of the kinds (a new one is one file and a line)
    graph = import_graph()
    assert {m: sorted(graph[m] & HOST_KINDS) for m in LAUNCHERS} == {m: [] for m in LAUNCHERS}
    assert HOST_KINDS <= graph["bench.run.launch.run_hosts"]


LONGEST_FUNCTION = 60  # lines: a longer one does several jobs (docs/architecture.md)


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION]


def test_the_long_function_finder_counts_a_functions_lines(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("def f():\n" + "    x = 1\n" * LONGEST_FUNCTION + "\n\ndef g():\n    pass\n")
    assert [line.split()[1] for line in long_functions(path)] == ["f"]


def test_no_function_is_longer_than_60_lines():
    assert [line for path in sources(*PACKAGES).values() for line in long_functions(path)] == []


def test_the_structure_and_docs_tests_do_not_import_tensorflow():
    # conftest imports it only before a test whose module does not declare NO_TENSORFLOW
    import subprocess
    import sys

    from tests.conftest import ROOT

    probe = ("import sys, pytest; code = pytest.main(['-q', '-o', 'addopts=', 'tests/test_docs.py', "
             "'tests/test_structure.py', '-k', 'not do_not_import_tensorflow', '-p', 'no:cacheprovider']); "
             "sys.exit(code or ('tensorflow' in sys.modules and 3))")
    ran = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert ran.returncode == 0, (ran.returncode, ran.stdout[-2000:])
