"""docs/architecture.md describes the code as it is: its example runs, and its layer
table is the layer rule tests/test_import_graph.py enforces."""

from __future__ import annotations

import re
from pathlib import Path

from test_import_graph import LAYERS, PLAN_STEPS

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def test_the_python_example_runs() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    exec(compile(code, str(DOC), "exec"), {})


def test_the_layer_table_is_the_enforced_one() -> None:
    rows = re.findall(r"^\| (\d+) \| (.+?) \|", DOC.read_text(encoding="utf-8"), re.M)
    table = [frozenset(re.findall(r"`(\w+)`", parts)) for _, parts in rows]
    enforced = [layer - {"__init__"} for layer in LAYERS]
    assert table == enforced
    text = DOC.read_text(encoding="utf-8")
    assert all(f"plan/{step}.py" in text for step in PLAN_STEPS)
