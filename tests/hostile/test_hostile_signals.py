"""SIGTERM to a real `peagle bench --workers 2` while both workers have a stream open.

A CI job that is cancelled, a container being stopped, `timeout`: they send SIGTERM to the
process they started, which is the parent. The parent must stop both workers and
multiprocessing's resource tracker promptly, with the workers' streams closed, instead of
vanishing and leaving them to run until --request-timeout (600 s here).

Real processes throughout: the CLI as a subprocess, its two spawned workers, and a
loopback server that answers chat completions with a stream that never sends an event.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 30.0
"""Generous on purpose (the request timeout is 600 s): a bound on "promptly", not a timing."""


class SilentStreamServer:
    """POST: 200 with an SSE stream that sends nothing and stays open; anything else: 404.
    Counts the streams open now and the ones the client has closed."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._lock = threading.Condition()
        self.open_streams = 0
        self.closed_streams = 0
        self._conns: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        self._listener.close()
        for conn in self._conns:
            conn.close()

    def wait(self, predicate: object, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(predicate, timeout)  # type: ignore[arg-type]

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            if not head.startswith(b"POST "):
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            with self._lock:
                self.open_streams += 1
                self._lock.notify_all()
            try:
                while conn.recv(65536):  # the request body, then nothing until it closes
                    pass
            except OSError:
                pass
            with self._lock:
                self.open_streams -= 1
                self.closed_streams += 1
                self._lock.notify_all()


@pytest.fixture
def server() -> Iterator[SilentStreamServer]:
    srv = SilentStreamServer()
    srv.start()
    yield srv
    srv.stop()


def _children(pid: int) -> dict[int, str]:
    """pid -> command line of the processes whose parent is `pid`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found[int(entry.name)] = cmdline
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie left for a reaper that never comes counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _peagle(*argv: str) -> list[str]:
    script = Path(sys.executable).with_name("peagle")
    if script.exists():
        return [str(script), *argv]
    return [sys.executable, "-m", "peagle_deploy.cli.app", *argv]


def test_sigterm_stops_both_workers_and_the_resource_tracker(server: SilentStreamServer) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEAGLE_")}
    argv = [
        "bench", "--url", server.url, "--model", "m", "--workers", "2",
        "-c", "2", "-n", "4", "--warmup", "0", "--request-timeout", "600",
    ]  # fmt: skip
    proc = subprocess.Popen(
        _peagle(*argv),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    children: dict[int, str] = {}
    try:
        assert server.wait(lambda: server.open_streams == 2, HANG_GUARD_S), "no two streams"
        children = _children(proc.pid)
        workers = [p for p, cmd in children.items() if "multiprocessing.spawn" in cmd]
        trackers = [p for p, cmd in children.items() if "resource_tracker" in cmd]
        assert len(workers) == 2 and len(trackers) == 1, children

        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert err.strip().splitlines()[-1] == "error: terminated (SIGTERM)", err
        assert "Traceback" not in err
        assert _wait_gone([*workers, *trackers], HANG_GUARD_S) == []
        assert server.wait(lambda: server.open_streams == 0, HANG_GUARD_S)
        assert server.closed_streams == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
