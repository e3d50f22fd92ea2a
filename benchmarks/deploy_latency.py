"""How fast does `deploy_peagle()` notice InService, and how many AWS calls does it make?

Runs against the local emulator (a moto server on loopback with the peagle extensions,
real HTTP, real clock). For each run the emulator scripts Creating -> InService after a
given number of seconds; the script records when the transition was due (emulator
history) and when the SDK first saw InService (botocore `after-call` hook on
DescribeEndpoint) and when `deploy_peagle()` returned (manifest recorded). It also
counts API calls (`before-call`, one per operation) and HTTP attempts (`before-send`,
retries included) for a fresh deploy, a no-op redeploy of the same spec and a blue/green
update.

    .venv/bin/python benchmarks/deploy_latency.py [--runs 5] [--json]

Emulated figures: they measure the SDK's polling and call pattern, not SageMaker.
The doctor gate is off here (`doctor=False`): its own time and calls are measured by
benchmarks/doctor_time.py.
For comparison, boto3's `endpoint_in_service` waiter polls every 30 s, so its lag is
up to 30 s (uniform: 15 s on average); pass --boto3-waiter to measure one such run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from typing import Any

ROLE = "arn:aws:iam::123456789012:role/peagle-bench"
MODEL = "qwen3-coder-30b-a3b-instruct"
REGION = "us-east-1"
CREATING_S = (3.0, 5.3, 7.9, 11.2, 14.6, 2.1, 9.4, 6.6)


class CallCounter:
    """API calls and HTTP attempts seen through one boto3 session."""

    def __init__(self, session: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.attempts = 0
        self.first_in_service: float | None = None
        session.events.register("before-call", self._call)
        session.events.register("before-send", self._send)
        session.events.register("after-call.sagemaker.DescribeEndpoint", self._described)

    def _call(self, model: Any, **_: Any) -> None:
        self.calls[f"{model.service_model.service_name}:{model.name}"] += 1

    def _send(self, **_: Any) -> None:
        self.attempts += 1

    def _described(self, parsed: dict[str, Any], **_: Any) -> None:
        if self.first_in_service is None and parsed.get("EndpointStatus") == "InService":
            self.first_in_service = time.monotonic()

    def reset(self) -> None:
        self.calls.clear()
        self.attempts = 0
        self.first_in_service = None

    def summary(self) -> dict[str, Any]:
        mutating = {
            k: v
            for k, v in self.calls.items()
            if not k.split(":", 1)[1].startswith(("Describe", "List", "Get"))
        }
        return {
            "api_calls": sum(self.calls.values()),
            "mutating_calls": sum(mutating.values()),
            "http_attempts": self.attempts,
            "by_operation": dict(sorted(self.calls.items())),
        }


def measure(runs: int, poll_interval_s: float, boto3_waiter: bool) -> dict[str, Any]:
    import boto3
    from peagle_local.emulator import LocalAWS

    from peagle_deploy.sdk import PeagleEndpoint, deploy_peagle

    results: dict[str, Any] = {"poll_interval_s": poll_interval_s, "runs": []}
    with LocalAWS(region=REGION) as aws, aws.patched_environ():
        for i in range(runs):
            creating_s = CREATING_S[i % len(CREATING_S)]
            name = f"peagle-bench-{i}"
            aws.script_endpoint(name, creating_s=creating_s)
            session = boto3.Session(region_name=REGION)
            counter = CallCounter(session)
            history_before = len(aws.history)
            started = time.monotonic()
            endpoint = deploy_peagle(
                MODEL,
                role_arn=ROLE,
                endpoint_name=name,
                boto_session=session,
                progress=False,
                poll_interval_s=poll_interval_s,
                doctor=False,
            )
            returned = time.monotonic()
            due = next(
                t.at
                for t in aws.history[history_before:]
                if t.endpoint_name == name and t.status == "InService"
            )
            assert counter.first_in_service is not None
            run: dict[str, Any] = {
                "creating_s": creating_s,
                "noticed_after_s": round(counter.first_in_service - due, 3),
                "returned_after_s": round(returned - due, 3),
                "total_s": round(returned - started, 3),
                "fresh": counter.summary(),
            }
            counter.reset()
            again = deploy_peagle(
                MODEL,
                role_arn=ROLE,
                endpoint_name=name,
                boto_session=session,
                progress=False,
                doctor=False,
            )
            assert again.deployment is not None and again.deployment.action == "noop"
            run["noop"] = counter.summary()
            if i == 0:
                aws.script_endpoint(name, updating_s=creating_s)
                counter.reset()
                updated = deploy_peagle(
                    MODEL,
                    role_arn=ROLE,
                    endpoint_name=name,
                    num_speculative_tokens=5,
                    boto_session=session,
                    progress=False,
                    poll_interval_s=poll_interval_s,
                    doctor=False,
                )
                assert updated.deployment is not None
                assert updated.deployment.action == "update"
                run["update"] = counter.summary()
            results["runs"].append(run)
            PeagleEndpoint.from_name(name, boto_session=session).delete()
            del endpoint
        if boto3_waiter:
            results["boto3_waiter"] = _boto3_waiter_run(aws)
    lags = [r["noticed_after_s"] for r in results["runs"]]
    results["noticed_after_s"] = {
        "min": min(lags),
        "median": round(statistics.median(lags), 3),
        "max": max(lags),
    }
    results["target_s"] = 5.0
    results["meets_target"] = max(lags) <= 5.0
    return results


def _boto3_waiter_run(aws: Any) -> dict[str, Any]:
    """One run of boto3's own waiter (Delay 30 s) on the same scripted transition."""
    sm = aws.client("sagemaker")
    from peagle_deploy.sdk import plan_for

    plan = plan_for(MODEL, role_arn=ROLE, endpoint_name="peagle-bench-boto3", region=REGION)
    aws.script_endpoint(plan.endpoint_name, creating_s=CREATING_S[0])
    before = len(aws.history)
    sm.create_model(**plan.create_model)
    sm.create_endpoint_config(**plan.create_endpoint_config)
    sm.create_endpoint(**plan.create_endpoint)
    sm.get_waiter("endpoint_in_service").wait(EndpointName=plan.endpoint_name)
    noticed = time.monotonic()
    due = next(t.at for t in aws.history[before:] if t.status == "InService")
    return {"creating_s": CREATING_S[0], "noticed_after_s": round(noticed - due, 3)}


