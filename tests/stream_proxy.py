"""A loopback TCP proxy in front of the page that can make one visitor's event stream lag behind the page,
as a slow link or a busy client machine does: real sockets, real bytes, nothing of Gradio's replaced.

Armed (`hold_run_end`), it holds the first event stream (`/queue/data`) it carries until the page has sent
that stream's close (the session's runs have all ended), then lets through everything before the first
`process_completed`, and the rest only once a later `/queue/join` (the visitor's next press, e.g. Stop)
has had its answer. So the visitor sees the run streaming, presses Stop after the page has closed the
stream, and reads the close only after its Stop was sent: the order the soak hit about once in 100 Stops.
"""

from __future__ import annotations

import socket
import threading
import time

COMPLETED, CLOSE = b'"msg":"process_completed"', b'"msg":"close_stream"'


class LaggingProxy:
    def __init__(self, upstream_port: int, release_after_s: float = 0.3, hold_timeout_s: float = 120.0):
        self.upstream = ("127.0.0.1", upstream_port)
        self.release_after_s, self.hold_timeout_s = release_after_s, hold_timeout_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._armed = False
        self._joined = threading.Event()  # a /queue/join answered after the held stream's run ended
        self._run_ended = threading.Event()
        self.held = threading.Event()  # the hold happened: the stream's end reached the visitor after a join
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def hold_run_end(self) -> None:
        self._armed = True

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(down,), daemon=True, name="proxy-conn").start()

    def _serve(self, down: socket.socket) -> None:
        up = socket.create_connection(self.upstream)
        first = down.recv(65536)
        line = first.split(b"\r\n", 1)[0]
        with self._lock:  # only the first event stream after arming is held
            hold = self._armed and b"/queue/data" in line
            self._armed = self._armed and not hold
        up.sendall(first)
        threading.Thread(target=_pump, args=(down, up), daemon=True, name="proxy-up").start()
        if hold:
            self._hold_stream(up, down)
        else:
            _pump(up, down, on_data=self._answered if b"/queue/join" in line else None)

    def _answered(self, _data: bytes) -> None:
        if self._run_ended.is_set():
            self._joined.set()

    def _hold_stream(self, up: socket.socket, down: socket.socket) -> None:
        """Everything up to the run's completion once the page has closed the stream; the rest after a join."""
        buffer = b""
        while CLOSE not in buffer:
            data = up.recv(65536)
            if not data:
                break
            buffer += data
        cut = buffer.rfind(b"data:", 0, max(buffer.find(COMPLETED), 0))
        cut = cut if cut >= 0 and COMPLETED in buffer else len(buffer)
        self._run_ended.set()
        down.sendall(buffer[:cut])
        if self._joined.wait(self.hold_timeout_s):
            time.sleep(self.release_after_s)  # the visitor registers its pressed event meanwhile
            self.held.set()
        down.sendall(buffer[cut:])
        _pump(up, down)


def _pump(src: socket.socket, dst: socket.socket, on_data=None) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
            if on_data is not None:
                on_data(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
