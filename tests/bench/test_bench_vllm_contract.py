"""recommend-k's schedules against vLLM's own schedule code (the pinned 0.30.0 venv).

vLLM expands `num_speculative_tokens_per_batch_size` into a dense batch-size -> K table
(`build_dynamic_sd_schedule_lookup`, used by the scheduler). One subprocess in the
contract-test venv expands every schedule recommend-k produced and the test checks
that each measured level's batch size gets the K recommended for it.
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
        Path.home() / ".cache" / "peagle-deploy" / "vllm-0.30.0"
    )
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None


def test_vllm_applies_recommended_schedules_per_batch_size() -> None:
    python = vllm_python()
    if python is None:
        pytest.skip("no vLLM 0.30.0 environment (make vllm-env)")
    recs: list[KRecommendation] = [
        recommend_k(published_runs(SPEED_BENCH)),
        recommend_k(published_runs(SPEED_BENCH), instances=2),
        recommend_k(published_runs(SPEED_BENCH), kind="eagle3"),
    ]
    assert recommend_k(published_runs(HUMANEVAL)).schedule is None
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
