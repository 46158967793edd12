"""The rules that keep the architecture ("One core, three axes": docs/architecture.md) from eroding.

Read from the source, no imports run: no import cycles; one ``torch.autocast`` call site; no precision name
compared as a string outside the precision table; nobody but the store touches its connection; the
package root holds only the entry points and the axes; small modules and functions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"
MODULE_MAX_LINES = 330  # "modules under ~300 lines"
FUNCTION_MAX_LINES = 55  # "functions under ~50": body lines, the signature and docstring left out


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _module_level_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """accelbench modules imported when ``name`` is imported (statements at module level, not in functions)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        out |= {t for t in targets if t in modules and t != name}
    return out


def test_no_import_cycles():
    modules = _modules()
    graph = {n: _module_level_imports(p, n, modules) for n, p in modules.items()}
    # a package's __init__ importing its own submodules (registration) is how a registry fills; what must not
    # happen is a submodule importing its package back, or any longer loop
    for n, deps in graph.items():
        graph[n] = {d for d in deps if not (d.startswith(n + ".") and modules[n].name == "__init__.py")}
    seen, stack, cycles = set(), [], []

    def visit(n: str) -> None:
        if n in stack:
            cycles.append(stack[stack.index(n):] + [n])
            return
        if n in seen:
            return
        seen.add(n)
        stack.append(n)
        for d in sorted(graph[n]):
            visit(d)
        stack.pop()

    for n in sorted(graph):
        visit(n)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_one_autocast_call_site_and_no_precision_names_compared():
    autocast = [p for p in SRC.rglob("*.py") if "torch.autocast(" in p.read_text()]
    assert [p.relative_to(SRC).as_posix() for p in autocast] == ["precisions.py"]
    compare = re.compile(r"""(precision\w*\s*(==|!=)\s*["'])|(["'](fp32|fp16|bf16|tf32|amp-fp16|amp-bf16)["']\s*(==|!=|in\b))""")
    found = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py") if p.name != "precisions.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if compare.search(line)]
    assert not found, found


def test_only_the_store_touches_its_connection():
    found = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py") if "store" not in p.relative_to(SRC).parts[:1]
             for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\.conn\b", line)]
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
    big = [f"{p.relative_to(SRC)}: {n} lines" for p in SRC.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MODULE_MAX_LINES]
    long = [f"{p.relative_to(SRC)}:{fn.lineno} {fn.name}: {_body_lines(fn)} lines" for p in SRC.rglob("*.py")
            for fn in ast.walk(ast.parse(p.read_text())) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            and _body_lines(fn) > FUNCTION_MAX_LINES]
    assert not big and not long, big + long
