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

MAX_DEPTHS: Final = 128
"""K trained: at most the 128 draft tokens vLLM verifies per step (MAX_SPEC_LEN, see
docs/platform-facts.md "Training jobs: the request"), and at most max_seq_len - 3."""
INT_MAX: Final = 2**31 - 1  # the planner's bound (AWS's Integer)


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
    regenerate: bool
    serving_format: str
    acceptance_floor: float
    held_out_prompts: int
    seed: int
    data_format: str
    max_samples: int | None = None
    mask_token_id: int | None = None
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


def _float(name: str, raw: str, low: float, high: float, *, above_low: bool = False) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    inside = low < value <= high if above_low else low <= value <= high
    if not (math.isfinite(value) and inside):
        bound = f"({low:g}, {high:g}]" if above_low else f"[{low:g}, {high:g}]"
        raise HyperparameterError(f"hyperparameter {name}: {raw!r} is not a number in {bound}")
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


# name -> parser of its string. The planner checked the values against the target and
# the instance already; these ranges only keep a hand-made request from going further.
_PARSERS: Final[dict[str, Callable[[str, str], object]]] = {
    contract.HP_NUM_DEPTHS: lambda n, r: _int(n, r, 1, MAX_DEPTHS),
    contract.HP_NUM_LAYERS: lambda n, r: _int(n, r, 1, 64),
    contract.HP_DRAFT_VOCAB: lambda n, r: _int(n, r, 1, INT_MAX),
    contract.HP_MAX_SEQ_LEN: lambda n, r: _int(n, r, 16, INT_MAX),
    contract.HP_EPOCHS: lambda n, r: _int(n, r, 1, 1000),
    contract.HP_LEARNING_RATE: lambda n, r: _float(n, r, 0.0, 1.0, above_low=True),
    contract.HP_REGENERATE: _bool,
    contract.HP_SERVING_FORMAT: lambda n, r: _choice(n, r, contract.SERVING_FORMATS),
    contract.HP_ACCEPTANCE_FLOOR: lambda n, r: _float(n, r, 0.0, float(MAX_DEPTHS + 1)),
    contract.HP_HELD_OUT: lambda n, r: _int(n, r, 1, 100_000),
    contract.HP_SEED: lambda n, r: _int(n, r, 0, INT_MAX),
    contract.HP_DATA_FORMAT: lambda n, r: _choice(n, r, contract.DATA_FORMATS),
}
# Sent only when the training spec states them (peagle_deploy/train/render.py).
_OPTIONAL_PARSERS: Final[dict[str, Callable[[str, str], object]]] = {
    contract.HP_MAX_SAMPLES: lambda n, r: _int(n, r, 1, INT_MAX),
    contract.HP_MASK_TOKEN_ID: lambda n, r: _int(n, r, 0, INT_MAX),
    HP_TARGET_LAYER_IDS: lambda n, r: _layer_ids(r),
}


def parse_hyperparameters(raw: object) -> Hyperparameters:
    """The pinned knobs from the decoded hyperparameters.json (a JSON object of strings)."""
    if not isinstance(raw, Mapping):
        raise HyperparameterError("hyperparameters: not a JSON object of strings")
    known = {**_PARSERS, **_OPTIONAL_PARSERS}
    for name, value in raw.items():
        if name not in known:
            allowed = ", ".join([*contract.HYPERPARAMETERS, HP_TARGET_LAYER_IDS])
            raise HyperparameterError(f"hyperparameter {name}: unknown (allowed: {allowed})")
        if not isinstance(value, str):
            raise HyperparameterError(
                f"hyperparameter {name}: not a string (SageMaker sends strings)"
            )
    missing = [name for name in _PARSERS if name not in raw]
    if missing:
        raise HyperparameterError(f"hyperparameter {missing[0]}: missing (every knob is pinned)")
    values = {name: parse(name, raw[name]) for name, parse in known.items() if name in raw}
    hp = Hyperparameters(**values)  # type: ignore[arg-type]
    if hp.num_depths > hp.max_seq_len - 3:
        raise HyperparameterError(
            f"hyperparameter {contract.HP_NUM_DEPTHS}: {hp.num_depths} is more than "
            f"max_seq_len - 3 ({hp.max_seq_len - 3})"
        )
    return hp


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
