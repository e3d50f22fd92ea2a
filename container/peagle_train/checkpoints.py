"""speculators' checkpoints under /opt/ml/checkpoints/train: which are complete, which
is best, and what a restarted spot job resumes from.

The trainer writes `<save-path>/<epoch>/` (train/checkpointer.py: config.json,
model.safetensors, optimizer_state_dict.pt, then trainer.py's training_state.json last)
and resumes from the highest numbered folder, complete or not. SageMaker uploads the
folder to CheckpointConfig.S3Uri as files appear and restores it on a restart, so an
interruption mid-save leaves a numbered folder without all its files (or a truncated
model.safetensors). Before the trainer starts, such folders are moved aside so it
resumes from the newest complete one.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REQUIRED_FILES: Final = (
    "config.json",
    "model.safetensors",
    "optimizer_state_dict.pt",
    "training_state.json",
)
INCOMPLETE_PREFIX: Final = "incomplete-"


@dataclass(frozen=True)
class Checkpoint:
    epoch: int
    path: Path
    val_loss: float | None


def safetensors_complete(path: Path) -> bool:
    """The header parses and the file is as long as its last tensor's end."""
    try:
        with path.open("rb") as f:
            first = f.read(8)
            if len(first) != 8:
                return False
            (n,) = struct.unpack("<Q", first)
            header = json.loads(f.read(n))
    except (OSError, ValueError):
        return False
    if not isinstance(header, dict):
        return False
    ends = [
        v["data_offsets"][1]
        for k, v in header.items()
        if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v
    ]
    return path.stat().st_size == 8 + n + max(ends, default=0)


def _val_loss(folder: Path) -> float | None:
    try:
        value = json.loads((folder / "val_metrics.json").read_text())["loss_epoch"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def is_complete(folder: Path) -> bool:
    if not all((folder / name).is_file() for name in REQUIRED_FILES):
        return False
    try:
        json.loads((folder / "training_state.json").read_text())
    except (OSError, ValueError):
        return False
    return safetensors_complete(folder / "model.safetensors")


def numbered(root: Path) -> list[Path]:
    """The epoch folders the trainer would consider (it skips symlinks and other names)."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and p.name.isdigit()]
    return sorted(found, key=lambda p: int(p.name))


def complete_checkpoints(root: Path) -> list[Checkpoint]:
    return [Checkpoint(int(p.name), p, _val_loss(p)) for p in numbered(root) if is_complete(p)]


def set_aside_incomplete(root: Path) -> list[str]:
    """Rename incomplete epoch folders newer than the newest complete one, so the trainer
    resumes from it; returns the names moved. Older incomplete ones are left alone."""
    complete = complete_checkpoints(root)
    newest = complete[-1].epoch if complete else -1
    moved = []
    for folder in numbered(root):
        if int(folder.name) > newest and not is_complete(folder):
            target = folder.with_name(INCOMPLETE_PREFIX + folder.name)
            n = 1
            while target.exists():
                n += 1
                target = folder.with_name(f"{INCOMPLETE_PREFIX}{folder.name}.{n}")
            folder.rename(target)
            moved.append(folder.name)
    return moved


def best_checkpoint(root: Path) -> Checkpoint | None:
    """Lowest validation loss among complete checkpoints (the trainer writes
    val_metrics.json into the epochs that improved it); the newest when none has one."""
    complete = complete_checkpoints(root)
    scored = [c for c in complete if c.val_loss is not None]
    if scored:
        return min(scored, key=lambda c: (c.val_loss, -c.epoch))
    return complete[-1] if complete else None
