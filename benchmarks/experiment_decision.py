"""How often does the experiment's rule promote a candidate that is no faster, how soon
does it decide, and what does a decision cost?

Simulates live experiments request by request (`tests/experiment/decision_sim.py`:
daily swing, bursts, log-normal lengths, stalls, per-instance fixed offsets and drift,
load-dependent speed and effects, lost metric lines), instance by instance, and reads
each through the product's `experiment.analysis.analyse` with the spec's defaults, as
`peagle experiment watch` would. Prints, in markdown:

1. `decision`: issue 35's table: false promotions (no true difference) and promotions
   of a true +10 % within 24 hours, with the median and 90th percentile hours to that
   decision, for per-instance offsets of sd 0, 1 and 2 % on 1+1, 2+2 and one extra
   instance (shadow 1/N on N+1, N = 4, 8); the set-ups the plan refuses, with its line;
2. `troubles`: drift that lasts hours, an effect that depends on load (and the gain
   callers get, traffic-weighted), everything at once, 5+1 and 9+1;
3. `calibration`: what A/A runs report, and how often they flag a spread beyond the
   stated instance_spread_percent;
4. `cost`: extra instance-hours per decision for an 8-instance endpoint, a second fleet
   (shadow 100 % on 8+8, the only set-up accepted before issue 35) against one extra
   instance (shadow 12 % on 8+1);
5. `timing` and `power`: hours to a decision at 5, 20 and 50 requests a minute, and how
   often smaller gains are promoted;
6. `guardrails`: the error guardrail, and at what true p99 ratio the latency guardrail
   (+50 %) fires on vLLM's buckets, read inside the bucket (now) and at bucket bounds
   (before issue 35).

    .venv/bin/python benchmarks/experiment_decision.py [--runs 200] [--workers 2] [--part NAME]

About 40 minutes on two busy cores at 200 runs per row (`--part` runs one section).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "experiment"))

from decision_sim import (  # noqa: E402  (the simulator lives beside the tests that use it)
    CALIBRATIONS,
    REALISTIC,
    REFUSED,
    TROUBLE_SCENARIOS,
    TROUBLES,
    Scenario,
    Traffic,
    latency_fire_share,
    minutes_to_stop,
    run_rows,
    simulate,
    spec_for,
    spread_scenarios,
)

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0"
RATES = (5.0, 20.0, 50.0)
DAY = 1440.0
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


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def ab_row(args: tuple[str, Traffic, int, int]) -> dict[str, Any]:
    """False promotions with no true difference; promotions of +10 % and when."""
    label, traffic, runs, seed = args
    spec = spec_for(traffic)
    null = run_rows(traffic, spec, runs=runs, seed=seed)
    gain = run_rows(traffic.with_truth(0.10), spec, runs=runs, seed=seed + 50_000)
    promoted = [at for v, at in gain.decided if v == "candidate"]
    return {
        "label": label,
        "false": null.share("candidate"),
        "kept": null.share("incumbent"),
        "right_24h": gain.share_by("candidate", DAY),
        "right": gain.share("candidate"),
        "median": _quantile(promoted, 0.5),
        "p90": _quantile(gain.minutes, 0.9),
    }


def _quantile(minutes: list[float], q: float) -> float | None:
    if not minutes:
        return None
    ordered = sorted(minutes)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 60


def _hours(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _ab_table(rows: list[dict[str, Any]]) -> None:
    print("| set-up | false promotions | +10% promoted within 24 h | by the end |", end="")
    print(" median h | p90 h |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['label']} | {_pct(r['false'])} | {_pct(r['right_24h'])} | "
            f"{_pct(r['right'])} | {_hours(r['median'])} | {_hours(r['p90'])} |"
        )


def decision_part(pool: Any, runs: int) -> None:
    scenarios = spread_scenarios()
    args = [(s.label, s.traffic, runs, 10_000 * i) for i, s in enumerate(scenarios)]
    print(f"\n## Decision: {runs} runs per row, 20 requests/min, spec defaults\n")
    print("Realistic traffic (daily swing, bursts, drift 2% lag-1 0.95, 3% lost lines);")
    print("hours: the median to a promotion of +10%, the 90th percentile to a decision.\n")
    _ab_table(pool.map(ab_row, args))
    print("\nRefused by the plan (unequal load per instance), before any AWS call:")
    for s in REFUSED:
        print(f"- {s.label}: `{refusal(s)}`")


def _estimate_row(args: tuple[str, Traffic, int, int]) -> dict[str, Any]:
    """The rule's final estimate of the gain, against the gain callers get."""
    from decision_sim import CANDIDATE, INCUMBENT, START_MS, samples_of

    from peagle_deploy.experiment.analysis import analyse

    label, traffic, runs, seed = args
    spec = spec_for(traffic)
    minutes = round(spec.max_duration_minutes)
    sim = simulate(traffic, runs=runs, minutes=minutes, seed=seed)
    estimates = []
    for r in range(runs):
        found = analyse(
            samples_of(sim, r),
            experiment=spec,
            incumbent=INCUMBENT,
            candidate=CANDIDATE,
            started_ms=START_MS,
            now_ms=START_MS + minutes * 60_000,
        ).decision.result
        if found is not None:
            estimates.append(found.relative_difference)
    return {"label": label, "mean": sum(estimates) / max(1, len(estimates))}


