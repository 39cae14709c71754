"""Serving entry point.

    python wsgi.py                    REST + Socket.IO on HOST:PORT (default 127.0.0.1:3000)
    flask --app wsgi trellis ...      the admin CLI

Under eventlet (the default async mode) the standard library must be patched before anything else
imports sockets or threads, so this happens first. When the flask CLI loads this file, Flask is
already imported and nothing is served: the CLI runs unpatched.
"""

import os
import sys
import warnings

# eventlet announces its own deprecation on import; it is the async mode the design asks for, and the
# notice is not something an operator can act on (the tests filter it the same way).
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")

# Read before any import (trellis.settings imports Flask), the way its table reads it: any case, spaces trimmed.
if os.environ.get("TRELLIS_ASYNC_MODE", "eventlet").strip().lower() == "eventlet" and "flask" not in sys.modules:
    import eventlet

    eventlet.monkey_patch()

from trellis import create_app  # noqa: E402
from trellis.server.serve import serve  # noqa: E402

app = create_app()

if __name__ == "__main__":
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "3000"))
    serve(
        app,
        host,
        port,
        log_output=app.config["ACCESS_LOG"],
        banner=f"Trellis serving on http://{host}:{port} (swagger: http://{host}:{port}/swagger)",
    )
