"""Error messages echo short, credential-free, one-line excerpts of values."""

from __future__ import annotations

from peagle_deploy.errors import InputError
from peagle_deploy.redaction import MASK, excerpt, mask_secrets, safe_message

HF_TOKEN = "hf_" + "a1B2" * 10
AWS_KEY = "AKIA" + "ABCDEFGHIJKLMNOP"


def test_tokens_are_masked_wherever_they_appear() -> None:
    text = f"env: ['HF_TOKEN={HF_TOKEN}', 'K={AWS_KEY}'] is not a mapping"
    masked = mask_secrets(text)
    assert HF_TOKEN not in masked
    assert AWS_KEY not in masked
    assert masked.count(MASK) == 2


def test_excerpt_cuts_and_says_how_long() -> None:
    assert excerpt("short") == "short"
    cut = excerpt("x" * 5_000_000)
    assert len(cut) < 120
    assert "5000000 characters" in cut


def test_safe_message_cuts_pasted_runs_but_keeps_prose() -> None:
    prose = "2 does not fit ml.g7e.2xlarge (1 GPU)"
    assert safe_message(prose) == prose
    pasted = "endpoint_name: " + "a" * 5_000_000 + " is too long"
    out = safe_message(pasted)
    assert len(out) < 200
    assert out.endswith(" is too long")


def test_safe_message_is_one_line_without_terminal_escapes() -> None:
    out = safe_message("bad\nvalue\x1b[2J\there")
    assert "\n" not in out
    assert "\x1b" not in out
    assert out == "bad\\nvalue\\x1b[2J\\there"


def test_input_error_text_is_safe_but_attributes_exact() -> None:
    err = InputError("env", f"{[f'HF_TOKEN={HF_TOKEN}']!r} is not a mapping", "KEY: value")
    assert HF_TOKEN not in str(err)
    assert HF_TOKEN in err.problem  # callers that need the exact value still have it
    huge = InputError("endpoint_name", f"{'n' * 5_000_000!r} is too long", "1-63 characters")
    assert len(str(huge)) < 2048
