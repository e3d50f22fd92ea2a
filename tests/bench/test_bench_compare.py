"""Comparison table and K recommendation, fed with the published results
(docs/platform-facts.md, "Published results")."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from peagle_deploy.bench.compare import Comparison, classify, k_from_label
from peagle_deploy.bench.recommend import build_schedule, recommend_k
from peagle_deploy.bench.runner import LevelResult, SweepResult
from peagle_deploy.errors import SpecError

CONFIGS = (
    "peagle-k3",
    "peagle-k7",
    "peagle-k11",
    "eagle3-k3",
    "eagle3-k7",
    "eagle3-k11",
    "baseline",
)

# SPEED-Bench Code, Qwen3-Coder-30B-A3B-Instruct on B200 (output tokens/s).
SPEED_BENCH: dict[int, tuple[int, ...]] = {
    1: (605, 828, 873, 526, 620, 612, 294),
    4: (2003, 2656, 2777, 1777, 2084, 2059, 889),
    8: (3596, 4638, 4680, 3218, 3762, 3579, 1587),
    32: (9748, 10643, 11537, 8796, 9607, 10776, 4452),
    128: (20337, 23329, 22191, 19313, 22845, 22255, 10943),
}
SPEED_RATIOS = {
    1: (1.41, 2.97),
    4: (1.33, 3.12),
    8: (1.24, 2.95),
    32: (1.07, 2.59),
    128: (1.02, 2.13),
}

HUMANEVAL: dict[int, tuple[int, ...]] = {
    1: (665, 1032, 1167, 651, 905, 955, 294),
    4: (2205, 3313, 3710, 2198, 3044, 3215, 889),
    8: (3958, 5786, 6252, 3979, 5493, 5589, 1587),
}
HUMANEVAL_RATIOS = {1: (1.22, 3.97), 4: (1.15, 4.17), 8: (1.12, 3.94)}


def published_runs(table: dict[int, tuple[int, ...]]) -> list[SweepResult]:
    runs = []
    for i, label in enumerate(CONFIGS):
        levels = [
            LevelResult(c, {"output_throughput": float(row[i]), "completed": 1, "failed": 0})
            for c, row in table.items()
        ]
        runs.append(SweepResult(label, "published", None, "speed-bench", {}, levels, "", ""))
    return runs


@pytest.mark.parametrize(
    ("table", "ratios"), [(SPEED_BENCH, SPEED_RATIOS), (HUMANEVAL, HUMANEVAL_RATIOS)]
)
def test_published_ratios_are_reproduced(
    table: dict[int, tuple[int, ...]], ratios: dict[int, tuple[float, float]]
) -> None:
    rows = Comparison(published_runs(table)).table()
    assert [r["concurrency"] for r in rows] == sorted(table)
    for row in rows:
        assert (row["peagle_over_eagle3"], row["peagle_over_baseline"]) == ratios[
            row["concurrency"]
        ]


def test_classification_and_order() -> None:
    assert classify("peagle-k7") == "p-eagle"
    assert classify("P-EAGLE_k3") == "p-eagle"
    assert classify("eagle3-k11") == "eagle3"
    assert classify("baseline") == "baseline"
    assert classify("mystery") == "other"
    assert classify("mystery", "eagle-3") == "eagle3"
    with pytest.raises(SpecError) as err:
        classify("x", "medusa")
    assert err.value.field == "--kind"
    assert k_from_label("peagle-k11") == 11
    assert k_from_label("peagle") is None
    comp = Comparison(list(reversed(published_runs(HUMANEVAL))))
    assert [r.label for r in comp.ordered_runs] == list(CONFIGS)
    row = comp.table()[0]
    assert row["best_peagle"] == "peagle-k11"
    assert row["best_eagle3"] == "eagle3-k11"


def test_duplicate_labels_are_refused() -> None:
    runs = published_runs(HUMANEVAL)
    with pytest.raises(SpecError, match="duplicate labels peagle-k3"):
        Comparison([runs[0], runs[0]])


def test_renderings(tmp_path: Path) -> None:
    comp = Comparison(published_runs(SPEED_BENCH))
    md = comp.to_markdown("SPEED-Bench")
    assert "| conc | peagle-k3 | peagle-k7 | peagle-k11 | eagle3-k3" in md
    assert (
        "| 128 | 20,337 | 23,329 | 22,191 | 19,313 | 22,845 | 22,255 | 10,943 | 1.02 | 2.13 |" in md
    )
    rows = list(csv.DictReader(io.StringIO(comp.to_csv())))
    assert len(rows) == len(CONFIGS) * len(SPEED_BENCH)
    assert rows[0]["label"] == "peagle-k3"
    assert rows[0]["kind"] == "p-eagle"
    assert rows[0]["k"] == "3"
    files = comp.write_report(tmp_path / "report")
    assert files["plot"].read_bytes().startswith(b"\x89PNG")
    again = Comparison.load([files["json"]])
    assert again.table() == comp.table()


def test_recommend_k_moves_with_load_on_speed_bench() -> None:
    rec = recommend_k(published_runs(SPEED_BENCH))
    assert rec.kind == "p-eagle"
    assert [(c.concurrency, c.k) for c in rec.choices] == [
        (1, 11),
        (4, 11),
        (8, 11),
        (32, 11),
        (128, 7),
    ]
    assert rec.num_speculative_tokens == 11
    # switch at the geometric mean of batch sizes 32 and 128
    assert rec.schedule == ((1, 64, 11), (65, 128, 7))
    assert rec.speculative() == {
        "num_speculative_tokens": 11,
        "num_speculative_tokens_per_batch_size": [[1, 64, 11], [65, 128, 7]],
    }
    assert "num_speculative_tokens_per_batch_size: [[1, 64, 11], [65, 128, 7]]" in rec.to_yaml()
    _assert_vllm_accepts(rec.schedule)


def test_recommend_single_k_on_humaneval() -> None:
    rec = recommend_k(published_runs(HUMANEVAL))
    assert {c.k for c in rec.choices} == {11}
    assert rec.schedule is None
    assert rec.speculative() == {"num_speculative_tokens": 11}


def test_recommend_for_eagle3_tolerance_and_instances() -> None:
    runs = published_runs(SPEED_BENCH)
    e3 = recommend_k(runs, kind="eagle3")
    assert [c.k for c in e3.choices] == [7, 7, 7, 11, 7]
    # With 5 % tolerance, 128 keeps the K chosen at 32 (K=11: 22,255 is within 5 % of
    # K=7's 22,845), so noise-sized differences do not add a schedule switch.
    assert [c.k for c in recommend_k(runs, kind="eagle3", tolerance=0.05).choices] == [
        7, 7, 7, 11, 11,
    ]  # fmt: skip
    two = recommend_k(runs, instances=2)
    assert [c.batch_size for c in two.choices] == [1, 2, 4, 16, 64]
    assert two.schedule == ((1, 32, 11), (33, 64, 7))
    _assert_vllm_accepts(two.schedule)
    with pytest.raises(SpecError) as err:
        recommend_k([r for r in runs if r.label == "baseline"])
    assert err.value.field == "--results"


def test_schedule_ranges_stay_valid_for_adjacent_levels() -> None:
    from peagle_deploy.bench.recommend import LevelChoice

    choices = [LevelChoice(c, c, k, 1.0, "x", {}) for c, k in [(1, 5), (2, 3), (3, 5), (4, 5)]]
    schedule = build_schedule(choices)
    assert schedule == ((1, 1, 5), (2, 2, 3), (3, 4, 5))
    _assert_vllm_accepts(schedule)


def _assert_vllm_accepts(schedule: tuple[tuple[int, int, int], ...] | None) -> None:
    """vLLM 0.30.0's rules (validate_and_normalize_dynamic_sd_schedule)."""
    assert schedule
    assert schedule[0][0] == 1
    previous_end = 0
    for start, end, k in schedule:
        assert 0 < start <= end
        assert start > previous_end
        assert k >= 0
        previous_end = end
