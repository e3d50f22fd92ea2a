"""Fixtures for the container tests (helpers live in container_helpers.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from container_helpers import (
    MakeDrafter,
    drafter_config,
    drafter_tensors,
    write_safetensors,
    write_target,
)


@pytest.fixture
def make_drafter(tmp_path: Path) -> MakeDrafter:
    """Write a drafter directory; keyword arguments change the config or the weights."""
    counter = [0]

    def make(
        *,
        config: dict[str, Any] | None = None,
        tensors: dict[str, tuple[str, tuple[int, ...]]] | None = None,
        sharded: bool = False,
    ) -> Path:
        counter[0] += 1
        d = tmp_path / f"drafter{counter[0]}"
        d.mkdir()
        (d / "config.json").write_text(
            json.dumps(config if config is not None else drafter_config())
        )
        weights = tensors if tensors is not None else drafter_tensors()
        if sharded:
            names = list(weights)
            half = len(names) // 2
            shards = {
                "model-00001-of-00002.safetensors": {n: weights[n] for n in names[:half]},
                "model-00002-of-00002.safetensors": {n: weights[n] for n in names[half:]},
            }
            weight_map = {}
            for fname, part in shards.items():
                write_safetensors(d / fname, part)
                weight_map.update({n: fname for n in part})
            (d / "model.safetensors.index.json").write_text(
                json.dumps({"metadata": {}, "weight_map": weight_map})
            )
        else:
            write_safetensors(d / "model.safetensors", weights)
        return d

    return make


@pytest.fixture
def target_dir(tmp_path: Path) -> Path:
    """A tiny target model directory (config.json only) with hidden size HIDDEN."""
    return write_target(tmp_path / "target")


# The engine test's image variant (test_engine.py: 869 MB of wheels, a 3.7 GB image) runs
# on request only: cold CI runs took 28.7 minutes with it and 21.2 without it.
ENGINE_IMAGE_ENV = "PEAGLE_ENGINE_IMAGE_TEST"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(ENGINE_IMAGE_ENV) == "1":
        return
    chosen = [i for i in items if i.get_closest_marker("engine_image") is None]
    if len(chosen) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
        items[:] = chosen
