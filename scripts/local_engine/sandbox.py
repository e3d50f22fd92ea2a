"""A SageMaker-like sandbox without a container: private mounts and a private network.

SageMaker mounts the model at /opt/ml/model and each additional model data source at
/opt/ml/additional-model-data-sources/<channel>, and the container listens on port 8080.
Several engines on one machine (tests of several worktrees, a benchmark) would collide on
both, so as root each engine runs in its own mount and network namespace
(`unshare --mount --net`): `python sandbox.py SPEC` is the first program inside it; it
brings the namespace's loopback up, mounts a private tmpfs on /opt/ml and on /tmp (the
supervisor writes /tmp/supervisord.conf and its pid file there), binds the model
directories read-only where SageMaker mounts them (and back into /tmp whatever of the
engine's own files lives there), and execs the entrypoint. Nothing is visible outside.

`Forwarder` makes the engine's 127.0.0.1:8080 reachable from the host's loopback: it
listens on a free host port and opens each upstream connection from a thread that has
joined the engine's network namespace (setns(2) changes only the calling thread).

Standard library only (ctypes for mount(2) and setns(2)): it runs under the engine's
Python before anything else is imported.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import queue
import socket
import struct
import sys
import threading
from pathlib import Path

MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def bind_read_only(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    mount(str(source), str(target), None, MS_BIND, None)
    mount("none", str(target), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None)


def loopback_up() -> None:
    """`ip link set lo up` without iproute2 (a fresh network namespace has lo down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def enter(spec: dict[str, object]) -> None:
    """Inside fresh namespaces: loopback up, private /tmp and /opt/ml, the model binds,
    then exec the command (which keeps this process id)."""
    loopback_up()
    mounts = spec["mounts"]
    keep = spec["keep"]
    assert isinstance(mounts, dict) and isinstance(keep, list)
    # Sources may live under /tmp: open them before /tmp is covered.
    fds = {t: os.open(s, os.O_RDONLY | os.O_DIRECTORY) for t, s in mounts.items()}
    kept = {k: os.open(k, os.O_RDONLY | os.O_DIRECTORY) for k in keep if _under_tmp(k)}
    for root in ("/opt/ml", "/tmp"):
        Path(root).mkdir(parents=True, exist_ok=True)
        mount("tmpfs", root, "tmpfs", 0, "mode=1777,size=2g")
    for target, fd in fds.items():
        bind_read_only(Path(f"/proc/self/fd/{fd}"), Path(target))
        os.close(fd)
    for path, fd in kept.items():  # the engine's own files (its venv, ...) stay in reach
        Path(path).mkdir(parents=True, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND, None)
        os.close(fd)
    argv = spec["argv"]
    assert isinstance(argv, list)
    os.execvp(argv[0], argv)


def _under_tmp(path: str) -> bool:
    return os.path.realpath(path).startswith("/tmp/")


def command(
    spec_mounts: dict[str, Path], argv: list[str], python: str, keep: list[Path]
) -> list[str]:
    """The argv that starts `argv` in new namespaces with `spec_mounts` (target -> source);
    the directories of `keep` that live under /tmp are bound into the private /tmp."""
    spec = {
        "mounts": {t: str(s) for t, s in spec_mounts.items()},
        "keep": [os.path.realpath(k) for k in keep],
        "argv": argv,
    }
    return [
        "unshare",
        "--mount",
        "--net",
        "--propagation",
        "private",
        python,
        __file__,
        json.dumps(spec),
    ]


def _net_ns(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _setns(pid: int) -> None:
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"setns into the network of {pid}")
    finally:
        os.close(fd)


class Forwarder:
    """127.0.0.1:<port> on the host -> 127.0.0.1:<upstream_port> in process `pid`'s network."""

    def __init__(self, pid: int, upstream_port: int) -> None:
        self.pid = pid
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._dials: queue.Queue[queue.Queue[socket.socket | OSError] | None] = queue.Queue()
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._dialer, name="engine-dialer", daemon=True),
            threading.Thread(target=self._accept, name="engine-forwarder", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _dialer(self) -> None:
        """Joins the engine's network (once it has its own) and makes every upstream
        socket there."""
        joined = False
        while (reply := self._dials.get()) is not None:
            try:
                if not joined:
                    if _net_ns(self.pid) == _net_ns(os.getpid()):
                        raise ConnectionRefusedError("the engine has no network of its own yet")
                    _setns(self.pid)
                    joined = True
                reply.put(socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10))
            except OSError as e:
                reply.put(e)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            reply: queue.Queue[socket.socket | OSError] = queue.Queue()
            self._dials.put(reply)
            upstream = reply.get()
            if isinstance(upstream, OSError):
                client.close()
                continue
            upstream.settimeout(None)
            threading.Thread(target=_relay, args=(client, upstream), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self._dials.put(None)
        with contextlib.suppress(OSError):
            self._listener.close()


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            src.shutdown(socket.SHUT_RD)


if __name__ == "__main__":
    enter(json.loads(sys.argv[1]))
