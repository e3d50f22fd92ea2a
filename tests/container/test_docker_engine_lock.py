"""The private dockerd is shared by every test run on the machine: only the last user
stops it (docker_engine.engine's fcntl locks), so one worktree's run never kills the
engine under another's."""

from __future__ import annotations

import threading
from pathlib import Path

import docker_engine
import pytest


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No Docker: 'started' / 'stopped' events instead of a dockerd."""
    events: list[str] = []
    running = [False]

    def start(_engine: docker_engine.Engine) -> None:
        running[0] = True
        events.append("started")

    def stop(_pidfile: Path) -> None:
        if running[0]:
            running[0] = False
            events.append("stopped")

    monkeypatch.setattr(docker_engine, "ENGINE_DIR", tmp_path)
    monkeypatch.setattr(docker_engine, "ensure_tools", lambda: None)
    monkeypatch.setattr(docker_engine, "_existing_engine", lambda: None)
    monkeypatch.setattr(docker_engine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(docker_engine, "_start_dockerd", start)
    monkeypatch.setattr(docker_engine, "_stop_dockerd", stop)
    monkeypatch.setattr(docker_engine.Engine, "answers", lambda self: running[0])
    return events


def test_the_last_user_stops_the_engine_and_no_one_before(fake_engine: list[str]) -> None:
    first_in, second_done = threading.Event(), threading.Event()

    def second_run() -> None:
        first_in.wait(10)
        with docker_engine.engine():
            fake_engine.append("second uses it")
        second_done.set()

    other = threading.Thread(target=second_run)
    other.start()
    with docker_engine.engine():
        first_in.set()
        assert second_done.wait(10)
        # The second run left while this one still uses the engine: it must not stop it.
        assert fake_engine == ["started", "second uses it"]
    other.join(10)
    assert fake_engine == ["started", "second uses it", "stopped"]


def test_a_lone_user_starts_and_stops_it(fake_engine: list[str]) -> None:
    with docker_engine.engine():
        pass
    with docker_engine.engine():
        pass
    assert fake_engine == ["started", "stopped", "started", "stopped"]


def test_serialized_runs_do_not_overlap(fake_engine: list[str]) -> None:
    inside: list[int] = []
    overlaps: list[int] = []

    def run() -> None:
        with docker_engine.serialized("images"):
            inside.append(1)
            overlaps.append(len(inside))
            threading.Event().wait(0.05)
            inside.pop()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert overlaps == [1, 1, 1]
