"""The driver's data path run for real on a CPU: the extraction server exactly as the
driver starts it (peagle_train.commands.extraction_server, plus the CPU engine's
dtype/eager/KV-cache flags that scripts/local_engine uses), vLLM 0.30.0 serving the tiny
target, and speculators 0.9.0's `prepare-data` rendering conversations through that
server's /v1/chat/completions/render. Then the driver's own check on the result
(driver.check_prepared, in the training environment where torch and datasets live).

A second test regenerates answers with the target (`regenerate-responses` against the
generation server the driver starts) and passes them through prepare-data.

In the first, the target's chat template drops assistant turns, the silent failure the check exists
for: prepare-data renders, finds no assistant boundary, writes an empty dataset
(--allow-empty-output), and the driver says "chat template". The same server passes
pre-tokenized rows (the shape regenerate-responses writes) through, and the check
accepts them and reports the draft vocabulary's coverage.

What does not run here: hidden-state extraction (`generate-offline-data`) needs a GPU
(vLLM's CPU worker raises "pin_memory=True requires a CUDA or other accelerator
backend" for extract_hidden_states), and so does speculators' trainer.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from peagle_train import commands, data, processes
from test_container_contract import vllm_python
from test_train_commands import HP, train_python
from test_train_driver import tiny_target  # noqa: F401  (the module-scoped fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from local_engine import tiny_models

pytestmark = [pytest.mark.contract, pytest.mark.slow, pytest.mark.xdist_group("vllm-engine")]

CONTAINER = Path(__file__).resolve().parents[2] / "container"
CPU_ENGINE = ["--dtype", "float32", "--enforce-eager", "--kv-cache-memory-bytes", str(64 << 20)]
NO_ASSISTANT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] != 'assistant' %}"
    "<|{{ m['role'] }}|> {{ m['content'] }} {% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def check(python: Path, prepared: Path, draft_vocab: int) -> str:
    """driver.check_prepared in the training environment: its coverage or its failure."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
        "from peagle_train.driver import check_prepared\n"
        "from peagle_train.failures import DriverError\n"
        "try: print(check_prepared(Path(sys.argv[2]), int(sys.argv[3]), 1024))\n"
        "except DriverError as e: print(e)\n"
    )
    done = subprocess.run(
        [str(python), "-c", code, str(CONTAINER), str(prepared), str(draft_vocab)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_prepare_data_through_the_extraction_server(tmp_path: Path, tiny_target: Path) -> None:  # noqa: F811
    vllm = vllm_python()
    if vllm is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the vLLM CPU environment is required under CI")
        pytest.skip("the vLLM CPU environment (scripts/vllm-env.sh) is not built here")
    spec = train_python()
    target = tmp_path / "target"
    target.mkdir()
    for item in tiny_target.iterdir():
        (target / item.name).symlink_to(item)
    tok_cfg = json.loads((tiny_target / "tokenizer_config.json").read_text())
    (target / "tokenizer_config.json").unlink()
    (target / "tokenizer_config.json").write_text(
        json.dumps({**tok_cfg, "chat_template": NO_ASSISTANT_TEMPLATE})
    )
    served = commands.Layout(str(vllm), target, tmp_path / "work", tmp_path / "ckpt")
    words = tiny_models.words()[1:9]
    conversations = [
        [{"role": "user", "content": f"{words[i]} {words[i + 1]}"},
         {"role": "assistant", "content": " ".join(words[i:i + 4])}]
        for i in range(4)
    ]  # fmt: skip
    data.write_conversations(served.train_file, conversations)
    tokenized = tmp_path / "tokenized.jsonl"
    ids = [tiny_models.words().index(w) for w in words]
    rows = [
        {"input_ids": [ids[0], ids[i], ids[i + 1], ids[0]], "loss_mask": [0, 0, 1, 1]}
        for i in range(1, 6)
    ]
    tokenized.write_text("".join(json.dumps(r) + "\n" for r in rows))

    port = processes.free_port()
    argv = commands.extraction_server(served, port, HP, (1, 2, 3), 4) + CPU_ENGINE
    masked = commands.Layout(str(spec), target, tmp_path / "masked", tmp_path / "ckpt")
    passthrough = commands.Layout(str(spec), target, tmp_path / "passthrough", tmp_path / "ckpt")
    with processes.server("extract", argv, port):
        processes.run("prepare-data", commands.prepare_data(masked, port, HP, served.train_file))
        processes.run("prepare-data", commands.prepare_data(passthrough, port, HP, tokenized))

    assert check(spec, masked.prepared, 512).startswith(
        "chat template: prepare-data kept 0 rows with zero trainable tokens"
    )
    assert check(spec, passthrough.prepared, 512) == "1.0"
    # the five rows train on ids[0] five times and ids[2..6] once each: one draft
    # token holds 5 of the 10 trainable tokens
    assert check(spec, passthrough.prepared, 1).startswith(
        "vocabulary: a draft vocabulary of 1 tokens (d2t/t2d) covers 50.0%"
    )


def test_regenerated_answers_pass_through_prepare_data(tmp_path: Path, tiny_target: Path) -> None:  # noqa: F811
    """regenerate-responses as the driver runs it, against vLLM serving the target as the
    driver starts it (plus the CPU flags): the target's own answers come back as
    input_ids + loss_mask rows, prepare-data passes them through, and the driver's check
    finds trainable tokens. The sample cap and answer length are the hyperparameters'."""
    vllm = vllm_python()
    if vllm is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the vLLM CPU environment is required under CI")
        pytest.skip("the vLLM CPU environment (scripts/vllm-env.sh) is not built here")
    spec = train_python()
    hp = dataclasses.replace(HP, max_samples=3, max_seq_len=48)
    served = commands.Layout(str(vllm), tiny_target, tmp_path / "work", tmp_path / "ckpt")
    run = commands.Layout(str(spec), tiny_target, tmp_path / "work", tmp_path / "ckpt")
    words = tiny_models.words()[1:12]
    conversations = [
        [{"role": "user", "content": " ".join(words[i : i + 3])},
         {"role": "assistant", "content": "the"}]
        for i in range(5)
    ]  # fmt: skip
    data.write_conversations(served.train_file, conversations)
    run.regenerated.parent.mkdir(parents=True)
    port = processes.free_port()
    with processes.server(
        "regenerate", commands.generation_server(served, port, hp) + CPU_ENGINE, port
    ):
        processes.run("regenerate", commands.regenerate(run, port, hp))
        processes.run("prepare-data", commands.prepare_data(run, port, hp, run.regenerated))
    rows = [json.loads(line) for line in run.regenerated.read_text().splitlines()]
    assert len(rows) == 3  # --limit: the sample cap
    for row in rows:
        assert len(row["input_ids"]) == len(row["loss_mask"]) and 0 < sum(row["loss_mask"]) <= 48
    assert check(spec, run.prepared, 512) == "1.0"
