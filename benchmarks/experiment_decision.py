"""How often does the experiment's rule declare a false winner, and how soon does it decide?

Simulates live experiments request by request (`tests/experiment/decision_sim.py`:
daily swing, bursts, log-normal lengths, stalls, per-instance drift and offsets,
load-dependent speed and effects, lost metric lines) and reads each through the
product's `experiment.analysis.analyse` with the spec's defaults, as `peagle experiment
watch` would. Prints, in markdown:

1. per scenario of issue 30's table (refused set-ups marked, with the plan's refusal):
   false winners with no true difference, and right winners at +10 %; beside them, what
   the rule before issue 30 (per-minute pairs, plug-in mSPRT, 60-minute minimum)
   declares on the same simulated traffic, which shows the simulation holds what the
   issue's table shows;
2. a calibration (A/A) run on the hardest accepted traffic;
3. the median and 90th percentile time to a decision at 5, 20 and 50 requests/min, and
   how often smaller gains are promoted (the price of the margin);
4. the error guardrail: minutes to stop a split candidate answering only errors at 5
   requests/min, and how often a candidate with the incumbent's error rate is stopped.

    .venv/bin/python benchmarks/experiment_decision.py [--runs 200] [--workers 2] [--part NAME]

About 15 CPU-minutes at 200 runs per row (`--part` runs one section).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "experiment"))

from decision_sim import (  # noqa: E402  (the simulator lives beside the tests that use it)
    BEYOND_THE_MARGIN,
    REALISTIC,
    SCENARIOS,
    Scenario,
    Traffic,
    minutes_to_stop,
    run_rows,
    simulate,
    spec_for,
)

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0"
OLD_RULE_MINUTES = 1440
RATES = (5.0, 20.0, 50.0)
REALISTIC_LABEL = "split 50/50 on 2+2, drift (2%, lag-1 0.95), offsets (sd 1%), 3% lost lines"


def refusal(scenario: Scenario) -> str | None:
    """The plan's one-line refusal of the scenario's set-up, None when it plans."""
    from peagle_deploy.errors import InputError
    from peagle_deploy.experiment.plan import experiment_plan
    from peagle_deploy.spec import spec_from_dict

    block = dict(scenario.refused or {})
    count = block.pop("initial_instance_count", scenario.traffic.instances[0])
    spec = spec_from_dict(
        {
            "model": "gpt-oss-20b",
            "region": "us-east-1",
            "image_uri": IMAGE,
            "instance_type": "ml.g7e.2xlarge",
            "initial_instance_count": count,
            "speculative": {"mode": "p-eagle", "num_speculative_tokens": 3},
            "experiment": {"candidate": {"num_speculative_tokens": 5}, **block},
        }
    )
    try:
        experiment_plan(spec)
    except InputError as exc:
        return str(exc)
    return None


def old_rule(sim: Any, run: int, alpha: float = 0.05, tau: float = 0.1) -> str:
    """The rule before issue 30: per-minute paired log ratios (both variants with 2+
    requests), a plug-in mixture SPRT read every minute after 30 pairs, a winner once 60
    minutes and 1,000 requests per variant are seen and p <= alpha; 24 hours at most."""
    req, tok, sec = (
        f[run, :, :OLD_RULE_MINUTES] for f in (sim.requests, sim.decode_tokens, sim.decode_s)
    )
    total = squares = 0.0
    n, p, seen = 0, 1.0, [0.0, 0.0]
    for t in range(OLD_RULE_MINUTES):
        seen = [seen[0] + req[0, t], seen[1] + req[1, t]]
        if min(req[0, t], req[1, t]) < 2 or min(sec[0, t], sec[1, t]) <= 0:
            continue
        d = math.log((tok[1, t] / sec[1, t]) / (tok[0, t] / sec[0, t]))
        n, total, squares = n + 1, total + d, squares + d * d
        if n < 30:
            continue
        mean = total / n
        var = max((squares - n * mean * mean) / (n - 1), 1e-12)
        spread = var + n * tau * tau
        llr = 0.5 * math.log(var / spread) + n * n * tau * tau * mean * mean / (2 * var * spread)
        p = min(p, math.exp(-llr) if llr < 700 else 0.0)
        if t + 1 >= 60 and min(seen) >= 1000 and p <= alpha:
            return "candidate" if mean > 0 else "incumbent"
    return "none"


def _old_rule_rates(traffic: Traffic, runs: int, seed: int) -> tuple[float, float]:
    """(any winner at 0 %, candidate at +10 %) under the old rule."""
    shares = []
    for effect, wanted in ((0.0, ("candidate", "incumbent")), (0.10, ("candidate",))):
        sim = simulate(traffic.with_truth(effect), runs=runs, minutes=OLD_RULE_MINUTES, seed=seed)
        verdicts = Counter(old_rule(sim, r) for r in range(runs))
        shares.append(sum(verdicts[v] for v in wanted) / runs)
    return shares[0], shares[1]


ROWS = (*SCENARIOS, BEYOND_THE_MARGIN)


def scenario_row(args: tuple[int, int]) -> dict[str, Any]:
    """One row of the table (run in a worker)."""
    index, runs = args
    scenario = ROWS[index]
    row: dict[str, Any] = {"label": scenario.label, "refused": refusal(scenario)}
    row["old"] = _old_rule_rates(scenario.traffic, runs, seed=50_000 + index)
    if row["refused"] is None:
        spec = spec_for(scenario.traffic)
        null = run_rows(scenario.traffic, spec, runs=runs, seed=10_000 * index)
        gain = run_rows(
            scenario.traffic.with_truth(0.10), spec, runs=runs, seed=10_000 * index + 5_000
        )
        row["false"] = null.share("candidate")
        row["right"] = gain.share("candidate")
        row["undecided"] = (null.share("inconclusive"), gain.share("inconclusive"))
    return row


def calibration_row(args: tuple[str, Traffic, int]) -> dict[str, Any]:
    """What A/A runs report on `traffic` (no true difference)."""
    label, traffic, runs = args
    result = run_rows(traffic, spec_for(traffic, calibration=True), runs=runs, seed=77_000)
    shares = {v: result.share(v) for v in ("calibrated", "miscalibrated", "inconclusive")}
    return {"label": label, **shares}


def timing_row(args: tuple[float, float, int]) -> dict[str, Any]:
    rate, effect, runs = args
    traffic = replace(REALISTIC, requests_per_minute=rate, effect=effect)
    result = run_rows(
        traffic, spec_for(traffic), runs=runs, seed=int(90_000 + rate * 10 + effect * 100)
    )
    verdict = "candidate" if effect else "incumbent"
    return {
        "rate": rate,
        "effect": effect,
        "share": result.share(verdict),
        "median": result.hours(0.5),
        "p90": result.hours(0.9),
    }


def guardrail_rows(runs: int) -> dict[str, Any]:
    split = Traffic(mode="split", share=0.5, requests_per_minute=5.0)
    spec = spec_for(split)
    failing = minutes_to_stop(
        replace(split, error_rates=(0.001, 1.0)), spec, runs=runs, minutes=240, seed=3
    )
    stopped = sorted(s for s in failing if s is not None)
    out: dict[str, Any] = {
        "caught": len(stopped) / runs,
        "median": stopped[len(stopped) // 2] if stopped else None,
        "p90": stopped[min(len(stopped) - 1, int(0.9 * len(stopped)))] if stopped else None,
    }
    minutes = round(spec.max_duration_minutes)
    for rate in (0.005, 0.02):
        same = minutes_to_stop(
            replace(split, error_rates=(rate, rate)), spec, runs=runs, minutes=minutes, seed=4
        )
        out[f"same {rate:.1%}"] = sum(s is not None for s in same) / runs
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def decision_part(pool: Any, runs: int) -> None:
    rows = pool.map(scenario_row, [(i, runs) for i in range(len(ROWS))])
    print(f"\n## Decision: {runs} runs per row, 20 requests/min, spec defaults\n")
    print("| scenario | false winner (no true difference) | right winner at +10% |", end="")
    print(" before (false / right) |")
    print("|---|---|---|---|")
    for row in rows:
        before = f"{_pct(row['old'][0])} / {_pct(row['old'][1])}"
        if row["refused"] is not None:
            print(f"| {row['label']} | refused | refused | {before} |")
        else:
            print(f"| {row['label']} | {_pct(row['false'])} | {_pct(row['right'])} | {before} |")
    print("\nRefusals (the plan, before any AWS call):")
    for row in rows:
        if row["refused"] is not None:
            print(f"- {row['label']}: `{row['refused']}`")


def calibration_part(pool: Any, runs: int) -> None:
    cases = [
        (REALISTIC_LABEL, REALISTIC, runs),
        (BEYOND_THE_MARGIN.label, BEYOND_THE_MARGIN.traffic, runs),
    ]
    print(f"\n## Calibration (A/A): what {runs} runs report\n")
    print("| traffic | calibrated | miscalibrated (a false winner) | inconclusive |")
    print("|---|---|---|---|")
    for a in pool.map(calibration_row, cases):
        print(
            f"| {a['label']} | {_pct(a['calibrated'])} | {_pct(a['miscalibrated'])} "
            f"| {_pct(a['inconclusive'])} |"
        )


def timing_part(pool: Any, runs: int) -> None:
    timing = pool.map(timing_row, [(r, e, runs) for r in RATES for e in (0.0, 0.10)])
    print(f"\n## Time to a decision (hours): {REALISTIC_LABEL}, {runs} runs per cell\n")
    print("| requests/min | truth | decided (right verdict) | median | 90th percentile |")
    print("|---|---|---|---|---|")
    for t in timing:
        truth = "+10%" if t["effect"] else "0%"
        print(
            f"| {t['rate']:g} | {truth} | {_pct(t['share'])} | {t['median']:.0f} | {t['p90']:.0f} |"
        )


def power_part(pool: Any, runs: int) -> None:
    gains = (0.02, 0.03, 0.05, 0.10)
    rows = pool.map(timing_row, [(20.0, g, runs) for g in gains])
    print(f"\n## Promoted by the end, by true gain: {REALISTIC_LABEL}, 20 requests/min\n")
    print("| true gain | promoted | median hours to it |")
    print("|---|---|---|")
    for g, t in zip(gains, rows, strict=True):
        print(f"| +{100 * g:g}% | {_pct(t['share'])} | {t['median']:.0f} |")


def guardrail_part(pool: Any, runs: int) -> None:
    guard = pool.apply(guardrail_rows, (runs,))
    print(f"\n## Error guardrail: split 50/50 at 5 requests/min, {runs} runs\n")
    print(
        f"candidate answering only errors: stopped in {_pct(guard['caught'])} within 4 hours, "
        f"median {guard['median']} min, 90th percentile {guard['p90']} min"
    )
    for key in ("same 0.5%", "same 2.0%"):
        share = _pct(guard[key])
        print(
            f"candidate with the incumbent's error rate ({key[5:]}): stopped in {share} "
            "of 3-day runs"
        )


PARTS = {
    "decision": decision_part,
    "calibration": calibration_part,
    "timing": timing_part,
    "power": power_part,
    "guardrails": guardrail_part,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--part", choices=sorted(PARTS), action="append")
    args = parser.parse_args()
    started = time.monotonic()
    with Pool(args.workers) as pool:
        for name in args.part or list(PARTS):
            PARTS[name](pool, args.runs)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
