"""The emulator keeps the project's rule: no function over 80 lines (issue 31, item 3)."""

from __future__ import annotations

import ast
from pathlib import Path

EMULATOR = Path(__file__).resolve().parents[2] / "local" / "peagle_local" / "emulator"
MAX_FUNCTION_LINES = 80


def test_no_emulator_function_is_longer_than_80_lines() -> None:
    long = []
    for path in sorted(EMULATOR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == []
