"""No function over 80 lines in the product package, the CDK app, its entry point and the
local stand-ins (issue 31, item 3).

Read with `ast` from the source. There is no allowance: a function that grows past the
limit is split before it lands.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
CHECKED = ("peagle_deploy", "infra", "app.py", "local")
"""What is read: the product package, the CDK app, and the local stand-ins (`local/`)."""


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def measured() -> dict[str, int]:
    """`path:qualified name` -> lines, of every function of CHECKED."""
    out: dict[str, int] = {}
    for part in CHECKED:
        root = ROOT / part
        if not root.exists():
            continue
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for name, lines in _functions(ast.parse(path.read_text(encoding="utf-8"))):
                out[f"{relative}:{name}"] = lines
    return out


def test_no_function_is_longer_than_80_lines() -> None:
    long = {name: lines for name, lines in measured().items() if lines > MAX_FUNCTION_LINES}
    assert long == {}, "split these: one function, one job"
