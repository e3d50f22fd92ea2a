"""The training driver run the way SageMaker runs it: `python -m peagle_train train` in a
container whose /opt/ml is a temp dir (PEAGLE_SM_ROOT), hyperparameters.json a JSON
object of strings, the target and data channels mounted as folders.

No GPU here: every run stops at the latest at the accelerator check, after the whole
preflight (hyperparameters, target, data split, checkpoints) has run for real. The
GPU steps' commands are checked by speculators' own parsers in test_train_commands.py.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from peagle_train import checkpoints, contract, data, driver
from peagle_train.failures import DriverError
from peagle_train.hyperparameters import HyperparameterError, parse_hyperparameters

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from local_engine import tiny_models

GOOD_HP: dict[str, str] = {
    contract.HP_NUM_DEPTHS: "4",
    contract.HP_NUM_LAYERS: "1",
    contract.HP_DRAFT_VOCAB: "512",
    contract.HP_MAX_SEQ_LEN: "256",
    contract.HP_EPOCHS: "2",
    contract.HP_LEARNING_RATE: "0.0003",
    contract.HP_MAX_SAMPLES: "1000",
    contract.HP_REGENERATE: "true",
    contract.HP_SERVING_FORMAT: "speculators",
    contract.HP_ACCEPTANCE_FLOOR: "1.5",
    contract.HP_HELD_OUT: "3",
    contract.HP_SEED: "7",
    contract.HP_DATA_FORMAT: "openai-chat",
    "target_layer_ids": "1,2,3",
}


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_models.write_target(tmp_path_factory.mktemp("tiny") / "target")


def _conversation(i: int) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": f"say ka lo mi {i}"},
            {"role": "assistant", "content": "ka lo mi ne ru"},
        ]
    }


def make_root(
    tmp: Path,
    target: Path,
    hp: dict[str, str] | str | None = None,
    *,
    tokenizer_config: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    conversations: int = 10,
) -> Path:
    """A stand-in for /opt/ml as SageMaker lays it out for the job."""
    root = tmp / "opt-ml"
    (root / "input/config").mkdir(parents=True)
    raw = hp if isinstance(hp, str) else json.dumps(GOOD_HP if hp is None else hp)
    (root / "input/config/hyperparameters.json").write_text(raw)
    tgt = root / "input/data/target"
    tgt.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (tgt / name).write_text((target / name).read_text())
    tok_cfg = json.loads((target / "tokenizer_config.json").read_text())
    tok_cfg["mask_token"] = "<mask>"
    tok_cfg.update(tokenizer_config or {})
    (tgt / "tokenizer_config.json").write_text(
        json.dumps({k: v for k, v in tok_cfg.items() if v is not None})
    )
    if config:
        cfg = json.loads((target / "config.json").read_text())
        (tgt / "config.json").write_text(json.dumps({**cfg, **config}))
    channel = root / "input/data/data/part"
    channel.mkdir(parents=True)
    lines = [json.dumps(_conversation(i)) for i in range(conversations)]
    (channel / "convs.jsonl").write_text("\n".join(lines) + "\n")
    return root


def run_driver(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, contract.SM_ROOT_ENV: str(root)}
    return subprocess.run(
        [sys.executable, "-m", "peagle_train", *(args or ("train",))],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def failure(root: Path) -> str:
    return (root / "output/failure").read_text()


@pytest.fixture(autouse=True)
def _no_gpu_here() -> None:
    if driver.count_gpus() > 0:
        pytest.skip("this machine has a GPU: the driver would go on to start vLLM")


# --- hyperparameters --------------------------------------------------------------------

BAD_HP = [
    (
        {**GOOD_HP, contract.HP_NUM_DEPTHS: "four"},
        "hyperparameter num_depths: 'four' is not an integer (1..128)",
    ),
    ({**GOOD_HP, contract.HP_NUM_DEPTHS: "0"}, "hyperparameter num_depths: 0 is outside 1..128"),
    (
        {**GOOD_HP, contract.HP_LEARNING_RATE: "nan"},
        "hyperparameter learning_rate: 'nan' is not a number in (0, 1]",
    ),
    (
        {**GOOD_HP, contract.HP_REGENERATE: "True"},
        "hyperparameter regenerate: 'True' is not 'true' or 'false'",
    ),
    (
        {**GOOD_HP, contract.HP_SERVING_FORMAT: "gguf"},
        "hyperparameter serving_format: 'gguf' is not one of speculators, eagle3-native",
    ),
    (
        {k: v for k, v in GOOD_HP.items() if k != contract.HP_EPOCHS},
        "hyperparameter epochs: missing (every knob is pinned)",
    ),
    (
        {**GOOD_HP, contract.HP_LEARNING_RATE: "0"},
        "hyperparameter learning_rate: '0' is not a number in (0, 1]",
    ),
    (
        {**GOOD_HP, contract.HP_DATA_FORMAT: "alpaca"},
        "hyperparameter data_format: 'alpaca' is not one of openai-chat, sharegpt, "
        "openai-completions",
    ),
    (
        {**GOOD_HP, contract.HP_NUM_DEPTHS: "30", contract.HP_MAX_SEQ_LEN: "32"},
        "hyperparameter num_depths: 30 is more than max_seq_len - 3 (29)",
    ),
    (
        {**GOOD_HP, contract.HP_MASK_TOKEN_ID: "-1"},
        "hyperparameter mask_token_id: -1 is outside 0..2147483647",
    ),
    ({**GOOD_HP, "batch_size": "8"}, "hyperparameter batch_size: unknown (allowed: "),
    (
        {**GOOD_HP, "target_layer_ids": "1;2"},
        "hyperparameter target_layer_ids: '1;2' is not comma-separated",
    ),
]


@pytest.mark.parametrize(("hp", "message"), BAD_HP)
def test_bad_hyperparameters_are_refused_before_any_work(
    tmp_path: Path, tiny_target: Path, hp: dict[str, str], message: str
) -> None:
    root = make_root(tmp_path, tiny_target, hp)
    done = run_driver(root)
    assert done.returncode == 2
    text = failure(root)
    assert text.startswith(message) and text.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert not (root / "peagle-work").exists()  # nothing written before the check


def test_a_number_is_not_a_string_and_the_file_must_be_json(
    tmp_path: Path, tiny_target: Path
) -> None:
    root = make_root(tmp_path, tiny_target, json.dumps({**GOOD_HP, contract.HP_EPOCHS: 2}))
    assert run_driver(root).returncode == 2
    assert failure(root) == "hyperparameter epochs: not a string (SageMaker sends strings)\n"
    root2 = make_root(tmp_path / "b", tiny_target, "{not json")
    assert run_driver(root2).returncode == 2
    assert failure(root2).startswith("hyperparameters: ") and "is not JSON" in failure(root2)


def test_parsed_values() -> None:
    hp = parse_hyperparameters(GOOD_HP)
    assert (hp.num_depths, hp.num_layers, hp.draft_vocab_size, hp.regenerate) == (4, 1, 512, True)
    assert hp.learning_rate == 0.0003 and hp.target_layer_ids == (1, 2, 3)
    with pytest.raises(HyperparameterError, match=r"^hyperparameters: not a JSON object"):
        parse_hyperparameters(["num_depths"])


def test_the_sample_cap_and_the_mask_id_are_optional() -> None:
    hp = parse_hyperparameters(
        {k: v for k, v in GOOD_HP.items() if k not in {contract.HP_MAX_SAMPLES, "target_layer_ids"}}
    )
    assert (hp.max_samples, hp.mask_token_id, hp.target_layer_ids) == (None, None, None)
    hp = parse_hyperparameters({**GOOD_HP, contract.HP_MASK_TOKEN_ID: "1024"})
    assert hp.mask_token_id == 1024 and hp.max_samples == 1000


def test_only_train_is_a_command(tmp_path: Path, tiny_target: Path) -> None:
    done = run_driver(make_root(tmp_path, tiny_target), "serve")
    assert done.returncode == 2 and "usage: python -m peagle_train train" in done.stderr


# --- the silent failures, each with its own message -----------------------------------


def test_a_target_without_chat_template_fails_the_job(tmp_path: Path, tiny_target: Path) -> None:
    root = make_root(tmp_path, tiny_target, tokenizer_config={"chat_template": None})
    assert run_driver(root).returncode == 1
    assert failure(root).startswith("chat template: the target has none")


def test_default_layer_ids_of_a_shallow_target_are_caught(
    tmp_path: Path, tiny_target: Path
) -> None:
    hp = {k: v for k, v in GOOD_HP.items() if k != "target_layer_ids"}
    root = make_root(tmp_path, tiny_target, hp)
    assert run_driver(root).returncode == 1
    assert failure(root) == (
        "target layer ids: [2, 2, 1] from the default [2, n//2, n-3] are not distinct layers "
        "within 0..4 for a target with num_hidden_layers=4; set the hyperparameter "
        "target_layer_ids\n"
    )


def test_layer_ids_past_the_target_are_caught(tmp_path: Path, tiny_target: Path) -> None:
    root = make_root(tmp_path, tiny_target, {**GOOD_HP, "target_layer_ids": "1,2,9"})
    assert run_driver(root).returncode == 1
    assert "[1, 2, 9] from target_layer_ids" in failure(root)
    assert "num_hidden_layers=4" in failure(root)


def test_no_mask_token_and_no_free_embedding_row(tmp_path: Path, tiny_target: Path) -> None:
    """The tiny tokenizer fills all 1024 rows: speculators would pick pad/eos/unk."""
    root = make_root(tmp_path, tiny_target, tokenizer_config={"mask_token": None})
    assert run_driver(root).returncode == 1
    assert failure(root).startswith(
        "mask token: the tokenizer declares no mask_token and its tokens fill all 1024 "
        "embedding rows"
    )


def test_a_mask_token_that_is_also_eos(tmp_path: Path, tiny_target: Path) -> None:
    root = make_root(tmp_path, tiny_target, tokenizer_config={"mask_token": "</s>"})
    assert run_driver(root).returncode == 1
    mask = tiny_models.EOS
    assert failure(root).startswith(
        f"mask token: the tokenizer's mask_token (id {mask}) is also the eos token"
    )


def test_a_free_embedding_row_becomes_the_mask(tmp_path: Path, tiny_target: Path) -> None:
    """A target whose vocab_size exceeds its tokenizer gets the first unused row (where
    speculators would add <|MASK|>), passed to the trainer explicitly."""
    root = make_root(
        tmp_path, tiny_target, tokenizer_config={"mask_token": None}, config={"vocab_size": 1040}
    )
    done = run_driver(root)
    assert done.returncode == 1
    assert "mask id 1024" in done.stderr
    assert failure(root).startswith("accelerator: no GPU in the container")


@pytest.mark.parametrize(
    ("mask", "vocab", "message"),
    [
        ("1040", 1040, "mask token: mask_token_id 1040 is past the target's vocab_size 1040"),
        (
            str(tiny_models.EOS),
            1040,
            f"mask token: mask_token_id {tiny_models.EOS} is the eos token",
        ),
        ("5", 1040, "mask token: mask_token_id 5 is a token of the tokenizer"),
    ],
)
def test_a_stated_mask_id_must_be_a_free_row(
    tmp_path: Path, tiny_target: Path, mask: str, vocab: int, message: str
) -> None:
    hp = {**GOOD_HP, contract.HP_MASK_TOKEN_ID: mask}
    root = make_root(
        tmp_path,
        tiny_target,
        hp,
        tokenizer_config={"mask_token": None},
        config={"vocab_size": vocab},
    )
    assert run_driver(root).returncode == 1
    assert failure(root).startswith(message)


def test_a_stated_mask_id_on_a_free_row_or_the_mask_token_is_used(
    tmp_path: Path, tiny_target: Path
) -> None:
    root = make_root(
        tmp_path,
        tiny_target,
        {**GOOD_HP, contract.HP_MASK_TOKEN_ID: "1030"},
        config={"vocab_size": 1040},
    )
    assert "mask id 1030" in run_driver(root).stderr
    root = make_root(
        tmp_path / "b", tiny_target, {**GOOD_HP, contract.HP_MASK_TOKEN_ID: str(tiny_models.MASK)}
    )
    assert f"mask id {tiny_models.MASK}" in run_driver(root).stderr


def test_a_draft_vocabulary_larger_than_the_target(tmp_path: Path, tiny_target: Path) -> None:
    root = make_root(tmp_path, tiny_target, {**GOOD_HP, contract.HP_DRAFT_VOCAB: "2048"})
    assert run_driver(root).returncode == 2
    assert (
        failure(root)
        == "hyperparameter draft_vocab_size: 2048 is larger than the target's vocab_size 1024\n"
    )


def test_zero_trainable_tokens_and_vocabulary_coverage() -> None:
    rows = [{"loss_mask": [0, 0, 0]}, {"loss_mask": [0, 0]}]
    assert data.trainable_tokens(rows) == (2, 0)
    with pytest.raises(
        DriverError, match=r"^chat template: prepare-data kept 2 rows with zero trainable"
    ):
        data.require_trainable(*data.trainable_tokens(rows))
    freq = {5: 90, 6: 6, 7: 4}
    assert data.vocab_coverage(freq, 1, 1024) == pytest.approx(0.90)
    assert data.vocab_coverage(freq, 2, 1024) == pytest.approx(0.96)
    with pytest.raises(
        DriverError, match=r"^vocabulary: a draft vocabulary of 1 tokens \(d2t/t2d\) covers 90.0%"
    ):
        data.require_coverage(data.vocab_coverage(freq, 1, 1024), 1)
    data.require_coverage(data.vocab_coverage(freq, 2, 1024), 2)
    with pytest.raises(DriverError, match=r"^vocabulary: the data holds token id 2000, outside"):
        data.vocab_coverage({2000: 1}, 2, 1024)


# --- the data split ----------------------------------------------------------------------


def test_preflight_passes_and_the_held_out_prompts_are_never_trained_on(
    tmp_path: Path, tiny_target: Path
) -> None:
    root = make_root(tmp_path, tiny_target, conversations=12)
    done = run_driver(root)
    assert done.returncode == 1
    assert failure(root).startswith(
        "accelerator: no GPU in the container; speculators' trainer needs one"
    )
    preflight = "preflight: 9 training conversations, 3 held-out prompts, layers [1, 2, 3]"
    assert f"{preflight}, mask id {tiny_models.MASK}" in done.stderr
    train = [
        json.loads(x)["conversations"]
        for x in (root / "peagle-work/train.jsonl").read_text().splitlines()
    ]
    assert len(train) == 9 and all(t[0]["role"] == "user" for t in train)
    split = data.split_held_out(root / "input/data/data", 3, 7, "openai-chat")
    trained = {t[0]["content"] for t in train}
    assert len(split.held_out_prompts) == 3 and not trained & set(split.held_out_prompts)
    assert split.sha256 in done.stderr
    again = data.split_held_out(root / "input/data/data", 3, 7, "openai-chat")
    assert again == split  # the seed fixes the split, so a restarted job holds out the same
    assert (
        data.split_held_out(root / "input/data/data", 3, 8, "openai-chat").held_out_prompts
        != split.held_out_prompts
    )


def test_data_problems_name_the_file_and_line(tmp_path: Path, tiny_target: Path) -> None:
    root = make_root(tmp_path, tiny_target)
    (root / "input/data/data/part/bad.jsonl").write_text('{"messages": []}\n')
    assert run_driver(root).returncode == 1
    assert failure(root) == "data: part/bad.jsonl:1 has no messages list (openai-chat)\n"
    root2 = make_root(tmp_path / "b", tiny_target, conversations=3)
    assert run_driver(root2).returncode == 1
    assert failure(root2).startswith("data: 3 conversations cannot give 3 held-out prompts")


@pytest.mark.parametrize(
    ("data_format", "record"),
    [
        (
            "sharegpt",
            {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},
        ),
        ("openai-completions", {"prompt": "hi", "completion": "yo"}),
    ],
)
def test_each_data_format_reads_as_turns(
    tmp_path: Path, data_format: str, record: dict[str, Any]
) -> None:
    channel = tmp_path / "data"
    channel.mkdir()
    (channel / "a.jsonl").write_text((json.dumps(record) + "\n") * 4)
    split = data.split_held_out(channel, 1, 0, data_format)
    assert split.held_out_prompts == ["hi"]
    assert (
        split.train
        == [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]] * 3
    )
    with pytest.raises(DriverError, match=r"^data: a.jsonl:1 has no "):
        data.split_held_out(channel, 1, 0, "openai-chat")  # declared format is enforced


def test_the_data_hash_covers_names_and_bytes(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("x\n")
    first = data.data_sha256([tmp_path / "a.jsonl"], tmp_path)
    (tmp_path / "a.jsonl").write_text("y\n")
    assert data.data_sha256([tmp_path / "a.jsonl"], tmp_path) != first
    (tmp_path / "a.jsonl").rename(tmp_path / "b.jsonl")
    (tmp_path / "b.jsonl").write_text("x\n")
    assert data.data_sha256([tmp_path / "b.jsonl"], tmp_path) != first


# --- checkpoints: resume and best ----------------------------------------------------------


def _safetensors(path: Path, n_floats: int, *, truncate: int = 0) -> None:
    header = json.dumps(
        {"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    blob = struct.pack("<Q", len(header)) + header + b"\0" * (4 * n_floats)
    path.write_bytes(blob[: len(blob) - truncate])


def epoch(
    root: Path, n: int, *, loss: float | None = None, drop: str | None = None, truncate: int = 0
) -> Path:
    folder = root / str(n)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    _safetensors(folder / "model.safetensors", 8, truncate=truncate)
    (folder / "optimizer_state_dict.pt").write_bytes(b"opt")
    (folder / "training_state.json").write_text(json.dumps({"epoch": n, "local_step": 0}))
    if loss is not None:
        (folder / "val_metrics.json").write_text(json.dumps({"loss_epoch": loss}))
    if drop:
        (folder / drop).unlink()
    return folder


def test_resume_picks_the_newest_complete_checkpoint(tmp_path: Path) -> None:
    root = tmp_path / "train"
    epoch(root, 0, loss=2.0)
    epoch(root, 1, loss=1.5)
    epoch(root, 2)
    epoch(root, 3, drop="training_state.json")  # interrupted mid-save
    epoch(root, 4, truncate=3)  # a partial upload
    (root / "checkpoint_best").symlink_to("1", target_is_directory=True)
    assert [c.epoch for c in checkpoints.complete_checkpoints(root)] == [0, 1, 2]
    assert checkpoints.set_aside_incomplete(root) == ["3", "4"]
    assert [p.name for p in checkpoints.numbered(root)] == ["0", "1", "2"]  # what the trainer sees
    assert (root / "incomplete-3").is_dir() and (root / "incomplete-4").is_dir()
    assert checkpoints.best_checkpoint(root) == checkpoints.Checkpoint(1, root / "1", 1.5)
    epoch(root, 3, drop="model.safetensors")
    assert checkpoints.set_aside_incomplete(root) == ["3"]
    assert (root / "incomplete-3.2").is_dir()


def test_best_is_the_newest_when_no_epoch_was_validated(tmp_path: Path) -> None:
    root = tmp_path / "train"
    assert checkpoints.best_checkpoint(root) is None
    epoch(root, 0)
    epoch(root, 1)
    best = checkpoints.best_checkpoint(root)
    assert best is not None and best.epoch == 1


def test_a_restarted_job_sets_incomplete_checkpoints_aside_first(
    tmp_path: Path, tiny_target: Path
) -> None:
    root = make_root(tmp_path, tiny_target)
    ckpt = root / "checkpoints/train"
    epoch(ckpt, 0, loss=1.0)
    epoch(ckpt, 1, truncate=1)
    done = run_driver(root)
    assert "checkpoints: set aside incomplete epoch folders 1" in done.stderr
    assert "checkpoints: the trainer resumes after epoch 0" in done.stderr
    assert sorted(p.name for p in ckpt.iterdir()) == ["0", "incomplete-1"]


def test_the_planner_s_hyperparameters_are_what_the_driver_reads() -> None:
    """The request `peagle plan` renders for the example spec (peagle_deploy.train) parses
    here as it is, every rendered knob lands in its field, and nothing is left over."""
    from peagle_deploy.train.plan import build_training_plan
    from peagle_deploy.train.spec import load_training_spec

    example = Path(__file__).resolve().parents[2] / "examples" / "train-qwen3-8b.yaml"
    sent = build_training_plan(load_training_spec(example)).request["HyperParameters"]
    hp = parse_hyperparameters(sent)
    assert set(sent) <= set(contract.HYPERPARAMETERS)
    assert str(hp.num_depths) == sent[contract.HP_NUM_DEPTHS]
    assert str(hp.num_layers) == sent[contract.HP_NUM_LAYERS]
    assert hp.serving_format == sent[contract.HP_SERVING_FORMAT]
    assert hp.data_format == sent[contract.HP_DATA_FORMAT]
    assert hp.learning_rate == float(sent[contract.HP_LEARNING_RATE])
    assert hp.regenerate == (sent[contract.HP_REGENERATE] == "true")
