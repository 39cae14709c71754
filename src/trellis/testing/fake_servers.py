"""Serving a local stand-in for a third-party API (Twilio, FCM, Mailgun …) on 127.0.0.1 in tests."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from werkzeug.serving import make_server


class Served:
    """A WSGI app served in a thread; ``url`` is its base address, ``stop()`` takes it down early."""

    def __init__(self, app: Any) -> None:
        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)


@contextlib.contextmanager
def serve_wsgi(app: Any) -> Iterator[Served]:
    """Serve the WSGI ``app`` on a free loopback port for the duration of the block."""
    served = Served(app)
    try:
        yield served
    finally:
        served.stop()
