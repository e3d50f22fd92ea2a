"""The driver's GPU-side commands, parsed by the parsers of the programs that run them.

"Check your logic against an implementation you did not write": each argv the driver
builds (peagle_train.commands) goes through
- speculators 0.9.0's own CLI (its typer commands' click parsing and option callbacks;
  the trainer's TrainConfig.resolve, the call `python -m speculators.train` makes) and
  torch's torchrun parser: data/speculators_cli_probe.py in the training environment
  (scripts/train-env.sh, or PEAGLE_TRAIN_VENV);
- vLLM 0.30.0's server parser (the one `python3 -m vllm.entrypoints.openai.api_server`
  runs) and its serve-argument validation:
  data/vllm_serve_probe.py in the vLLM CPU environment (PEAGLE_VLLM_VENV).
and the test reads back what those parsers made of it. None of these steps runs here
(no GPU); their arguments are what is proven.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from peagle_train import commands
from peagle_train.hyperparameters import parse_hyperparameters
from test_container_contract import vllm_python
from test_train_driver import GOOD_HP

pytestmark = pytest.mark.contract

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
HP = parse_hyperparameters({**GOOD_HP, "num_layers": "4", "num_depths": "7"})
UNCAPPED = parse_hyperparameters({k: v for k, v in GOOD_HP.items() if k != "max_samples"})
LAYERS = (1, 2, 3)
MASK = 1020


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required under CI")
    pytest.skip(f"{what} is not built here")


def train_python() -> Path:
    """The training environment's python: PEAGLE_TRAIN_VENV, else scripts/train-env.sh
    (which builds it once and prints its path)."""
    venv = os.environ.get("PEAGLE_TRAIN_VENV")
    if not venv and (ROOT / "scripts/train-env.sh").exists():
        done = subprocess.run(
            ["bash", str(ROOT / "scripts/train-env.sh")],
            capture_output=True,
            text=True,
            check=False,
        )
        venv = (
            done.stdout.strip().splitlines()[-1]
            if done.returncode == 0 and done.stdout.strip()
            else None
        )
    python = Path(venv) / "bin" / "python" if venv else None
    if python is None or not python.exists():
        _missing("the training environment (scripts/train-env.sh / PEAGLE_TRAIN_VENV)")
    assert python is not None
    return python


def probe(python: Path, script: str, cases: dict[str, list[str]], cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(DATA / script)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture
def layout(tmp_path: Path) -> commands.Layout:
    out = commands.Layout(
        python="/usr/bin/python3",
        target=tmp_path / "opt-ml/input/data/target",
        work=tmp_path / "opt-ml/peagle-work",
        checkpoints=tmp_path / "opt-ml/checkpoints",
    )
    out.train_file.parent.mkdir(parents=True)
    out.train_file.write_text('{"conversations": [{"role": "user", "content": "hi"}]}\n')
    return out


# Every knob of the trainer the driver pins: none may come from speculators' defaults.
PINNED = (
    "verifier_name_or_path", "speculator_type", "data_path", "hidden_states_backend",
    "on_missing", "save_path", "log_dir", "num_layers", "draft_arch", "full_attention_indices",
    "num_depths", "draft_vocab_size", "target_layer_ids", "mask_token_id", "total_seq_len",
    "epochs", "lr", "seed", "optimizer", "scheduler_type", "loss_fn", "hidden_states_dtype",
    "train_data_ratio", "checkpoint_freq",
)  # fmt: skip


def test_the_trainer_command_parses_with_every_knob_pinned(
    layout: commands.Layout, tmp_path: Path
) -> None:
    argv = commands.train(layout, HP, 8, LAYERS, MASK)
    broken = [*argv, "--depths", "3"]  # a flag speculators does not have
    result = probe(
        train_python(), "speculators_cli_probe.py", {"train": argv, "broken": broken}, tmp_path
    )
    assert "--depths" in result["broken"]["error"]
    got = result["train"]
    assert "error" not in got, got
    assert got["torchrun"] == {
        "standalone": True,
        "nnodes": "1",
        "nproc_per_node": "8",
        "module": True,
        "training_script": "speculators.train",
    }
    config, provenance = got["config"], got["provenance"]
    assert {k: provenance[k] for k in PINNED} == dict.fromkeys(PINNED, "flag")
    assert config["speculator_type"] == "peagle"
    assert (config["num_layers"], config["num_depths"], config["draft_vocab_size"]) == (4, 7, 512)
    assert config["draft_arch"] == "llama" and config["full_attention_indices"] == [0, 1, 2, 3]
    assert config["target_layer_ids"] == list(LAYERS) and config["mask_token_id"] == MASK
    assert (config["total_seq_len"], config["epochs"], config["lr"], config["seed"]) == (
        256,
        2,
        0.0003,
        7,
    )
    assert config["data_path"] == str(layout.prepared)
    assert config["save_path"] == str(layout.checkpoints / "train")
    assert config["on_missing"] == "raise" and config["checkpoint_freq"] == 1.0
    assert config["save_best"] is False  # with it, only the best epoch is kept: nothing to resume
    assert config["no_resume_from_checkpoint"] is False


def test_the_data_commands_parse(layout: commands.Layout, tmp_path: Path) -> None:
    source = layout.regenerated
    cases = {
        "regenerate": commands.regenerate(layout, 8001, HP),
        "prepare": commands.prepare_data(layout, 8002, HP, source),
        "hidden": commands.hidden_states(layout, 8002, HP),
        "uncapped": commands.prepare_data(layout, 8002, UNCAPPED, source),
        "no-such-dataset": commands.regenerate(
            commands.Layout("python", layout.target, tmp_path / "nowhere", layout.checkpoints),
            8001,
            HP,
        ),
    }
    result = probe(train_python(), "speculators_cli_probe.py", cases, tmp_path)
    assert "dataset file does not exist" in result["no-such-dataset"]["error"]
    regen = result["regenerate"]["params"]
    assert regen["endpoint"] == "http://127.0.0.1:8001/v1/chat/completions"
    assert regen["model"] == str(layout.target) and regen["dataset"] == str(layout.train_file)
    assert regen["outfile"] == str(layout.regenerated) and regen["resume"] is True
    assert (regen["limit"], regen["max_tokens"], regen["seed"]) == (1000, 256, 7)
    prep = result["prepare"]["params"]
    assert prep["data"] == [str(source)] and prep["output"] == str(layout.prepared)
    assert prep["render_endpoint"] == "http://127.0.0.1:8002"
    assert (prep["seq_length"], prep["max_samples"], prep["seed"]) == (256, 1000, 7)
    assert prep["skip_token_freq"] is False and prep["allow_empty_output"] is True
    assert result["uncapped"]["params"]["max_samples"] is None  # no cap: every row
    hidden = result["hidden"]["params"]
    assert hidden["endpoint"] == "http://127.0.0.1:8002/v1" and hidden["model"] == str(
        layout.target
    )
    assert hidden["preprocessed_data"] == str(layout.prepared)
    assert hidden["output"] == str(layout.prepared / "hidden_states")
    assert hidden["validate_outputs"] is True and hidden["fail_on_error"] is True


def test_the_vllm_servers_parse(layout: commands.Layout, tmp_path: Path) -> None:
    python = vllm_python()
    if python is None:
        _missing("the vLLM CPU environment (scripts/vllm-env.sh / PEAGLE_VLLM_VENV)")
    assert python is not None
    cases = {
        "generation": commands.generation_server(layout, 8001, HP),
        "extraction": commands.extraction_server(layout, 8002, HP, LAYERS, 4),
    }
    result = probe(python, "vllm_serve_probe.py", cases, tmp_path)
    gen, ext = result["generation"], result["extraction"]
    assert "error" not in gen and "error" not in ext, result
    assert (gen["model"], gen["host"], gen["port"], gen["seed"]) == (
        str(layout.target),
        "127.0.0.1",
        8001,
        7,
    )
    assert gen["speculative_config"] is None and gen["kv_transfer_config"] is None
    assert ext["max_model_len"] == 256 and ext["method_known"] is True
    assert ext["speculative_config"] == {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}},
    }
    assert ext["kv_transfer_config"] == {
        "kv_connector": "ExampleHiddenStatesConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": str(layout.work / "hs-spool")},
        "is_kv_producer": True,
    }
