"""A real HTTP/1.1 server on loopback that answers every request with an error status
and a chunked body that never ends (test stand-in for a broken or hostile endpoint).

It writes as fast as the client reads and stops when the client closes the connection;
`sent` then holds the bytes each connection took. Used by the bench hostile tests and by
benchmarks/bench_error_body.py.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

CHUNK = b'{"message": "' + b"x" * (64 << 10)
_FRAME = f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n"


class EndlessErrorServer:
    def __init__(self, status: int = 400, reason: str = "Bad Request") -> None:
        self.status_line = f"HTTP/1.1 {status} {reason}\r\n".encode()
        self.sent: list[int] = []
        """Bytes of body written to each connection that has ended, in order of ending."""
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> EndlessErrorServer:
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._listener.close()
        with self._lock:
            for conn in self._conns:
                conn.close()

    def wait_ended(self, count: int, timeout: float) -> bool:
        """Whether `count` connections have ended within `timeout` seconds."""
        with self._ended:
            return self._ended.wait_for(lambda: len(self.sent) >= count, timeout)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            worker = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            worker.start()

    def _answer(self, conn: socket.socket) -> None:
        written = 0
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            conn.sendall(
                self.status_line
                + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            while True:
                conn.sendall(_FRAME)
                written += len(CHUNK)
        except OSError:
            pass
        finally:
            conn.close()
            with self._ended:
                self.sent.append(written)
                self._ended.notify_all()
