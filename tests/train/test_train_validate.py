"""peagle_train.validate without an engine: what it asks vLLM for, how it reads vLLM's
counters, and the FailureReason below the floor (the engine run is
test_train_cpu_proof.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from peagle_train import validate
from peagle_train.validate import (
    Acceptance,
    ValidationError,
    acceptance_from_metrics,
    floor_failure,
    measure_acceptance,
    vllm_command,
)

# The shape of vLLM 0.30.0's /metrics (counters with a model label, per position).
METRICS = """\
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="target"} 40.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="target"} 120.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="target"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="target",position="0"} 36.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="target",position="1"} 22.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="target",position="2"} 12.0
"""


def test_acceptance_from_vllm_counters() -> None:
    acc = acceptance_from_metrics(METRICS)
    assert acc == Acceptance(
        per_position=(0.9, 0.55, 0.3),
        mean_accepted_per_step=1.75,
        drafts=40,
        draft_tokens=120,
        accepted_tokens=70,
    )


def test_no_counters_is_an_error() -> None:
    with pytest.raises(ValidationError, match="no speculative-decoding counters"):
        acceptance_from_metrics("# nothing\nvllm:num_requests_running 0.0\n")


def test_floor_failure_names_the_figures() -> None:
    acc = acceptance_from_metrics(METRICS)
    # the floor is on tokens per step: the target's own plus 1.75 accepted drafts
    assert floor_failure(acc, 2.75) is None
    reason = floor_failure(acc, 3.0)
    assert reason is not None and "\n" not in reason
    assert "2.75 tokens per step (1.75 accepted draft tokens)" in reason
    assert "below the floor 3" in reason
    assert "0.90, 0.55, 0.30" in reason
    nothing = Acceptance((), 0.0, 0, 0, 0)
    assert floor_failure(nothing, 0.5) == (
        "drafter validation: vLLM drafted nothing on the held-out prompts"
    )


def test_vllm_is_started_as_the_serving_image_starts_it_with_parallel_drafting() -> None:
    argv = vllm_command(
        "/py",
        target_dir=Path("/t"),
        drafter_dir=Path("/d"),
        k=5,
        port=8123,
        extra=["--dtype", "float32"],
    )
    assert argv[:5] == ["/py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/t"]
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {
        "method": "eagle3",
        "model": "/d",
        "num_speculative_tokens": 5,
        "parallel_drafting": True,
    }
    assert argv[-2:] == ["--dtype", "float32"]


def test_no_prompts_is_refused_before_starting_anything(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"^held_out_prompts: "):
        measure_acceptance(tmp_path, tmp_path, [], num_speculative_tokens=3, python="/nonexistent")


def test_an_engine_that_exits_is_reported_with_its_last_lines(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ValueError: mask_hidden not found in weights' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(ValidationError, match=r"vLLM exited 1 before serving: .*mask_hidden"):
        measure_acceptance(tmp_path, tmp_path, ["a b"], num_speculative_tokens=3, python=str(fake))


def test_held_out_prompts_go_as_user_turns_through_the_chat_template_when_asked() -> None:
    path, body = validate._request("hello", 8, chat=True)
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert body["temperature"] == 0 and body["max_tokens"] == 8 and "prompt" not in body
    path, body = validate._request("hello", 8, chat=False)
    assert (path, body["prompt"]) == ("/v1/completions", "hello")
