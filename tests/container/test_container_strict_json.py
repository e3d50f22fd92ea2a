"""strict_json: every JSON the container reads is bounded and strict, with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from peagle_serve import strict_json
from peagle_serve.strict_json import (
    MAX_DEPTH,
    JsonInputError,
    JsonLimitError,
    JsonSyntaxError,
    load_bytes,
    load_file,
    loads,
)


def test_plain_documents_parse() -> None:
    doc = {"a": [1, 2.5, True, None, "x"], "b": {"c": {"d": "é"}}}
    assert loads(json.dumps(doc), what="doc", max_bytes=1000) == doc
    assert load_bytes(json.dumps(doc).encode(), what="doc", max_bytes=1000) == doc


def test_nesting_up_to_the_limit_is_fine() -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = loads(text, what="doc", max_bytes=10_000)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000, 200_000])
def test_deep_nesting_is_one_line_not_a_recursion_error(depth: int) -> None:
    text = '{"a":' * depth + "1" + "}" * depth
    with pytest.raises(JsonLimitError) as e:
        loads(text, what="SM_VLLM_X", max_bytes=10**7)
    assert str(e.value).startswith("SM_VLLM_X: nested too deeply (more than 64 levels, at ")
    assert "\n" not in str(e.value)


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    text = json.dumps({"s": "[" * 1000 + '\\"{' * 100})
    assert loads(text, what="doc", max_bytes=10**6)["s"].startswith("[[[")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"x": {"k": 1, "k": 1}}', "duplicate key 'k'"),
        ("[NaN]", "NaN is not a JSON number"),
        ('{"a": Infinity}', "Infinity is not a JSON number"),
        ("-Infinity", "-Infinity is not a JSON number"),
    ],
)
def test_strictness(text: str, problem: str) -> None:
    with pytest.raises(JsonLimitError) as e:
        loads(text, what="doc", max_bytes=1000)
    assert problem in str(e.value)


@pytest.mark.parametrize("text", ["", "{", "[1,]", "{'a': 1}", "nul", '{"a": 1} x'])
def test_not_json_is_a_syntax_error_with_the_position(text: str) -> None:
    with pytest.raises(JsonSyntaxError) as e:
        loads(text, what="doc", max_bytes=1000)
    assert str(e.value).startswith("doc: not valid JSON (")
    assert "at character" in str(e.value)


def test_size_limit_names_both_sizes() -> None:
    with pytest.raises(JsonLimitError) as e:
        loads("[" + "1," * 2000 + "1]", what="doc", max_bytes=1024)
    assert "the limit is 1.0 KiB" in str(e.value)
    with pytest.raises(JsonLimitError):
        load_bytes(b"1" * 2000, what="doc", max_bytes=1024)


def test_invalid_utf8_bytes_name_the_offset() -> None:
    with pytest.raises(JsonLimitError) as e:
        load_bytes(b'{"a": "\xff"}', what="config.json", max_bytes=100)
    assert str(e.value) == "config.json: is not valid UTF-8 (byte 0xff at offset 7)"


def test_invalid_utf8_that_python_escaped_into_text_is_named() -> None:
    # How os.environ hands over bytes that are not UTF-8 (surrogateescape).
    text = b'["\xc3("]'.decode("utf-8", "surrogateescape")
    with pytest.raises(JsonLimitError) as e:
        loads(text, what="SM_VLLM_X", max_bytes=100)
    assert "not valid UTF-8 (byte 0xc3 at character 2)" in str(e.value)


def test_a_bom_is_refused_like_vllms_loaders_do() -> None:
    with pytest.raises(JsonLimitError) as e:
        load_bytes(b'\xef\xbb\xbf{"a": 1}', what="config.json", max_bytes=100)
    assert "byte-order mark" in str(e.value)
    # The reason: json.loads on the decoded text (what transformers does) rejects it too.
    with pytest.raises(ValueError, match="BOM"):
        json.loads(b'\xef\xbb\xbf{"a": 1}'.decode("utf-8"))


def test_load_file_reads_no_more_than_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * 600_000 + b"0]")
    with pytest.raises(JsonLimitError) as e:
        load_file(str(big), max_bytes=1024 * 1024)
    assert str(e.value).startswith(f"{big}: is 1.1 MiB; the limit is 1.0 MiB")
    small = tmp_path / "small.json"
    small.write_text('{"ok": true}')
    assert load_file(str(small), max_bytes=100) == {"ok": True}
    with pytest.raises(OSError):
        load_file(str(tmp_path / "missing.json"), max_bytes=100)


def test_errors_are_value_errors_with_what_and_problem() -> None:
    with pytest.raises(ValueError) as e:
        loads("[", what="w", max_bytes=10)
    assert isinstance(e.value, JsonInputError)
    assert e.value.what == "w" and e.value.problem.startswith("not valid JSON")


def test_megabytes_of_brackets_are_refused_by_the_depth_check() -> None:
    for text in ("[" * 10_000_000, '{"a":' * 2_000_000):
        with pytest.raises(JsonLimitError, match="nested too deeply"):
            loads(text, what="doc", max_bytes=strict_json.INDEX_MAX_BYTES)


def test_the_decoder_for_sequences_is_strict_too() -> None:
    dec = strict_json.decoder()
    value, end = dec.raw_decode('{"a": 1} {"b": 2}')
    assert value == {"a": 1} and end == 8
    with pytest.raises(ValueError) as e:
        dec.raw_decode('{"a": 1, "a": 1}')
    assert isinstance(strict_json.parse_error("v", e.value), JsonLimitError)
