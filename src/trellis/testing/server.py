"""Entry point of the live server used by tests and benchmarks: the same as ``python wsgi.py``, importable."""

import os
import warnings

warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")

# Read before any import, as in wsgi.py.
if os.environ.get("TRELLIS_ASYNC_MODE", "eventlet").strip().lower() == "eventlet":
    import eventlet

    eventlet.monkey_patch()

from trellis import create_app  # noqa: E402
from trellis.server.serve import serve  # noqa: E402
from trellis.testing.ports import READY  # noqa: E402


def main() -> None:
    """Serve on ``HOST``/``PORT`` from the environment (also what a forked test server runs)."""
    port = int(os.environ["PORT"])
    # Printed once the port is bound: a test waiting for this process knows /health is its own answer.
    serve(create_app(), os.environ.get("HOST", "127.0.0.1"), port, banner=f"{READY} {port} {os.getpid()}")


if __name__ == "__main__":
    main()
