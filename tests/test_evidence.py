"""Tests as evidence: the suite's own rules, read from its source (no test runs).

- A loop of asserts (``for r in rows: assert ...``, ``assert all(... for r in rows)``) passes on an empty list: the
  test must also assert that there is something to loop over (``assert rows``, ``assert len(rows) == 3``, an
  assert that indexes it), unless it loops over literal values.
- No pinned random stream: a test that seeds a random generator asserts properties (an interval holds the
  estimate, a width shrinks), never a number with many digits that only that stream gives.
- One CLI helper: the tests run ``python -m accelbench`` to completion through ``conftest.run_cli`` only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ITERATE = {"enumerate", "zip", "sorted", "reversed", "list", "tuple", "iter", "range"}


def _names(node: ast.AST, skip: ast.AST | None = None) -> set[str]:
    inside = {id(n) for n in ast.walk(skip)} if skip is not None else set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in inside}


def _literal(it: ast.AST, literals: set[str]) -> bool:
    """Whether ``it`` is literal values: a display, a constant, an UPPER_CASE or literal-assigned name, ``range`` of
    constants, a literal's ``.items()`` or slice."""
    if isinstance(it, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Constant)):
        return True
    if isinstance(it, ast.Name):
        return it.id.isupper() or it.id in literals
    if isinstance(it, ast.Attribute):
        return it.attr.isupper()  # module.CONSTANT
    if isinstance(it, ast.Subscript):
        return _literal(it.value, literals)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ITERATE:
        return all(_literal(a, literals) for a in it.args)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys", "values"):
        return _literal(it.func.value, literals)
    return False


def _subjects(it: ast.AST) -> set[str]:
    """The names whose emptiness decides whether a loop over ``it`` runs: ``x`` of ``x``, ``x.items()``, ``x[k]``,
    ``x.attr``, ``enumerate(x)``, ``zip(x, y)``."""
    if isinstance(it, ast.Name):
        return {it.id}
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ITERATE:
        return set().union(*(_subjects(a) for a in it.args))
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
        return _subjects(it.func.value) if it.func.attr in ("items", "keys", "values") else set()
    if isinstance(it, (ast.Attribute, ast.Subscript)):
        return _subjects(it.value)
    return set()


def _asserts(node: ast.AST) -> list[ast.Assert]:
    """The asserts of ``node``'s own body (not those of functions defined in it)."""
    out = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        out += [child] if isinstance(child, ast.Assert) else []
        out += _asserts(child)
    return out


def _guarded(it: ast.AST, asserts: list[ast.Assert], loop_asserts: list[ast.Assert]) -> bool:
    """Whether an assert outside the loop names what the loop runs over."""
    text, subjects = ast.unparse(it), _subjects(it)
    return any(
        text in ast.unparse(a.test) or subjects & _names(a.test)
        for a in asserts
        if not any(a is b for b in loop_asserts)
    )


def _all_calls(test: ast.AST):
    for call in ast.walk(test):
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "all"
            and call.args
            and isinstance(call.args[0], (ast.GeneratorExp, ast.ListComp))
        ):
            yield call


def vacuous_loops(path: Path) -> list[str]:
    """``file:line function`` of each loop of asserts (or ``assert all(...)``) that passes over nothing."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        literals = {
            t.id
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign) and _literal(n.value, set())
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        asserts = _asserts(fn)
        for loop in (n for n in ast.walk(fn) if isinstance(n, ast.For)):
            inner = _asserts(loop)
            if inner and not _literal(loop.iter, literals) and not _guarded(loop.iter, asserts, inner):
                found.append(f"{path.name}:{loop.lineno} {fn.name}: for ... in {ast.unparse(loop.iter)}")
        for a in asserts:
            for call in _all_calls(a.test):
                it = call.args[0].generators[0].iter
                beside = _subjects(it) & _names(a.test, skip=call)  # `assert rows and all(...)`
                if not (_literal(it, literals) or beside or _guarded(it, asserts, [a])):
                    found.append(f"{path.name}:{a.lineno} {fn.name}: all(... in {ast.unparse(it)})")
    return found


SEEDS = re.compile(r"default_rng\(|manual_seed\(|np\.random\.seed\(|random\.seed\(|\bseed=\d")


def pinned_numbers(path: Path) -> list[str]:
    """``file:line function`` of each assert, in a function that seeds a generator, comparing with a float written
    to 8 or more significant digits (what only that random stream gives)."""
    found, source = [], path.read_text()
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not SEEDS.search(ast.unparse(fn)):
            continue
        for a in _asserts(fn):
            digits = [
                n.value
                for n in ast.walk(a.test)
                if isinstance(n, ast.Constant)
                and isinstance(n.value, float)
                and len(re.sub(r"\D", "", repr(n.value).split("e")[0]).strip("0")) >= 8
            ]
            if digits:
                found.append(f"{path.name}:{a.lineno} {fn.name}: {digits}")
    return found


def cli_runs(path: Path) -> list[str]:
    """``file:line`` of each ``subprocess.run`` of ``-m accelbench`` outside ``conftest.run_cli``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("subprocess.run", "subprocess.check_output")
            and '"accelbench"' in ast.unparse(node).replace("'", '"')
        ):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_loop_of_asserts_passes_over_nothing():
    found = [f for p in sorted(TESTS.glob("*.py")) for f in vacuous_loops(p)]
    assert not found, "assert first that there is something to loop over:\n" + "\n".join(found)


def test_no_random_stream_is_pinned():
    found = [f for p in sorted(TESTS.glob("test_*.py")) for f in pinned_numbers(p)]
    assert not found, "assert the properties of a seeded result, not its digits:\n" + "\n".join(found)


def test_the_cli_runs_through_one_helper():
    found = [f for p in sorted(TESTS.glob("*.py")) if p.name != "conftest.py" for f in cli_runs(p)]
    assert not found, "run the CLI through conftest.run_cli:\n" + "\n".join(found)


def test_the_scans_find_what_they_look_for(tmp_path):
    """Each rule fires on an example (a scan that finds nothing proves nothing)."""
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        "import subprocess, sys\n"
        "import numpy as np\n"
        "def test_loop(rows):\n    for r in rows:\n        assert r\n"
        "def test_all(out):\n    assert all(r['ok'] for r in out.records)\n"
        "def test_guarded(rows):\n    assert len(rows) == 2\n    for r in rows:\n        assert r\n"
        "def test_beside(rows):\n    assert rows and all(r for r in rows)\n"
        "def test_literal():\n    for x in (1, 2):\n        assert x\n"
        "def test_pinned():\n    rng = np.random.default_rng(3)\n    assert rng.normal() == 0.123456789\n"
        "def test_cli():\n    subprocess.run([sys.executable, '-m', 'accelbench', 'run'])\n"
    )
    line = lambda found: [f.split(":")[1].split()[0] for f in found]  # noqa: E731
    assert line(vacuous_loops(bad)) == ["4", "7"]
    assert line(pinned_numbers(bad)) == ["19"]
    assert line(cli_runs(bad)) == ["21"]
