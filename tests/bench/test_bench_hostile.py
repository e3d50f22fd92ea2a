"""Hostile input to `peagle bench`, `bench compare`, `bench recommend-k` and `emulator loopback`.

Every case must end the same way: exit code 2, one line on stderr that names the flag
(or the file key), no traceback, no request sent, well under 2 s, under 2 KB of output.
"No request" is checked at the socket: every target in the corpus points at a loopback
listener that is never answered, and SageMaker calls are routed there too
(AWS_ENDPOINT_URL), so any connection at all, even a model lookup, is seen.
The CLI runs in-process (`peagle_deploy.cli.app.main`); a timer interrupts a case that
hangs so the corpus cannot stall the suite.
"""

from __future__ import annotations

import codecs
import json
import random
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from peagle_deploy.cli.app import main

HANG_GUARD_S = 3.0
"""A refusal is immediate; the SIGALRM guard (10x this) fails a case that hangs. No
assertion on elapsed time: a loaded machine must not turn a correct refusal red."""
MAX_OUTPUT = 2048

GOOD_LINE = '{"messages": [{"role": "user", "content": "hi"}]}\n'


class _Hung(BaseException):
    """Raised by the timer: a BaseException, so no `except Exception` in the CLI eats it."""


@pytest.fixture(scope="module")
def listener() -> Iterator[socket.socket]:
    """A port that accepts connections and never answers: each accepted one is a request
    the command should not have sent."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.setblocking(False)
        yield sock


def _connections(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


@dataclass(frozen=True)
class Case:
    name: str
    argv: Callable[[Path, str], list[str]]
    """(tmp_path, the listener's URL) -> the arguments after `peagle`."""
    flag: str
    """What the one error line must start with, after `error: `."""


def _write(path: Path, data: bytes | str) -> str:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def _dataset(data: bytes | str) -> Callable[[Path, str], list[str]]:
    def argv(tmp: Path, url: str) -> list[str]:
        path = _write(tmp / "prompts.jsonl", data)
        return ["bench", "--url", url, "--model", "m", "-c", "1", "-n", "1", "--dataset", path]

    return argv


def _results(data: bytes | str, command: str = "compare") -> Callable[[Path, str], list[str]]:
    def argv(tmp: Path, url: str) -> list[str]:
        return ["bench", command, "--results", _write(tmp / "results.json", data)]

    return argv


def _huge_results(tmp: Path, url: str) -> list[str]:
    path = tmp / "huge.json"
    with path.open("wb") as f:  # sparse: 65 MiB on paper, nothing on disk
        f.truncate(65 << 20)
    return ["bench", "recommend-k", "--results", str(path)]


def _targets_file(text: str | bytes) -> Callable[[Path, str], list[str]]:
    def argv(tmp: Path, url: str) -> list[str]:
        body = text.replace("URL", url) if isinstance(text, str) else text
        path = _write(tmp / "targets.yaml", body)
        return ["bench", "compare", "-f", path, "-c", "1", "-n", "1", "--dataset", "humaneval"]

    return argv


def _bench(*flags: str) -> Callable[[Path, str], list[str]]:
    def argv(tmp: Path, url: str) -> list[str]:
        return ["bench", "--url", url, "--model", "m", "-c", "1", "-n", "1", *flags]

    return argv


def _run(sweep: dict[str, Any]) -> str:
    level = {"concurrency": 1, "completed": 1, "failed": 0, "output_throughput": 10.0}
    return json.dumps({"label": "peagle-k3", "levels": [{**level, **sweep}]})


def _nested(depth: int) -> str:
    return '{"messages": ' + "[" * depth + "]" * depth + "}\n"


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n"
    for i in range(8)
)
RANDOM_BYTES = random.Random(13).randbytes(4096)

