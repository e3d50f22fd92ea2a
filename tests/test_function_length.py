"""No function over 80 lines in the product package, the CDK app and its entry point.

Read with `ast` from the source. `plan/` and `infra/` have no exception (the planner's own
test, tests/plan/test_plan_pipeline.py, says so for plan/ too); the rest of the package
carries today's offenders in ALLOWED_LONG, which only shrinks: an entry whose function is
gone or now short fails the test until it is removed, and a function not listed fails
when it grows past the limit.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
CHECKED = ("peagle_deploy", "infra", "app.py", "local")
"""What is read: the product package, the CDK app, and the local stand-ins (`local/`)."""
STRICT = ("peagle_deploy/plan/", "infra/", "app.py")
"""No allowance here, ever."""

ALLOWED_LONG: dict[str, int] = {
    "peagle_deploy/cli/bench.py:compare_command": 86,
    "local/peagle_local/demo.py:_rehearse": 153,
    "peagle_deploy/cli/deploy.py:deploy_command": 104,
    "peagle_deploy/cli/deploy.py:status_command": 97,
    "peagle_deploy/cli/promote.py:promote_command": 101,
    "peagle_deploy/doctor/capacity.py:check_quota": 84,
}
"""Today's offenders outside plan/ and infra/ (path:qualified name -> lines): shorten one,
then delete its line (issue 31, item 3)."""


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


def test_no_function_is_longer_than_80_lines_outside_the_allowance() -> None:
    long = {
        name: lines
        for name, lines in measured().items()
        if lines > MAX_FUNCTION_LINES and name not in ALLOWED_LONG
    }
    assert long == {}, "split these (or, outside plan/ and infra/, ask first)"


def test_the_allowance_only_shrinks() -> None:
    now = measured()
    stale = {
        name: now.get(name)
        for name, lines in ALLOWED_LONG.items()
        if now.get(name, 0) <= MAX_FUNCTION_LINES or now[name] > lines
    }
    assert stale == {}, "remove fixed entries from ALLOWED_LONG; a listed one may not grow"


def test_plan_and_infra_have_no_allowance() -> None:
    assert [name for name in ALLOWED_LONG if name.startswith(STRICT)] == []
