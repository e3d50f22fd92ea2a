"""The job's hyperparameters, read strictly from SageMaker's hyperparameters.json.

CreateTrainingJob.HyperParameters is a map of strings, and SageMaker writes it as a JSON
object of strings (contract.HYPERPARAMETERS_PATH). Every knob the trainer has is pinned
from here, because speculators' defaults differ from its docs (1 layer and 8 depths by
default; AWS's heads use 4 layers), so nothing is left to a default the reader cannot
see. A bad value stops the job before any GPU work with one line naming the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from peagle_train import contract

HP_TARGET_LAYER_IDS: Final = "target_layer_ids"
"""Optional (an extension of contract.HYPERPARAMETERS): comma-separated target layers
whose hidden states feed the drafter. Absent: speculators' rule [2, n//2, n-3], which is
invalid for targets with few layers (the driver says so)."""

MAX_DEPTHS: Final = 32
"""K trained. vLLM only requires num_speculative_tokens > 0 (config/speculative.py);
AWS's Qwen3-Coder head was trained for 18 (its model card, docs/platform-facts.md
"Published results"); 32 leaves room above that while bounding a step's memory."""

OPTIONAL: Final = frozenset({HP_TARGET_LAYER_IDS})


class HyperparameterError(ValueError):
    """One line naming the hyperparameter and what is allowed."""


@dataclass(frozen=True)
class Hyperparameters:
    num_depths: int
    num_layers: int
    draft_vocab_size: int
    max_seq_len: int
    epochs: int
    learning_rate: float
    max_samples: int
    regenerate: bool
    serving_format: str
    acceptance_floor: float
    held_out_prompts: int
    seed: int
    target_layer_ids: tuple[int, ...] | None = None


def _int(name: str, raw: str, low: int, high: int) -> int:
    try:
        value = int(raw, 10)
    except ValueError:
        raise HyperparameterError(
            f"hyperparameter {name}: {raw!r} is not an integer ({low}..{high})"
        ) from None
    if not low <= value <= high:
        raise HyperparameterError(f"hyperparameter {name}: {value} is outside {low}..{high}")
    return value


def _float(name: str, raw: str, low: float, high: float) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise HyperparameterError(
            f"hyperparameter {name}: {raw!r} is not a number in {low:g}..{high:g}"
        )
    return value


def _bool(name: str, raw: str) -> bool:
    if raw in ("true", "false"):
        return raw == "true"
    raise HyperparameterError(f"hyperparameter {name}: {raw!r} is not 'true' or 'false'")


def _choice(name: str, raw: str, allowed: tuple[str, ...]) -> str:
    if raw not in allowed:
        raise HyperparameterError(
            f"hyperparameter {name}: {raw!r} is not one of {', '.join(allowed)}"
        )
    return raw


def _layer_ids(raw: str) -> tuple[int, ...]:
    parts = [p.strip() for p in raw.split(",")]
    if not all(p.isdigit() for p in parts):
        raise HyperparameterError(
            f"hyperparameter {HP_TARGET_LAYER_IDS}: {raw!r} is not comma-separated "
            "layer numbers (e.g. 2,16,29)"
        )
    return tuple(int(p) for p in parts)


# name -> parser of its string. Ranges: sizes a single training instance can hold.
_PARSERS: Final[dict[str, Callable[[str, str], object]]] = {
    contract.HP_NUM_DEPTHS: lambda n, r: _int(n, r, 1, MAX_DEPTHS),
    contract.HP_NUM_LAYERS: lambda n, r: _int(n, r, 1, 8),
    contract.HP_DRAFT_VOCAB: lambda n, r: _int(n, r, 1, 1_048_576),
    contract.HP_MAX_SEQ_LEN: lambda n, r: _int(n, r, 16, 262_144),
    contract.HP_EPOCHS: lambda n, r: _int(n, r, 1, 1000),
    contract.HP_LEARNING_RATE: lambda n, r: _float(n, r, 1e-8, 1.0),
    contract.HP_MAX_SAMPLES: lambda n, r: _int(n, r, 1, 100_000_000),
    contract.HP_REGENERATE: _bool,
    contract.HP_SERVING_FORMAT: lambda n, r: _choice(n, r, contract.SERVING_FORMATS),
    contract.HP_ACCEPTANCE_FLOOR: lambda n, r: _float(n, r, 0.0, float(MAX_DEPTHS)),
    contract.HP_HELD_OUT: lambda n, r: _int(n, r, 1, 100_000),
    contract.HP_SEED: lambda n, r: _int(n, r, 0, 2**31 - 1),
}


def parse_hyperparameters(raw: object) -> Hyperparameters:
    """The pinned knobs from the decoded hyperparameters.json (a JSON object of strings)."""
    if not isinstance(raw, Mapping):
        raise HyperparameterError("hyperparameters: not a JSON object of strings")
    for name, value in raw.items():
        if name not in _PARSERS and name not in OPTIONAL:
            allowed = ", ".join([*contract.HYPERPARAMETERS, *sorted(OPTIONAL)])
            raise HyperparameterError(f"hyperparameter {name}: unknown (allowed: {allowed})")
        if not isinstance(value, str):
            raise HyperparameterError(
                f"hyperparameter {name}: not a string (SageMaker sends strings)"
            )
    missing = [name for name in contract.HYPERPARAMETERS if name not in raw]
    if missing:
        raise HyperparameterError(f"hyperparameter {missing[0]}: missing (every knob is pinned)")
    values = {name: parse(name, raw[name]) for name, parse in _PARSERS.items()}
    layer_raw = raw.get(HP_TARGET_LAYER_IDS)
    layers = _layer_ids(layer_raw) if isinstance(layer_raw, str) else None
    return Hyperparameters(**values, target_layer_ids=layers)  # type: ignore[arg-type]


def load_hyperparameters(path: Path) -> Hyperparameters:
    """Read and parse the file SageMaker writes; a missing or non-JSON file is an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise HyperparameterError(f"hyperparameters: cannot read {path}: {e.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise HyperparameterError(f"hyperparameters: {path} is not JSON ({e.msg})") from None
    return parse_hyperparameters(raw)
