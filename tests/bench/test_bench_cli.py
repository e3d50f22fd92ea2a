"""`peagle bench`, `bench compare`, `bench recommend-k` through the real CLI entry point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from peagle_local.emulator.loopback import LoopbackConfig, LoopbackServer, serve_in_thread

from peagle_deploy.cli.app import main


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with serve_in_thread(LoopbackConfig(draft_tokens=3, acceptance_rate=0.5)) as srv:
        yield srv


def _chats(tmp_path: Path) -> str:
    path = tmp_path / "chats.jsonl"
    path.write_text(
        "".join(f'{{"messages": [{{"role": "user", "content": "q{i}"}}]}}\n' for i in range(3))
    )
    return str(path)


def test_bench_run_writes_json(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"
    code = main(
        [
            "bench", "--url", server.url, "--label", "peagle-k3", "-c", "1,2", "-n", "3",
            "--max-tokens", "5", "--warmup", "0", "--dataset", _chats(tmp_path),
            "--hourly-price", "10", "--json", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["label"] == "peagle-k3"
    assert doc["kind"] == "p-eagle"
    assert doc["k"] == 3
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 2]
    level = doc["levels"][0]
    assert level["completed"] == 3
    assert level["failed"] == 0
    assert level["total_output_tokens"] == 15
    assert level["spec_decode_acceptance_length"] is not None
    assert level["cost_per_million_output_tokens"] > 0
    for key in ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms"):
        assert key in level
    printed = capsys.readouterr().out
    assert "peagle-k3" in printed
    # Redirected output keeps whole headers and figures (no 80-column cut to "…").
    assert "TTFT med ms" in printed and "…" not in printed


def test_bench_json_to_stdout(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["bench", "--url", server.url, "-c", "1", "-n", "2", "--max-tokens", "2",
         "--warmup", "0", "--dataset", _chats(tmp_path), "--json", "-"]
    )  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["levels"][0]["completed"] == 2


def test_compare_and_recommend(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        f"targets:\n  - label: mine\n    url: {server.url}\n    kind: eagle3\n    k: 2\n"
    )
    code = main(
        [
            "bench", "compare", "-t", f"peagle-k3={server.url}", "-t", f"baseline={server.url}",
            "-f", str(targets), "-c", "1", "-n", "2", "--max-tokens", "3", "--warmup", "0",
            "--dataset", _chats(tmp_path), "--report", str(report),
            "--json", str(tmp_path / "c.json"),
        ]
    )  # fmt: skip
    assert code == 0
    assert {p.name for p in report.iterdir()} == {
        "results.json", "results.csv", "report.md", "throughput.png",
    }  # fmt: skip
    doc = json.loads((tmp_path / "c.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["peagle-k3", "mine", "baseline"]
    assert doc["runs"][1]["kind"] == "eagle3"
    row = doc["table"][0]
    assert row["best_peagle"] == "peagle-k3"
    assert row["peagle_over_baseline"] is not None
    assert "P/E3" in capsys.readouterr().out

    # recommend-k over that comparison: only one P-EAGLE K was measured, and it says so.
    code = main(["bench", "recommend-k", "--results", str(report / "results.json"), "--json", "-"])
    assert code == 0
    out, err = capsys.readouterr()
    rec = json.loads(out)
    assert rec["speculative"] == {"mode": "p-eagle", "num_speculative_tokens": 3}
    assert rec["yaml"].startswith("speculative:\n  mode: p-eagle\n")
    assert rec["notes"] and "only K=3 was measured" in rec["notes"][0]
    assert "warning: only K=3 was measured" in err
    code = main(["bench", "recommend-k", "--results", str(report / "results.json")])
    assert code == 0
    out, err = capsys.readouterr()
    assert "Spec snippet (the one K measured):" in out and "mode: p-eagle" in out
    assert "only K=3 was measured" in err

    # compare from saved results, reclassifying a label
    code = main(["bench", "compare", "--results", str(report / "results.json"),
                 "--kind", "mine=other", "--json", "-"])  # fmt: skip
    assert code == 0
    again = json.loads(capsys.readouterr().out)
    assert again["table"][0]["best_eagle3"] is None


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["bench", "--concurrency", "1"], "--url/--endpoint"),
        (["bench", "--url", "http://127.0.0.1:9/v1", "--workers", "0"], "--workers"),
        (["bench", "compare", "-t", "a=http://x/v1", "--workers", "65"], "--workers"),
        (["bench", "--url", "http://127.0.0.1:9/v1", "--logs-delay", "-1"], "--logs-delay"),
        (
            ["bench", "--url", "http://127.0.0.1:9/v1", "--request-timeout", "0"],
            "--request-timeout",
        ),
        (["bench", "compare", "--results", "=x.json"], "--results"),
        (["bench", "--url", "http://127.0.0.1:9/v1", "-c", "0"], "--concurrency"),
        (["bench", "--url", "http://127.0.0.1:9/v1", "--max-tokens", "0"], "--max-tokens"),
        (["bench", "--url", "http://127.0.0.1:9/v1", "--dataset", "/nope.jsonl"], "--dataset"),
        (["bench", "--url", "ftp://x"], "--url"),
        (["bench", "compare", "-t", "noequals"], "--target"),
        (["bench", "compare"], "--target"),
        (["bench", "recommend-k", "--results", "/nope.json"], "--results"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert flag in err
    assert "Traceback" not in err


def test_bad_targets_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("targets:\n  - label: a\n    url: http://x\n    endpoint: y\n")
    assert main(["bench", "compare", "-f", str(path)]) == 2
    assert "needs exactly one of url, endpoint" in capsys.readouterr().err


def test_a_target_that_answers_nothing_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_url = f"http://127.0.0.1:{_free_port()}/v1"
    out = tmp_path / "dead.json"
    code = main(
        ["bench", "--url", dead_url, "--model", "m", "-c", "1", "-n", "2", "--max-tokens", "2",
         "--warmup", "0", "--dataset", _chats(tmp_path), "--json", str(out)]
    )  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "no request completed" in err
    assert "Traceback" not in err
    doc = json.loads(out.read_text())  # the failure reasons are still written
    assert doc["levels"][0]["failed"] == 2
    assert doc["levels"][0]["completed"] == 0


@pytest.mark.parametrize("flag", ["--report", "--json"])
@pytest.mark.parametrize("command", [["bench"], ["bench", "compare"]])
def test_unwritable_output_fails_before_measuring(
    tmp_path: Path,
    server: LoopbackServer,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    command: list[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    where = str(blocker / "out" / ("results.json" if flag == "--json" else ""))
    url = ["--url", server.url] if command == ["bench"] else ["-t", f"peagle-k3={server.url}"]
    before = server.counters.requests
    code = main(
        [*command, *url, "-c", "1", "-n", "2", "--max-tokens", "2", "--warmup", "0",
         "--dataset", _chats(tmp_path), flag, where]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert f"{flag}: cannot create" in err
    assert "Traceback" not in err
    assert server.counters.requests == before  # nothing was measured (and lost)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "is a directory"),
        ("[1, 2]", "results.json[0]: is int, not a mapping"),
        ('{"levels": "x"}', "has no `levels` list"),
        ('{"levels": [{"no": "concurrency"}]}', "levels[0]: has no concurrency"),
        ("{}", "not a bench result"),
    ],
)
@pytest.mark.parametrize("command", [["bench", "compare"], ["bench", "recommend-k"]])
def test_unusable_results_file_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    problem: str,
    command: list[str],
) -> None:
    path = tmp_path / "results.json"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    code = main([*command, "--results", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: --results: ") and problem in err
    assert "Traceback" not in err


def test_targets_file_that_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "compare", "-f", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --file: ") and "is a directory" in err and "Traceback" not in err


def test_kind_for_an_unknown_label_or_kind_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peagle_deploy.bench.compare import Comparison
    from peagle_deploy.bench.runner import LevelResult, SweepResult

    run = SweepResult(
        label="peagle-k3",
        target="http://x/v1",
        model="m",
        dataset="humaneval",
        config={},
        levels=[LevelResult(concurrency=1, metrics={"output_throughput": 10.0, "completed": 1})],
        started_at="",
        finished_at="",
    )
    path = tmp_path / "results.json"
    path.write_text(json.dumps(Comparison([run]).to_dict()))
    for kind, problem in (("peagle-k7=eagle3", "no configuration is labelled 'peagle-k7'"),
                          ("peagle-k3=bogus", "'bogus' is not a configuration kind")):  # fmt: skip
        assert main(["bench", "compare", "--results", str(path), "--kind", kind]) == 2
        assert problem in capsys.readouterr().err
    assert main(["bench", "compare", "--results", str(path), "--kind", "peagle-k3=eagle3"]) == 0


def test_loopback_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code = main(["emulator", "loopback", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err


def _free_port() -> int:
    import socket

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_url_says_nothing_listens_there(capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    code = main(["bench", "--url", f"http://127.0.0.1:{port}/v1", "-c", "1", "-n", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"--url: nothing listens at http://127.0.0.1:{port} (connection refused)" in err
    assert "did not list a model" not in err and "Traceback" not in err


def test_a_url_target_is_labelled_by_its_model(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["bench", "--url", server.url, "-c", "1", "-n", "1", "--max-tokens", "2",
         "--warmup", "0", "--dataset", _chats(tmp_path), "--json", "-"]
    )  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["label"] == "loopback"  # the served model, not 127.0.0.1:<port>
    assert doc["target"] == server.url


def test_compare_results_with_one_label_twice_names_results_and_relabels(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for name in ("a.json", "b.json"):
        path = tmp_path / name
        code = main(
            ["bench", "--url", server.url, "--label", "peagle-k3", "-c", "1", "-n", "1",
             "--max-tokens", "2", "--warmup", "0", "--dataset", _chats(tmp_path),
             "--json", str(path)]
        )  # fmt: skip
        assert code == 0
        runs.append(path)
    capsys.readouterr()
    assert main(["bench", "compare", "--results", str(runs[0]), "--results", str(runs[1])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --results: ") and "--target" not in err
    assert f"--results NEW-LABEL={runs[1]}" in err
    code = main(
        ["bench", "compare", "--results", str(runs[0]), "--results", f"peagle-k3-b={runs[1]}",
         "--json", "-"]
    )  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in doc["runs"]] == ["peagle-k3", "peagle-k3-b"]


def test_workers_flag_runs_worker_processes(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    before = server.counters.requests
    code = main(
        ["bench", "--url", server.url, "-c", "4", "-n", "6", "--max-tokens", "2",
         "--warmup", "0", "--workers", "2", "--dataset", _chats(tmp_path), "--json", "-"]
    )  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"]["workers"] == 2
    assert doc["levels"][0]["completed"] == 6
    assert server.counters.requests - before == 6


def test_help_says_json_takes_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "compare", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--results" in out and "LABEL=PATH" in out
    assert "--workers" in out


def test_labels_are_printed_as_plain_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A label is user text: `[/]` or `[bold]` in it is printed, not read as rich markup
    (a lone `[/]` used to end the command with a MarkupError traceback)."""
    level = {"concurrency": 1, "completed": 1, "failed": 0, "output_throughput": 10.0}
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"label": "[/]peagle-[bold]k3", "levels": [level]}))
    assert main(["bench", "compare", "--results", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[/]peagle-[bold]k3" in out


def test_cli_target_defaults_are_the_targets_own() -> None:
    """`--help` shows literals (no bench import at start-up); they must be the targets'."""
    import inspect
    from dataclasses import fields

    from peagle_deploy.bench import stream
    from peagle_deploy.bench.sagemaker import SageMakerTarget
    from peagle_deploy.bench.targets import OpenAITarget
    from peagle_deploy.cli.bench_flags import RunFlags

    cli = {f.name: f.default for f in fields(RunFlags)}
    assert cli["request_timeout"] == stream.REQUEST_TIMEOUT_S
    assert cli["logs_delay"] == stream.LOGS_DELAY_S
    for target in (OpenAITarget, SageMakerTarget):
        params = inspect.signature(target.__init__).parameters
        assert params["request_timeout_s"].default == stream.REQUEST_TIMEOUT_S
    logs = inspect.signature(SageMakerTarget.__init__).parameters["logs_delay_s"]
    assert logs.default == stream.LOGS_DELAY_S
