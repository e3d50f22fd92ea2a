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


def header_length(first8: bytes, source: str) -> int:
    """N from a file's first 8 bytes (refused when absent or implausible)."""
    if len(first8) != 8:
        raise SafetensorsError(f"{source}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", first8)
    if n == 0 or n > MAX_HEADER_BYTES:
        raise SafetensorsError(f"{source}: implausible header length {n}")
    return int(n)


def parse_header(data: bytes, n: int, source: str) -> dict[str, TensorInfo]:
    """Tensor name -> TensorInfo from the N header bytes that follow the length.

    Pure (no I/O): the preflight feeds it from a local file, `peagle doctor` from a
    ranged S3 GET. `source` names the file in messages and in TensorInfo.file.
    """
    if len(data) != n:
        raise SafetensorsError(f"{source}: header truncated ({len(data)} of {n} bytes)")
    try:
        header: Any = strict_json.load_bytes(
            data, what=f"{source}: header", max_bytes=MAX_HEADER_BYTES
        )
    except strict_json.JsonInputError as e:
        raise SafetensorsError(str(e)) from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{source}: header is not a JSON object")
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list):
            raise SafetensorsError(f"{source}: tensor {name!r} has no shape")
        shape = entry["shape"]
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise SafetensorsError(f"{source}: tensor {name!r} has a bad shape {shape!r}")
        out[name] = TensorInfo(name, str(entry.get("dtype", "")), tuple(shape), source)
    return out


def read_header(path: str) -> dict[str, TensorInfo]:
    """Tensor name -> TensorInfo for one .safetensors file (header bytes only)."""
    try:
        with open(path, "rb") as f:
            n = header_length(f.read(8), path)
            data = f.read(n)
    except OSError as e:
        raise SafetensorsError(f"{path}: {e.strerror or e}") from e
    return parse_header(data, n, path)


def index_shards(index: object, source: str) -> list[str]:
    """The shard file names a `model.safetensors.index.json` document names."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise SafetensorsError(f"{source}: has no weight_map")
    return sorted({str(v) for v in weight_map.values()})


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
        files = index_shards(index, index_path)
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
