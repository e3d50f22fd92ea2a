"""The one loading path for user documents: limits, encodings, duplicates, non-numbers."""

from __future__ import annotations

import codecs
import json
import os
import threading
import time
from pathlib import Path

import pytest

from peagle_deploy import documents
from peagle_deploy.documents import (
    JSONL_LINE,
    SPEC,
    DocumentError,
    Limits,
    iter_json_lines,
    load_document,
    load_mapping,
    parse_json,
    parse_yaml,
)


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _refused(call, *args, **kwargs) -> DocumentError:  # type: ignore[no-untyped-def]
    with pytest.raises(DocumentError) as info:
        call(*args, **kwargs)
    return info.value


BILLION_LAUGHS = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(8)]
    + ["model: *i"]
)


def test_plain_documents_load(tmp_path: Path) -> None:
    spec = _write(tmp_path, "spec.yaml", "model: gpt-oss-20b\nspeculative: {mode: p-eagle}\n")
    assert load_mapping(spec, "--file") == {
        "model": "gpt-oss-20b",
        "speculative": {"mode": "p-eagle"},
    }
    as_json = _write(tmp_path, "spec.json", json.dumps({"model": "m", "k": [1, 2.5]}))
    assert load_document(as_json, "--file") == {"model": "m", "k": [1, 2.5]}
    assert load_mapping(_write(tmp_path, "empty.yaml", ""), "--file") == {}


def test_yaml_anchors_and_merge_keys_still_work(tmp_path: Path) -> None:
    text = "base: &b {a: 1, b: 2}\nother:\n  <<: *b\n  b: 3\nlist: [*b, *b]\n"
    doc = parse_yaml(text, "gates", "gates.yaml")
    assert doc["other"] == {"a": 1, "b": 3}
    assert doc["list"] == [{"a": 1, "b": 2}] * 2


def test_billion_laughs_is_refused_quickly() -> None:
    start = time.perf_counter()
    err = _refused(parse_yaml, BILLION_LAUGHS, "--file", "bomb.yaml")
    assert time.perf_counter() - start < 30.0  # hang guard: the expansion is refused, not done
    assert err.field == "--file"
    assert "aliases expand to more than" in str(err)
    assert len(str(err)) < 200


def test_recursive_alias_is_refused() -> None:
    err = _refused(parse_yaml, "a: &a [*a]\n", "--file", "loop.yaml")
    assert "more than" in str(err) or "nested deeper" in str(err)


@pytest.mark.parametrize(
    ("text", "parse"),
    [
        ("[" * 5000 + "]" * 5000, parse_json),
        ('{"a":' * 5000 + "1" + "}" * 5000, parse_json),
        ("[" * 5000 + "]" * 5000, parse_yaml),
        ("".join(f"{' ' * i}a:\n" for i in range(3000)) + " " * 3000 + "b: 1\n", parse_yaml),
        ("[" * 40 + "]" * 40, parse_json),
    ],
)
def test_deep_nesting_is_one_error(text: str, parse) -> None:  # type: ignore[no-untyped-def]
    err = _refused(parse, text, "--file", "deep")
    assert "nested deeper than 32 levels" in str(err)


def test_depth_limit_is_inclusive() -> None:
    assert parse_json("[" * 32 + "]" * 32, "--file", "ok") is not None


@pytest.mark.parametrize(
    "text",
    ['{"model": "a", "model": "b"}', '{"s": {"k": 1, "k": 2}}'],
)
def test_json_duplicate_keys_refused(text: str) -> None:
    err = _refused(parse_json, text, "--file", "dup.json")
    assert "appears twice" in str(err)


def test_yaml_duplicate_keys_refused_with_line() -> None:
    err = _refused(parse_yaml, "model: a\nstage: dev\nmodel: b\n", "--file", "dup.yaml")
    assert "line 3" in str(err)
    assert "'model' appears twice" in str(err)


@pytest.mark.parametrize(
    ("text", "parse"),
    [
        ('{"k": NaN}', parse_json),
        ('{"k": Infinity}', parse_json),
        ('{"k": -Infinity}', parse_json),
        ('{"k": 1e999}', parse_json),
        ("k: .nan\n", parse_yaml),
        ("k: [.inf]\n", parse_yaml),
    ],
)
def test_non_finite_numbers_refused(text: str, parse) -> None:  # type: ignore[no-untyped-def]
    err = _refused(parse, text, "--file", "nan")
    assert "finite numbers" in str(err)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, "spec.yaml", codecs.BOM_UTF8 + b"model: m\n")
    assert load_mapping(path, "--file") == {"model": "m"}


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_named(tmp_path: Path, encoding: str) -> None:
    data = "model: m\n".encode(encoding)
    if encoding == "utf-16-be":
        data = codecs.BOM_UTF16_BE + data
    err = _refused(load_mapping, _write(tmp_path, "spec.yaml", data), "--file")
    assert ("UTF-16" in str(err)) or ("UTF-32" in str(err))
    assert "save it as UTF-8" in str(err)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "spec.yaml", b"model: m\nstage: d\xe9v\n")
    err = _refused(load_mapping, path, "--file")
    assert "line 2" in str(err)
    assert "not UTF-8" in str(err)


def test_random_bytes_are_one_error(tmp_path: Path) -> None:
    data = bytes(range(256)) * 8
    err = _refused(load_mapping, _write(tmp_path, "x.yaml", data), "--file")
    assert err.field == "--file"