CASES = [
    # --- --dataset: JSONL through documents.iter_json_lines -----------------------------
    Case("dataset invalid utf-8", _dataset(GOOD_LINE.encode() + b'{"messages": "\xff\xfe"}\n'), "--dataset"),  # noqa: E501
    Case("dataset utf-16", _dataset(codecs.BOM_UTF16_LE + GOOD_LINE.encode("utf-16-le")), "--dataset"),  # noqa: E501
    Case("dataset line nested 5000 deep", _dataset(GOOD_LINE + _nested(5000)), "--dataset"),
    Case("dataset NaN", _dataset('{"messages": [{"role": "user", "content": NaN}]}\n'), "--dataset"),  # noqa: E501
    Case("dataset 1e999", _dataset('{"messages": [{"role": "user", "content": 1e999}]}\n'), "--dataset"),  # noqa: E501
    Case("dataset duplicate keys", _dataset('{"messages": [], "messages": []}\n'), "--dataset"),
    Case("dataset 10 MB line", _dataset('{"messages": "' + "x" * (10 << 20) + '"}\n'), "--dataset"),
    Case("dataset random bytes", _dataset(RANDOM_BYTES), "--dataset"),
    Case("dataset NUL bytes", _dataset(b"\x00" * 64), "--dataset"),
    Case("dataset empty file", _dataset(""), "--dataset"),
    Case("dataset a list per line", _dataset("[1, 2, 3]\n"), "--dataset"),
    Case("dataset a directory", lambda tmp, url: _bench("--dataset", str(tmp))(tmp, url), "--dataset"),  # noqa: E501
    Case("dataset name too long", _bench("--dataset", "x" * 5000), "--dataset"),
    # --- --results: load_document(limits=RESULTS) and the shape check -------------------
    Case("results wrong shape", _results('{"levels": "x"}'), "--results"),
    Case("results a metric that is text", _results(_run({"output_throughput": "fast"})), "--results"),  # noqa: E501
    Case("results a count that is a float", _results(_run({"completed": 1.5})), "--results"),
    Case("results huge", _huge_results, "--results"),
    Case("results nested 5000 deep", _results('{"levels": ' + "[" * 5000 + "]" * 5000 + "}", "recommend-k"), "--results"),  # noqa: E501
    Case("results NaN", _results(_run({"output_throughput": float("nan")})), "--results"),
    Case("results duplicate keys", _results('{"levels": [], "levels": []}', "recommend-k"), "--results"),  # noqa: E501
    Case("results invalid utf-8", _results(b'{"label": "\xc3\x28", "levels": []}'), "--results"),
    Case("results a 10k label", _results(json.dumps({"label": "x" * 10000, "levels": []})), "--results"),  # noqa: E501
    Case("results an unknown kind", _results(json.dumps({"kind": "turbo", "levels": []})), "--results"),  # noqa: E501
    Case("results yaml, not json", _results("levels:\n  - concurrency: 1\n"), "--results"),
    # --- compare --file: load_mapping ------------------------------------------------------
    Case("file billion laughs", _targets_file(BILLION_LAUGHS), "--file"),
    Case("file nested 5000 deep", _targets_file("targets: " + "[" * 5000 + "]" * 5000), "--file"),
    Case("file duplicate keys", _targets_file("targets: []\ntargets: []\n"), "--file"),
    Case("file utf-16", _targets_file(codecs.BOM_UTF16_LE + "targets: []\n".encode("utf-16-le")), "--file"),  # noqa: E501
    Case("file random bytes", _targets_file(RANDOM_BYTES), "--file"),
    Case("file not a mapping", _targets_file("- a\n- b\n"), "--file"),
    Case("file ftp url", _targets_file("targets:\n  - {label: a, url: 'ftp://x'}\n"), "--file targets[0].url"),  # noqa: E501
    Case("file second target bad", _targets_file("targets:\n  - {label: a, url: URL}\n  - {label: b, endpoint: 'no such name!'}\n"), "--file targets[1].endpoint"),  # noqa: E501
    Case("file bogus kind", _targets_file("targets:\n  - {label: a, url: URL, kind: turbo}\n"), "--file targets[0].kind"),  # noqa: E501
    Case("file k true", _targets_file("targets:\n  - {label: a, url: URL, k: true}\n"), "--file targets[0].k"),  # noqa: E501
    Case("file model with a newline", _targets_file('targets:\n  - {label: a, url: URL, model: "m\\nx"}\n'), "--file targets[0].model"),  # noqa: E501
    Case("file region not a region", _targets_file("targets:\n  - {label: a, endpoint: ep, region: moon}\n"), "--file targets[0].region"),  # noqa: E501
    Case("compare region not a region", lambda tmp, url: ["bench", "compare", "-t", f"a={url}", "--region", "x y"], "--region"),  # noqa: E501
    Case("file label a mapping", _targets_file("targets:\n  - {label: {a: 1}, url: URL}\n"), "--file targets[0].label"),  # noqa: E501
    # --- empty values (an unset shell variable) ---------------------------------------------
    Case("empty --url", lambda tmp, url: ["bench", "--url", ""], "--url"),
    Case("empty --endpoint", lambda tmp, url: ["bench", "--endpoint", ""], "--endpoint"),
    Case("empty --label", _bench("--label", ""), "--label"),
    Case("empty --model", lambda tmp, url: ["bench", "--url", url, "--model", ""], "--model"),
    Case("empty --region", _bench("--region", ""), "--region"),
    Case("empty --dataset", _bench("--dataset", ""), "--dataset"),
    Case("empty --concurrency", _bench("--concurrency", ""), "--concurrency"),
    Case("empty --num-prompts", _bench("--num-prompts", " "), "--num-prompts"),
    Case("empty --duration", _bench("--duration", ""), "--duration"),
    Case("empty --workers", _bench("--workers", ""), "--workers"),
    Case("empty --hourly-price", _bench("--hourly-price", ""), "--hourly-price"),
    Case("empty --request-timeout", _bench("--request-timeout", ""), "--request-timeout"),
    Case("empty --logs-delay", _bench("--logs-delay", ""), "--logs-delay"),
    Case("empty --json", _bench("--json", ""), "--json"),
    Case("empty --report", _bench("--report", ""), "--report"),
    Case("empty compare --target", lambda tmp, url: ["bench", "compare", "-t", ""], "--target"),
    Case("empty compare --file", lambda tmp, url: ["bench", "compare", "-f", ""], "--file"),
    Case("empty compare --results", lambda tmp, url: ["bench", "compare", "--results", ""], "--results"),  # noqa: E501
    Case("empty compare --kind", lambda tmp, url: ["bench", "compare", "--kind", ""], "--kind"),
    Case("empty recommend-k --results", lambda tmp, url: ["bench", "recommend-k", "--results", ""], "--results"),  # noqa: E501
    Case("empty recommend-k --tolerance", lambda tmp, url: ["bench", "recommend-k", "--results", "x", "--tolerance", ""], "--tolerance"),  # noqa: E501
    Case("empty recommend-k --instances", lambda tmp, url: ["bench", "recommend-k", "--results", "x", "--instances", ""], "--instances"),  # noqa: E501
    Case("empty loopback --host", lambda tmp, url: ["emulator", "loopback", "--host", ""], "--host"),  # noqa: E501
    Case("empty loopback --port", lambda tmp, url: ["emulator", "loopback", "--port", ""], "--port"),  # noqa: E501
    # --- where the results go: refused before the first request ---------------------------
    Case("json under /proc", _bench("--json", "/proc/peagle-nope/out.json"), "--json"),
    Case("json an existing /proc file", _bench("--json", "/proc/version"), "--json"),
    Case("json under a regular file", lambda tmp, url: _bench("--json", _write(tmp / "f", "x") + "/out.json")(tmp, url), "--json"),  # noqa: E501
    Case("json a directory", lambda tmp, url: _bench("--json", str(tmp))(tmp, url), "--json"),
    Case("report under /proc", _bench("--report", "/proc/peagle-nope"), "--report"),
    Case("report /proc itself", _bench("--report", "/proc"), "--report"),
    Case("report a regular file", lambda tmp, url: _bench("--report", _write(tmp / "f", "x"))(tmp, url), "--report"),  # noqa: E501
    Case("compare json under /proc", lambda tmp, url: ["bench", "compare", "-t", f"a={url}", "-c", "1", "--json", "/proc/x/y.json"], "--json"),  # noqa: E501
    Case("recommend-k json under /proc", lambda tmp, url: ["bench", "recommend-k", "--results", "x", "--json", "/proc/x/y.json"], "--json"),  # noqa: E501
    # --- flags that parse but make no sense -------------------------------------------------
    Case("url without a closing bracket", lambda tmp, url: ["bench", "--url", "http://[::1/v1"], "--url"),  # noqa: E501
    Case("url with a port out of range", lambda tmp, url: ["bench", "--url", "http://127.0.0.1:99999/v1"], "--url"),  # noqa: E501
    Case("url with a newline", lambda tmp, url: ["bench", "--url", url + "\nHost: evil"], "--url"),
    Case("url not http", lambda tmp, url: ["bench", "--url", "file:///etc/passwd"], "--url"),
    Case("endpoint not a name", lambda tmp, url: ["bench", "--endpoint", "../../x"], "--endpoint"),
    Case("endpoint 5 MB", lambda tmp, url: ["bench", "--endpoint", "e" * (5 << 20)], "--endpoint"),
    Case("region not a region", lambda tmp, url: ["bench", "--endpoint", "ep", "--region", "mars-1"], "--region"),  # noqa: E501
    Case("label 5 MB", _bench("--label", "l" * (5 << 20)), "--label"),
    Case("label with a newline", _bench("--label", "peagle\n[/]"), "--label"),
    Case("label with an escape sequence", _bench("--label", "\x1b[2Jpeagle"), "--label"),
    Case("results label with a newline", _results(json.dumps({"label": "a\nb", "levels": []})), "--results"),  # noqa: E501
    Case("temperature nan", _bench("--temperature", "nan"), "--temperature"),
    Case("duration infinite", _bench("--duration", "1e999"), "--duration"),
    Case("concurrency repeated", _bench("-c", "1,1"), "--concurrency"),
    Case("concurrency not numbers", _bench("-c", "1,two"), "--concurrency"),
    Case("seed with 30 digits", _bench("--seed", "9" * 30), "--seed"),
    Case("num-prompts with 5000 digits", _bench("-n", "9" * 5000), "--num-prompts"),
    Case("workers 10000", _bench("--workers", "10000"), "--workers"),
    Case("request-timeout nan", _bench("--request-timeout", "nan"), "--request-timeout"),
    Case("target with a bad url", lambda tmp, url: ["bench", "compare", "-t", f"a={url}", "-t", "b=http://"], "--target"),  # noqa: E501
    Case("target label twice", lambda tmp, url: ["bench", "compare", "-t", f"a={url}", "-t", f"a={url}"], "--target"),  # noqa: E501
    Case("loopback port 70000", lambda tmp, url: ["emulator", "loopback", "--port", "70000"], "--port"),  # noqa: E501
    Case("recommend-k tolerance inf", lambda tmp, url: ["bench", "recommend-k", "--results", "x", "--tolerance", "inf"], "--tolerance"),  # noqa: E501
]  # fmt: skip


