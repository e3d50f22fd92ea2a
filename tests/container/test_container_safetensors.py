"""The header-only safetensors reader."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from container_helpers import write_safetensors
from peagle_serve.safetensors_header import (
    INDEX_FILE,
    SafetensorsError,
    checkpoint_tensors,
    read_header,
)


def raw_file(path: Path, header: bytes, length: int | None = None) -> Path:
    n = len(header) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + header)
    return path


def test_reads_names_dtypes_shapes(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(
        path, {"a": ("BF16", (2, 3)), "mask_hidden": ("F32", (1, 12)), "s": ("I64", ())}
    )
    tensors = read_header(str(path))
    assert set(tensors) == {"a", "mask_hidden", "s"}
    assert tensors["a"].dtype == "BF16" and tensors["a"].shape == (2, 3)
    assert tensors["mask_hidden"].numel == 12
    assert tensors["s"].shape == () and tensors["s"].numel == 1


@pytest.mark.parametrize(
    ("header", "length", "problem"),
    [
        (b"", 0, "implausible"),
        (b"{}", 10**12, "implausible"),
        (b'{"a": {"dtype"', None, "not valid JSON"),
        (b"[1, 2]", None, "not a JSON object"),
        (b'{"a": {"dtype": "F32"}}', None, "no shape"),
        (b'{"a": {"dtype": "F32", "shape": [-1]}}', None, "bad shape"),
        (b'{"a": 1}', 64, "truncated"),
    ],
)
def test_bad_files_raise(tmp_path: Path, header: bytes, length: int | None, problem: str) -> None:
    path = raw_file(tmp_path / "bad.safetensors", header, length)
    with pytest.raises(SafetensorsError, match=problem):
        read_header(str(path))


def test_shorter_than_eight_bytes(tmp_path: Path) -> None:
    (tmp_path / "x.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(SafetensorsError, match="8-byte"):
        read_header(str(tmp_path / "x.safetensors"))


def test_directory_without_index_reads_every_file(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "a.safetensors", {"x": ("F32", (1,))})
    write_safetensors(tmp_path / "b.safetensors", {"y": ("F32", (2,))})
    (tmp_path / "notes.txt").write_text("not weights")
    assert set(checkpoint_tensors(str(tmp_path))) == {"x", "y"}


def test_index_limits_the_files_read(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "a.safetensors", {"x": ("F32", (1,))})
    (tmp_path / "stale.safetensors").write_bytes(b"garbage")  # not in the index: not read
    (tmp_path / INDEX_FILE).write_text(json.dumps({"weight_map": {"x": "a.safetensors"}}))
    assert set(checkpoint_tensors(str(tmp_path))) == {"x"}


@pytest.mark.parametrize("index", ["{", "[]", '{"weight_map": {}}'])
def test_bad_index_raises(tmp_path: Path, index: str) -> None:
    (tmp_path / INDEX_FILE).write_text(index)
    with pytest.raises(SafetensorsError):
        checkpoint_tensors(str(tmp_path))


def test_no_weights_is_an_empty_dict(tmp_path: Path) -> None:
    assert checkpoint_tensors(str(tmp_path)) == {}