def troubles_part(pool: Any, runs: int) -> None:
    args = [(s.label, s.traffic, runs, 70_000 + 1000 * i) for i, s in enumerate(TROUBLE_SCENARIOS)]
    print(f"\n## Real traffic's other troubles: {runs} runs per row, 20 requests/min\n")
    _ab_table(pool.map(ab_row, args))
    swing = Traffic(**{**TROUBLES, "effect_swing": 0.06})
    both = pool.map(
        _estimate_row,
        [
            ("+6% at the trough, -6% at the peak", swing, runs, 5),
            ("the same, flat traffic (no daily swing)", replace(swing, daily_swing=0.0), runs, 6),
        ],
    )
    # callers at (1 + 0.5 sin) weigh the effect log(1 - 0.06 sin): about -0.015
    print("\nThe gain reported after three days, traffic-weighted (mean over the runs):")
    for row in both:
        print(f"- {row['label']}: {100 * row['mean']:+.2f}%", end="")
        print(" (callers get -1.5%)" if "trough" in row["label"] else " (callers get 0%)")


def calibration_row(args: tuple[str, Traffic, int, int]) -> dict[str, Any]:
    """What A/A runs report on `traffic` (no true difference)."""
    label, traffic, runs, seed = args
    result = run_rows(traffic, spec_for(traffic, calibration=True), runs=runs, seed=seed)
    shares = {v: result.share(v) for v in ("calibrated", "miscalibrated", "inconclusive")}
    return {"label": label, **shares, "winner": result.share("candidate", "incumbent")}


def calibration_part(pool: Any, runs: int) -> None:
    args = [(s.label, s.traffic, runs, 77_000 + 100 * i) for i, s in enumerate(CALIBRATIONS)]
    print(f"\n## Calibration (A/A): what {runs} runs report (instance_spread_percent 1.5)\n")
    print("| A/A traffic | calibrated | miscalibrated (spread beyond 1.5%) | inconclusive |")
    print("|---|---|---|---|")
    for a in pool.map(calibration_row, args):
        assert a["winner"] == 0.0, a  # a calibration never names a winner
        print(
            f"| {a['label']} | {_pct(a['calibrated'])} | {_pct(a['miscalibrated'])} "
            f"| {_pct(a['inconclusive'])} |"
        )


def cost_part(pool: Any, runs: int) -> None:
    """Extra instance-hours per decision for an 8-instance endpoint, before and after."""
    set_ups = [
        ("before: shadow 100% on 8+8 (a second fleet)", Traffic(instances=(8, 8), **TROUBLES), 8),
        (
            "after: shadow 12% on 8+1 (one extra instance)",
            Traffic(share=0.12, instances=(8, 1), **TROUBLES),
            1,
        ),
    ]
    out = []
    for sd in (0.01, 0.02):
        rows = pool.map(
            ab_row,
            [
                (label, replace(t, offset_sd=sd), runs, 91_000 + i)
                for i, (label, t, _) in enumerate(set_ups)
            ],
        )
        out += [(sd, row, extra) for row, (_, _, extra) in zip(rows, set_ups, strict=True)]
    print(f"\n## Cost of a decision on an 8-instance endpoint: {runs} runs, +10% true gain\n")
    print("| set-up | offsets sd | extra instances | promoted within 24 h | median h |", end="")
    print(" extra instance-hours (median / p90) | false promotions |")
    print("|---|---|---|---|---|---|---|")
    for sd, r, extra in out:
        median, p90 = r["median"] or 72, r["p90"] or 72
        print(
            f"| {r['label']} | {100 * sd:g}% | {extra} | {_pct(r['right_24h'])} | "
            f"{median:.0f} | {extra * median:.0f} / {extra * p90:.0f} | {_pct(r['false'])} |"
        )


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


RATIOS = (1.3, 1.5, 1.6, 1.8, 2.2, 3.0)
PLACES = (0.09, 0.2, 0.4, 0.7, 1.2, 3.0)
"""Where the incumbent's p99 TTFT sits among vLLM's buckets (seconds)."""


def latency_row(args: tuple[float, float, int, bool]) -> list[float]:
    p99, sigma, runs, bucket_bounds = args
    return [
        latency_fire_share(
            p99,
            f,
            requests=28_800,
            runs=runs,
            seed=7,
            sigma=sigma,
            looks=6,
            at_bounds=bucket_bounds,
        )
        for f in RATIOS
    ]


def guardrail_part(pool: Any, runs: int) -> None:
    guard = pool.apply(guardrail_rows, (runs,))
    print(f"\n## Error guardrail: split 50/50 at 5 requests/min, {runs} runs\n")
    print(
        f"candidate answering only errors: stopped in {_pct(guard['caught'])} within 4 hours, "
        f"median {guard['median']} min, 90th percentile {guard['p90']} min"
    )
    for key in ("same 0.5%", "same 2.0%"):
        print(
            f"candidate with the incumbent's error rate ({key[5:]}): stopped in {_pct(guard[key])}"
        )
    few = max(10, runs // 10)
    cases = [(p, s, few, b) for b in (False, True) for s in (0.3, 0.6, 1.0) for p in PLACES]
    fired = pool.map(latency_row, cases)
    print(f"\n## Latency guardrail (+50%): share of {few} runs it fires in, by the true ratio")
    print("of the candidate's p99 TTFT to the incumbent's (a day at 20 requests/min per")
    print("variant, log-normal latencies of log-sd sigma, read six times)\n")
    print("| reading | sigma | incumbent p99 | " + " | ".join(f"{r:g}x" for r in RATIOS) + " |")
    print("|---|---|---|" + "---|" * len(RATIOS))
    for (p99, sigma, _, bounds), row in zip(cases, fired, strict=True):
        how = "bucket bounds (before)" if bounds else "inside the bucket"
        cells = " | ".join(_pct(x) for x in row)
        print(f"| {how} | {sigma:g} | {1000 * p99:g} ms | {cells} |")


PARTS = {
    "decision": decision_part,
    "troubles": troubles_part,
    "calibration": calibration_part,
    "cost": cost_part,
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
