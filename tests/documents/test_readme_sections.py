"""README keeps the two short sections that users asked for by name when the reference
moved to docs/ (a rewrite once dropped both): the trust model, with the threat each
control answers, and when to run an experiment as shadow or split, and what it costs."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README has no '## {title}' section"
    return match[1]


def test_the_trust_model_names_a_threat_for_each_control() -> None:
    body = _section("Safe on a real account")
    assert "docs/ci.md#trust-model" in body
    rows = [line for line in body.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| control | threat it answers")
    for row in rows[1:]:
        control, threat = (cell.strip() for cell in row.strip("|").split(" | "))
        assert control and threat, row
    controls = " ".join(rows[1:])
    for needed in ("secrets:", "PeagleCiRoles", "s3:ResourceAccount", "aws:SourceArn"):
        assert needed in controls, needed


def test_shadow_or_split_says_when_and_what_it_costs() -> None:
    body = _section("Tune K on your own traffic: shadow or split")
    assert "**shadow**" in body and "**split**" in body
    assert "two fleets" in body
    assert "docs/experiments.md" in body
