"""Read safetensors headers (tensor names, dtypes, shapes) without loading any tensor.

A safetensors file is: 8 bytes little-endian unsigned header length N, then N bytes of
UTF-8 JSON `{name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}`, then
the raw data. The preflight only needs names and shapes, so it reads at most 8 + N
bytes per file, which keeps it well under a second even for multi-GB drafters.
Sharded checkpoints list their files in `model.safetensors.index.json`
(`{"weight_map": {tensor_name: file_name}}`).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Final

from peagle_serve import strict_json

INDEX_FILE: Final = "model.safetensors.index.json"
# Real headers are a few hundred KB at most; the format itself caps them at 100 MB.
MAX_HEADER_BYTES: Final = strict_json.SAFETENSORS_HEADER_MAX_BYTES


class SafetensorsError(ValueError):
    """A file that is not a readable safetensors file."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def read_header(path: str) -> dict[str, TensorInfo]:
    """Tensor name -> TensorInfo for one .safetensors file (header bytes only)."""
    try:
        with open(path, "rb") as f:
            raw_len = f.read(8)
            if len(raw_len) != 8:
                raise SafetensorsError(f"{path}: shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", raw_len)
            if n == 0 or n > MAX_HEADER_BYTES:
                raise SafetensorsError(f"{path}: implausible header length {n}")
            data = f.read(n)
    except OSError as e:
        raise SafetensorsError(f"{path}: {e.strerror or e}") from e
    if len(data) != n:
        raise SafetensorsError(f"{path}: header truncated ({len(data)} of {n} bytes)")
    try:
        header: Any = strict_json.load_bytes(
            data, what=f"{path}: header", max_bytes=MAX_HEADER_BYTES
        )
    except strict_json.JsonInputError as e:
        raise SafetensorsError(str(e)) from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list):
            raise SafetensorsError(f"{path}: tensor {name!r} has no shape")
        shape = entry["shape"]
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise SafetensorsError(f"{path}: tensor {name!r} has a bad shape {shape!r}")
        out[name] = TensorInfo(name, str(entry.get("dtype", "")), tuple(shape), path)
    return out


def checkpoint_tensors(directory: str) -> dict[str, TensorInfo]:
    """Every tensor of the safetensors checkpoint in `directory`.

    With an index file, reads the headers of the shards it names (and fails when a
    named shard is missing, since vLLM would fail later); without one, reads every
    `*.safetensors` file in the directory. An empty dict means no safetensors weights.
    """
    index_path = os.path.join(directory, INDEX_FILE)
    if os.path.isfile(index_path):
        try:
            index = strict_json.load_file(index_path, max_bytes=strict_json.INDEX_MAX_BYTES)
        except OSError as e:
            raise SafetensorsError(f"{index_path}: {e.strerror or e}") from e
        except strict_json.JsonInputError as e:
            raise SafetensorsError(str(e)) from None
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise SafetensorsError(f"{index_path}: has no weight_map")
        files = sorted({str(v) for v in weight_map.values()})
    else:
        files = sorted(
            name
            for name in os.listdir(directory)
            if name.endswith(".safetensors") and os.path.isfile(os.path.join(directory, name))
        )
    tensors: dict[str, TensorInfo] = {}
    for name in files:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise SafetensorsError(f"{index_path}: names shard {name} which is missing")
        tensors.update(read_header(path))
    return tensors
