"""What an endpoint says never drives the terminal it is shown on (issue 34, Low 4).

The promotion gate report quotes the source endpoint's answer and errors; `peagle
invoke` writes the answer; `peagle status` the failure reason and the container's log
lines. rich passes ESC through a Text (it strips only BEL, BS, VT, FF and CR), so an
answer could retitle the window (OSC), write a hyperlink, clear the screen or recolour
what follows (CSI, also as the one-byte C1 `\\x9b`). Each is shown escaped instead;
newlines and tabs keep laying the text out.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from peagle_deploy.promote.evaluate import SmokeOutcome
from peagle_deploy.promote.gates import StageGates
from peagle_deploy.promote.report import render_report
from peagle_deploy.promote.runner import PromoteOptions, StageState, run_gates
from peagle_deploy.terminal import harmless, literal

RETITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
C1_RED = "\x9b31m"
OVERWRITE = "\rOK"
HOSTILE = f"ok{RETITLE}{CLEAR}{C1_RED}{OVERWRITE}{LINK}\u202eevil"
RAW = (RETITLE, CLEAR, C1_RED, "\x1b]8", "\r", "\u202e", "\x1b\\")


def _terminal() -> Console:
    """A console that believes it writes to a colour terminal (rich's own styling on)."""
    return Console(file=io.StringIO(), force_terminal=True, width=300, emoji=False)


def _shown(console: Console) -> str:
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def _report(outcome: SmokeOutcome) -> str:
    gates = StageGates.model_validate({"bench": None})
    report = run_gates(
        gates,
        StageState(stage="dev", endpoint_name="ep-dev", status="InService"),
        PromoteOptions(source_stage="dev", target_stage="staging"),
        clients=None,
        console=Console(quiet=True),
        smoke_runner=lambda name, gate: outcome,
    )
    console = _terminal()
    render_report(report, console)
    return _shown(console)


@pytest.mark.parametrize(
    "outcome",
    [SmokeOutcome(text=HOSTILE), SmokeOutcome(text="", error=f"ModelError: 500 {HOSTILE}")],
    ids=["answer", "error"],
)
def test_the_gate_report_shows_the_endpoints_control_sequences_escaped(
    outcome: SmokeOutcome,
) -> None:
    shown = _report(outcome)
    for raw in RAW:
        assert raw not in shown, repr(raw)
    assert "\\x1b]0;pwned" in shown  # visible, so a reviewer sees what the endpoint sent


def test_harmless_keeps_lines_and_tabs_and_escapes_every_other_control() -> None:
    assert harmless("a\n\tb") == "a\n\tb"
    assert harmless("\x1b[31m\x9b\x07\x00\r\x7f\u202e\u2066") == (
        "\\x1b[31m\\x9b\\x07\\x00\\r\\x7f\\u202e\\u2066"
    )
    assert not any(raw in harmless(HOSTILE) for raw in RAW)
    # a table cell (literal) and a marked-up line (escaped) get the same treatment
    console = _terminal()
    console.print(literal(HOSTILE))
    assert not any(raw in _shown(console) for raw in RAW)


class _Stdout(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class _Stream:
    """A streamed answer whose escape sequence is split across two chunks."""

    text = "ok" + CLEAR + "line 2"
    finish_reason = "stop"
    usage: dict[str, int] = {}

    def __iter__(self) -> Iterator[str]:
        yield "ok\x1b"
        yield "[2J"
        yield "line 2"


class _Endpoint:
    def stream(self, messages: Any, **params: Any) -> _Stream:
        return _Stream()

    def chat(self, messages: Any, **params: Any) -> Any:
        class Result:
            text = "ok" + RETITLE + "\nline 2"

        return Result()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "chat"])
@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_invoke_escapes_the_answer_on_a_terminal_and_passes_it_whole_into_a_pipe(
    monkeypatch: pytest.MonkeyPatch, stream: bool, tty: bool
) -> None:
    from peagle_deploy.cli.app import main
    from peagle_deploy.sdk import PeagleEndpoint

    monkeypatch.setattr(PeagleEndpoint, "from_name", classmethod(lambda cls, *a, **k: _Endpoint()))
    out = _Stdout(tty)
    monkeypatch.setattr("sys.stdout", out)
    argv = ["invoke", "peagle-x-dev", "hi", *(["--stream"] if stream else [])]
    assert main(argv) == 0
    written = out.getvalue()
    sent = _Stream.text if stream else _Endpoint().chat([]).text
    if tty:
        assert "\x1b" not in written and "\x07" not in written
        assert written == harmless(sent) + "\n"
    else:
        assert written == sent + "\n"  # the data, exactly as the endpoint sent it


def test_status_shows_the_failure_reason_and_the_containers_log_lines_escaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`peagle status` quotes SageMaker's FailureReason and the container's last log lines
    (vLLM's own output, colours included): escaped, one line each."""
    from peagle_deploy.cli import deploy, output

    console = _terminal()
    monkeypatch.setattr(output, "console", console, raising=False)
    deploy._print_status(
        {
            "endpoint_name": "peagle-x-dev",
            "status": "Failed",
            "endpoint_config_name": "peagle-x-dev-c1",
            "pending_endpoint_config_name": None,
            "failure_reason": f"CannotStartContainerError {HOSTILE}",
            "log_tail": [f"\x1b[32mINFO\x1b[0m {HOSTILE}"],
            "manifest": None,
        }
    )
    shown = _shown(console)
    for raw in (*RAW, "\x1b[32m"):
        assert raw not in shown, repr(raw)
    assert "\\x1b[32mINFO" in shown