def _print(results: dict[str, Any]) -> None:
    print(f"poll interval cap: {results['poll_interval_s']} s (emulated SageMaker, loopback HTTP)")
    print("run  creating_s  noticed_after_s  returned_after_s  fresh_calls  noop_calls")
    for i, r in enumerate(results["runs"]):
        print(
            f"{i:>3}  {r['creating_s']:>10.1f}  {r['noticed_after_s']:>15.3f}  "
            f"{r['returned_after_s']:>16.3f}  {r['fresh']['api_calls']:>11}  "
            f"{r['noop']['api_calls']:>10}"
        )
    lag = results["noticed_after_s"]
    print(
        f"InService noticed after: min {lag['min']} s, median {lag['median']} s, max "
        f"{lag['max']} s (target <= {results['target_s']} s: "
        f"{'met' if results['meets_target'] else 'NOT met'})"
    )
    first = results["runs"][0]
    for label in ("fresh", "noop", "update"):
        if label in first:
            s = first[label]
            print(
                f"{label:>6} deploy: {s['api_calls']} API calls ({s['mutating_calls']} mutating, "
                f"{s['http_attempts']} HTTP attempts): {s['by_operation']}"
            )
    if "boto3_waiter" in results:
        print(f"boto3 endpoint_in_service waiter: noticed after {results['boto3_waiter']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument("--boto3-waiter", action="store_true", help="also time boto3's waiter")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = measure(args.runs, args.poll_interval, args.boto3_waiter)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results)
    return 0 if results["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