def test_nul_bytes_refused(tmp_path: Path) -> None:
    err = _refused(load_mapping, _write(tmp_path, "x.yaml", b"model: m\x00\n"), "--file")
    assert "NUL" in str(err)


def test_size_checked_before_parsing(tmp_path: Path) -> None:
    big = _write(tmp_path, "tokenizer.json", b'{"v": "' + b"x" * (SPEC.max_bytes + 10) + b'"}')
    err = _refused(load_mapping, big, "--file")
    assert "larger than 1 MiB" in str(err)
    assert len(str(err)) < 300


def test_value_count_cap(tmp_path: Path) -> None:
    small = Limits(max_bytes=1 << 20, max_values=100)
    err = _refused(parse_json, json.dumps(list(range(200))), "--results", "r.json", small)
    assert "more than 100 values" in str(err)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    err = _refused(load_mapping, _write(tmp_path, "s.yaml", "- a\n- b\n"), "--file")
    assert "top level is a list" in str(err)


def test_unsafe_tags_refused() -> None:
    err = _refused(parse_yaml, "a: !!python/object/apply:os.system [ls]\n", "--file", "t.yaml")
    assert "not valid YAML" in str(err)


def test_unhashable_key_refused() -> None:
    err = _refused(parse_yaml, "? [a, b]\n: 1\n", "--file", "k.yaml")
    assert "not valid YAML" in str(err)


def test_directory_and_missing_file(tmp_path: Path) -> None:
    assert "is a directory" in str(_refused(load_mapping, tmp_path, "--gates"))
    assert "cannot read" in str(_refused(load_mapping, tmp_path / "nope.yaml", "--gates"))


def test_named_pipe_nobody_writes_to_is_refused_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(documents, "PIPE_WAIT_S", 0.3)
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    err = _refused(load_mapping, fifo, "--file")
    assert time.monotonic() - start < 10
    assert err.field == "--file"
    assert "nothing to read from" in str(err) and "0.3 s" in str(err)
    err = _refused(lambda: list(iter_json_lines(fifo, "--dataset")))
    assert err.field == "--dataset" and "nothing to read" in str(err)


def _write_later(fifo: Path, data: bytes, delay_s: float) -> threading.Thread:
    """A writer that opens the pipe after the reader did, as `--file <(slow cmd)` does."""

    def write() -> None:
        time.sleep(delay_s)
        with fifo.open("wb") as f:
            f.write(data)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_pipe_with_a_writer_is_read_whole(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    thread = _write_later(fifo, b"model: gpt-oss-20b\nk: 3\n", 0.2)
    assert load_mapping(fifo, "--file") == {"model": "gpt-oss-20b", "k": 3}
    thread.join()
    thread = _write_later(fifo, b'{"prompt": "a"}\n{"prompt": "b"}\n', 0.2)
    assert [n for n, _ in iter_json_lines(fifo, "--dataset")] == [1, 2]
    thread.join()


def test_endless_device_is_cut_at_the_size_cap() -> None:
    err = _refused(load_mapping, Path("/dev/zero"), "--file")
    assert "larger than" in str(err)


def test_jsonl_lines_are_strict_and_numbered(tmp_path: Path) -> None:
    path = _write(tmp_path, "d.jsonl", '{"prompt": "a"}\n\n{"prompt": "b"}\n')
    assert list(iter_json_lines(path, "--dataset")) == [(1, {"prompt": "a"}), (3, {"prompt": "b"})]
    bad = _write(tmp_path, "bad.jsonl", '{"prompt": "a"}\n{"prompt": NaN}\n')
    err = _refused(lambda: list(iter_json_lines(bad, "--dataset")))
    assert "line 2" in str(err)
    assert err.field == "--dataset"


def test_jsonl_long_line_refused(tmp_path: Path) -> None:
    limits = Limits(max_bytes=100)
    path = _write(tmp_path, "d.jsonl", '{"p": "' + "x" * 500 + '"}\n')
    err = _refused(lambda: list(iter_json_lines(path, "--dataset", limits)))
    assert "longer than 100 bytes" in str(err)


def test_jsonl_utf16_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "d.jsonl", '{"p": "a"}\n'.encode("utf-16"))
    err = _refused(lambda: list(iter_json_lines(path, "--dataset", JSONL_LINE)))
    assert "UTF-16" in str(err)


def test_pure_python_yaml_gives_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """libyaml is used when PyYAML has it; without it the pure-Python loader must refuse
    and accept exactly the same documents."""
    import yaml

    from peagle_deploy import documents

    texts = [
        "base: &b {a: 1, b: 2}\nother:\n  <<: *b\n  b: 3\nlist: [*b, *b]\n",
        "model: x\nmodel: y\n",
        BILLION_LAUGHS,
        "[" * 40 + "]" * 40,
        "a: .nan\n",
        "a: [unclosed\n",
    ]

    def answers() -> list[object]:
        out: list[object] = []
        for text in texts:
            try:
                out.append(parse_yaml(text, "--file", "f.yaml"))
            except DocumentError as exc:
                out.append(exc.problem.split(":")[1] if ":" in exc.problem else exc.problem)
        return out

    fast = answers()
    documents._safe_loader.cache_clear()
    documents._strict_loader.cache_clear()
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    try:
        assert answers() == fast
    finally:
        documents._safe_loader.cache_clear()
        documents._strict_loader.cache_clear()