@pytest.fixture(autouse=True)
def _aws_to_the_listener(monkeypatch: pytest.MonkeyPatch, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _hang(signum: int, frame: Any) -> None:
    raise _Hung


def test_the_corpus_is_large_and_its_names_unique() -> None:
    assert len(CASES) >= 60
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_bench_input_is_one_line_naming_the_flag(
    case: Case,
    tmp_path: Path,
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    argv = case.argv(tmp_path, url)
    _connections(listener)  # forget anything earlier
    capsys.readouterr()
    previous = signal.signal(signal.SIGALRM, _hang)
    signal.setitimer(signal.ITIMER_REAL, 10 * HANG_GUARD_S)
    try:
        code = main(argv)
    except _Hung:
        pytest.fail(f"{case.name}: still running after {10 * HANG_GUARD_S:g} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith(f"error: {case.flag}"), err[:300]
    assert err.count("\n") == 1 and err.endswith("\n"), err[:600]
    assert "Traceback" not in out + err
    assert len((out + err).encode()) < MAX_OUTPUT
    assert _connections(listener) == 0, "a request was sent"


REGION_CASES = [
    ("AWS_DEFAULT_REGION", ""),
    ("AWS_DEFAULT_REGION", "us-east-1; rm -rf /"),
    ("AWS_REGION", " "),
    ("AWS_REGION", "x" * 5000),
]


@pytest.mark.parametrize("case", REGION_CASES, ids=lambda c: f"{c[0]}={ascii(c[1])[:20]}")
@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--endpoint", "ep", "-c", "1", "-n", "1"],
        ["bench", "--endpoint", "ep", "-c", "2", "-n", "2", "--workers", "2"],
        ["bench", "compare", "-t", "a=endpoint:ep", "-c", "1", "-n", "1"],
    ],
    ids=["endpoint", "workers", "compare"],
)
def test_a_bad_region_variable_is_refused_as_peagle_status_refuses_it(
    case: tuple[str, str],
    argv: list[str],
    listener: socket.socket,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SageMaker target checks the region variables with `peagle status`'s check
    (peagle_deploy.aws.check_environment_region): the same line, exit 2, no request."""
    variable, value = case
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv(variable, value)
    _connections(listener)
    capsys.readouterr()
    assert main(argv) == 2
    _, bench_err = capsys.readouterr()
    assert main(["status", "peagle-x-dev"]) == 2
    _, status_err = capsys.readouterr()
    assert bench_err == status_err
    assert bench_err.startswith(f"error: {variable}") and bench_err.count("\n") == 1, bench_err
    assert "Traceback" not in bench_err and len(bench_err.encode()) < MAX_OUTPUT
    assert _connections(listener) == 0, "a request was sent"
