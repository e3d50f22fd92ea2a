"""The rehearsal (`make demo`) end to end, with short settings: it must pass, say that
its numbers come from an emulator, refuse the prod promotion, and leave nothing behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from peagle_local.demo import DemoSettings, run_demo
from rich.console import Console

REPO = Path(__file__).resolve().parents[2]


def _fast(**changes: object) -> DemoSettings:
    base = DemoSettings(
        levels=[1, 2],
        num_prompts=3,
        max_tokens=8,
        ttft_s=0.002,
        token_delay_s=0.0005,
        creating_s=0.05,
        poll_interval_s=0.05,
        training_phase_s=0.05,
    )
    return base.model_copy(update=changes)


@pytest.mark.doctor_gate  # the demo stages its emulated account: the real doctor lets it deploy
def test_rehearsal_runs_every_step_and_cleans_up() -> None:
    console = Console(record=True, width=120)
    summary = run_demo(_fast(), console=console)
    text = console.export_text()
    assert summary.ok, text
    assert [s.name.split(".")[0] for s in summary.steps] == [str(n) for n in range(1, 9)]
    assert "experiment" in summary.endpoints  # step 6 promoted the experiment's winner
    # step 7: the off-policy job fails its floor, the on-policy drafter is deployed and
    # the benchmark reads what it drafts (at most 1 + K = 4 tokens per step)
    assert summary.training["demo-drafter-as-written"]["status"] == "Failed"
    trained = summary.training["demo-drafter"]
    assert trained["status"] == "Completed" and "own-model" in summary.endpoints
    assert all(3.5 < x <= 4.0 for x in trained["bench_acceptance_length"])
    assert "decision: candidate" in text
    assert [p["status"] for p in summary.promotions] == ["promoted", "refused"]
    refused = summary.promotions[1]
    failed = [r["name"] for r in refused["report"]["results"] if not r["passed"]]
    assert failed and all(name.startswith("p99_ttft_ms@") for name in failed)
    assert summary.steps[-1].detail == "no endpoint, endpoint config or model left"
    flat = " ".join(text.replace("│", " ").split())
    assert "comes from the emulator, not from a GPU" in flat
    assert "ml.g7e.2xlarge" in text and "qwen3-coder-30b-a3b-instruct" in text
    assert summary.endpoints["dev"].endswith("-dev")
    assert "not the P-EAGLE network" in flat


def test_rehearsal_reports_failure_and_still_cleans_up() -> None:
    # An acceptance the staging gate (>= 1.5) refuses: 1 + 0.1 x 3 = 1.3.
    console = Console(record=True, width=120)
    summary = run_demo(_fast(acceptance_rate=0.1, experiment=False), console=console)
    assert not summary.ok
    assert summary.promotions and summary.promotions[0]["status"] == "refused"
    assert summary.steps[-1].name == "8. clean up" and summary.steps[-1].ok
    assert "rehearsal FAILED" in console.export_text()


def test_cli_demo_json_summary_and_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`peagle demo` (what `make demo` runs): exit 0 and a JSON summary on stdout."""
    import json

    from peagle_deploy.cli.app import main

    monkeypatch.setattr(DemoSettings, "quick", classmethod(lambda cls: _fast(experiment=False)))
    assert main(["demo", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] is True and summary["emulated"] is True
    assert [p["status"] for p in summary["promotions"]] == ["promoted", "refused"]
    assert summary["training"]["demo-drafter"]["status"] == "Completed"


def test_demo_and_promote_take_the_stage_settings_from_the_same_stage_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In the repository's layout (stages/staging.yaml), the demo's promotion and
    `peagle promote --dry-run` both read that file and say so in the same words; the
    demo's last lines say how to run `peagle` from the user's shell."""
    from peagle_local.demo import DEMO_INSTANCE, DEMO_MODEL, DEMO_ROLE_ARN
    from peagle_local.emulator import LocalAWS

    from peagle_deploy.cli.app import main
    from peagle_deploy.cli.how_to_run import run_hint
    from peagle_deploy.sdk import deploy_peagle

    (tmp_path / "stages").mkdir()
    shutil.copy(REPO / "stages" / "staging.yaml", tmp_path / "stages" / "staging.yaml")
    monkeypatch.chdir(tmp_path)
    console = Console(record=True, width=120)
    summary = run_demo(_fast(experiment=False, train=False), console=console)
    text = console.export_text()
    assert summary.ok, text
    demo_line = summary.promotions[0]["changes"][-1]
    assert demo_line.endswith("from stages/staging.yaml"), demo_line
    assert text.rstrip().splitlines()[-len(run_hint()) :] == run_hint()

    gates = tmp_path / "gates.yaml"
    gates.write_text("stages:\n  staging:\n    thresholds: {max_error_rate: 0.0}\n")
    with LocalAWS(region="us-east-1") as aws, aws.patched_environ():
        deploy_peagle(
            DEMO_MODEL,
            instance_type=DEMO_INSTANCE,
            role_arn=DEMO_ROLE_ARN,
            region="us-east-1",
            stage="dev",
            poll_interval_s=0.05,
            progress=False,
        )
        argv = ["promote", "--from", "dev", "--to", "staging", "--gates", str(gates)]
        capsys.readouterr()  # the demo's own output
        assert main([*argv, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["changes"][-1] == demo_line
