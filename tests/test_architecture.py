"""The rules that keep the architecture ("One core, three axes": docs/architecture.md) from eroding.

Read from the source, no imports run: no import cycles, every import read (module level and inside functions,
``import x``, ``from x import y``, relative ones, ``importlib.import_module("...")``); the layers, each importing
only from its own layer or below; one ``torch.autocast`` call site; no precision name compared as a string
outside the precision table, no backend name outside the backends; nobody but the store touches its connection; the package root holds only the entry
points and the axes; small modules and functions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"
MODULE_MAX_LINES = 500  # docs/architecture.md, "Size": a module of at most 500 lines (ruff-formatted)
FUNCTION_MAX_LINES = 70  # and a function body of at most 70 lines (the signature and docstring left out)

# Bottom to top; a module imports from its own layer or below (docs/architecture.md, "The layers"). A top-level
# package or module of accelbench that is in no layer fails the test: a new one is placed here on purpose.
LAYERS = (
    ("ground floor", {"core"}),
    (
        "axes",
        {"precisions", "models", "data", "telemetry", "cost", "store", "quant", "backends", "ceilings", "training"},
    ),
    ("scenarios", {"scenarios"}),
    ("launchers", {"launchers"}),
    ("sweep", {"sweep"}),
    ("studies and reports", {"studies", "report"}),
    ("entry points", {"api", "cli", "__main__"}),
)


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package at ``src`` by dotted name (a package by its ``__init__``)."""
    out = {}
    for p in src.rglob("*.py"):
        parts = p.relative_to(src.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _targets(node: ast.AST, package: str, known: dict[str, Path]) -> list[str]:
    """The dotted names an import statement (or ``importlib.import_module("literal")``) loads.

    ``from pkg import x`` loads the module ``pkg.x`` when there is one, else ``pkg`` (a name defined there).
    """
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: from the importing module's package, one level up per extra dot
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def imports_of(path: Path, name: str, known: dict[str, Path]) -> dict[str, int]:
    """The modules of ``known`` that ``name`` (its file ``path``) imports anywhere in its code -> first line.

    Python runs a package's ``__init__`` before any module inside it: that implicit step is not an edge (else
    every package whose ``__init__`` imports its modules to fill a registry would be a cycle); importing the
    package by name, or a name its ``__init__`` defines, is.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        for target in _targets(node, package, known):
            while target and target not in known:  # ``import a.b.c`` where a.b.c is not a module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.setdefault(target, node.lineno)
    return out


def import_graph(src: Path = SRC) -> dict[str, dict[str, int]]:
    """``module -> {imported module: line}`` over every import of the package at ``src``."""
    known = modules(src)
    return {name: imports_of(path, name, known) for name, path in known.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One loop ``[a, b, ..., a]`` through each strongly connected set of modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = set(stack[stack.index(v) :])
            del stack[stack.index(v) :]
            if len(members) > 1 or v in graph[v]:
                found.append(_loop(graph, members))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def _loop(graph: dict[str, dict[str, int]], members: set[str]) -> list[str]:
    """A shortest loop from the first member back to itself, inside ``members`` (breadth first)."""
    start = min(members)
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                return paths[v] + [start]
            if w in members and w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    return [start, start]


def _layer(name: str) -> int:
    top = name.split(".")[1]
    return next(i for i, (_, tops) in enumerate(LAYERS) if top in tops)


def test_no_import_cycles():
    graph = import_graph()
    assert sum(len(d) for d in graph.values()) > 500  # every import read, function-level ones included
    found = cycles(graph)
    assert not found, "\n".join(" -> ".join(c) for c in found)


def test_the_cycle_check_reads_every_kind_of_import(tmp_path):
    """A cycle through a function-level relative import, and one through ``from pkg import module``, are found;
    a registry (the package's ``__init__`` imports its modules, which take what they share from ``base``) is none."""
    pkg = tmp_path / "fake"
    (pkg / "reg").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from .b import g\n    return g\n",
        "b.py": "import fake.c\ndef g():\n    pass\n",
        "c.py": "from fake import a\n",
        "reg/__init__.py": "from fake.reg.base import REGISTRY\nfrom fake.reg import one, two  # noqa: E402\n",
        "reg/base.py": "REGISTRY = {}\n",
        "reg/one.py": "from fake.reg.base import REGISTRY\nREGISTRY['one'] = 1\n",
        "reg/two.py": "from .base import REGISTRY\nREGISTRY['two'] = 2\n",
    }
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    graph = import_graph(pkg)
    assert graph["fake.a"] == {"fake.b": 2} and graph["fake.c"] == {"fake.a": 1}
    assert cycles(graph) == [["fake.a", "fake.b", "fake.c", "fake.a"]]
    (pkg / "reg" / "two.py").write_text("from fake.reg import REGISTRY\nREGISTRY['two'] = 2\n")  # the __init__ back
    assert cycles(import_graph(pkg))[1] == ["fake.reg", "fake.reg.two", "fake.reg"]


def test_each_layer_imports_only_its_own_layer_or_below():
    graph = import_graph()
    tops = {n.split(".")[1] for n in graph if n != "accelbench"}
    placed = set().union(*(t for _, t in LAYERS))
    assert tops <= placed, f"place these in LAYERS: {sorted(tops - placed)}"
    upward = [
        f"{n} -> {d} (line {line})"
        for n, deps in graph.items()
        if n != "accelbench"
        for d, line in deps.items()
        if d != "accelbench" and _layer(d) > _layer(n)
    ]
    assert not upward, "\n".join(sorted(upward))


SHARED_SCENARIO_MODULES = {"accelbench.scenarios", "accelbench.scenarios.base"}  # the registry and the base class


def _scenario(name: str) -> str | None:
    """The scenario a module belongs to (``accelbench.scenarios.<a>`` or a module of that package), or None."""
    parts = name.split(".")
    if name in SHARED_SCENARIO_MODULES or parts[:2] != ["accelbench", "scenarios"] or len(parts) < 3:
        return None
    return parts[2]


def test_no_scenario_imports_another():
    """A scenario asks the layers below it (engines, models, the shared counts and ceilings), never another
    scenario's modules: what two scenarios share lives below them, so neither changes under the other."""
    graph = import_graph()
    crossing = {
        (n, d): line
        for n, deps in graph.items()
        if (a := _scenario(n))
        for d, line in deps.items()
        if (b := _scenario(d)) and b != a
    }
    assert [n for n in graph if _scenario(n) == "generate"]  # the rule reads the scenario packages
    assert not crossing, "\n".join(sorted(f"{n} -> {d} (line {line})" for (n, d), line in crossing.items()))
    assert _scenario("accelbench.scenarios.profile.lm") == "profile" and _scenario("accelbench.scenarios.base") is None


def _only_re_exports(tree: ast.Module) -> bool:
    """Whether a module's body, its docstring aside, is only ``from accelbench... import`` lines and ``__all__``."""
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    return bool(body) and all(
        (isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("accelbench")))
        or (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"])
        or (isinstance(n, ast.ImportFrom) and n.module == "__future__")
        for n in body
    )


def test_no_module_only_re_exports_another():
    """A module is where its code lives: no old import path kept alive as a module that only re-exports a new home
    (a package's ``__init__`` may gather its modules' names)."""
    shims = [
        name
        for name, path in modules().items()
        if path.name != "__init__.py" and _only_re_exports(ast.parse(path.read_text()))
    ]
    assert shims == []
    assert _only_re_exports(ast.parse('"""Moved."""\nfrom accelbench.sweep.derived import *  # noqa: F403\n'))
    assert not _only_re_exports(ast.parse("from accelbench.core import stats\nX = stats.median([1])\n"))


def test_nothing_imports_the_package_root():
    """``accelbench/__init__`` is what a notebook user imports (its lazy ``api`` and ``Store``): a module inside that
    imported it would close a loop through the entry points; the version lives on the ground floor."""
    graph = import_graph()
    assert [n for n, deps in graph.items() if "accelbench" in deps] == []
    assert set(graph["accelbench"]) <= {"accelbench.api", "accelbench.store", "accelbench.core.version"}


def test_one_autocast_call_site_and_no_precision_names_compared():
    autocast = [p for p in SRC.rglob("*.py") if "torch.autocast(" in p.read_text()]
    assert [p.relative_to(SRC).as_posix() for p in autocast] == ["precisions.py"]
    compare = re.compile(
        r"""(precision\w*\s*(==|!=)\s*["'])|(["'](fp32|fp16|bf16|tf32|amp-fp16|amp-bf16)["']\s*(==|!=|in\b))"""
    )
    found = [
        f"{p.relative_to(SRC)}:{i}"
        for p in SRC.rglob("*.py")
        if p.name != "precisions.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if compare.search(line)
    ]
    assert not found, found


def test_statuses_and_run_kinds_are_named_once():
    """Case and run statuses are written in ``core/errors.py``, run kinds and workloads in ``core/kinds.py``; nobody
    compares or stores them as literals. One place sets cuDNN's autotuning (the case runner's, core/device.py)."""
    from accelbench.core import kinds

    names = sorted({v for k, v in vars(kinds).items() if k.isupper() and isinstance(v, str)}, key=len, reverse=True)
    status = re.compile(
        r"""(\bstatus\b\W{0,3}\s*(==|!=)\s*|"status":\s*|\bstatus=)["'](ok|oom|error|unsupported|skipped|"""
        r"""running|complete|interrupted)["']"""
    )
    kind = re.compile(
        r"""\b(kind|workload)\b\W{0,3}\s*(==|!=|in|not in)\s*\(?["'](%s)["']""" % "|".join(map(re.escape, names))  # noqa: UP031
    )
    declared = re.compile(
        r"""^\s*(kind|workload|dist_kind|dist_workload)\s*=\s*["'](%s)["']""" % "|".join(map(re.escape, names))  # noqa: UP031
    )
    found = [
        f"{p.relative_to(SRC)}:{i}: {line.strip()}"
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC).as_posix() not in ("core/errors.py", "core/kinds.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if status.search(line) or kind.search(line) or declared.search(line)
    ]
    assert not found, "\n".join(found)
    from accelbench.scenarios import SCENARIOS

    declared_kinds = {
        k for sc in SCENARIOS.values() for k in (sc.kind, sc.dist_kind, sc.workload, sc.dist_workload) if k
    }
    assert len(SCENARIOS) >= 7 and declared_kinds <= set(names), declared_kinds - set(names)
    setters = [
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*.py")
        if re.search(r"cudnn\.benchmark\s*=[^=]", p.read_text())
    ]
    assert setters == ["core/device.py"]


def test_no_backend_names_compared_outside_the_backends():
    """What differs between backends is an attribute of theirs (``compiles``, ``workloads``, ``graph_capture``, ...),
    so a new backend needs no edit elsewhere."""
    import sys

    sys.path.insert(0, str(SRC.parent))
    from accelbench import backends

    names = "|".join(re.escape(n) for n in sorted(backends.names(), key=len, reverse=True))
    assert names
    compare = re.compile(rf"""((==|!=)\s*["']({names})["'])|(["']({names})["']\s*(==|!=|in\b))""")
    found = [
        f"{p.relative_to(SRC)}:{i}"
        for p in SRC.rglob("*.py")
        if "backends" not in p.relative_to(SRC).parts[:1]
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if compare.search(line)
    ]
    assert not found, found


def test_only_the_store_touches_its_connection():
    found = [
        f"{p.relative_to(SRC)}:{i}"
        for p in SRC.rglob("*.py")
        if "store" not in p.relative_to(SRC).parts[:1]
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\.conn\b", line)
    ]
    assert not found, found


def test_the_package_root_holds_the_entry_points_and_the_axes():
    assert sorted(p.name for p in SRC.glob("*.py")) == ["__init__.py", "__main__.py", "precisions.py"]
    assert (SRC / "api" / "__init__.py").exists()  # the entry point: the functions, and their typed results
    for axis in ("backends", "scenarios", "launchers"):
        assert (SRC / axis / "__init__.py").exists()


def _body_lines(fn: ast.AST) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the docstring
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def test_modules_and_functions_stay_small():
    big = [
        f"{p.relative_to(SRC)}: {n} lines"
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MODULE_MAX_LINES
    ]
    long = [
        f"{p.relative_to(SRC)}:{fn.lineno} {fn.name}: {_body_lines(fn)} lines"
        for p in SRC.rglob("*.py")
        for fn in ast.walk(ast.parse(p.read_text()))
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _body_lines(fn) > FUNCTION_MAX_LINES
    ]
    assert not big and not long, big + long
