"""Serving entry point.

    python wsgi.py                    REST + Socket.IO on HOST:PORT (default 127.0.0.1:3000)
    flask --app wsgi trellis ...      the admin CLI

Under eventlet (the default async mode) the standard library must be patched before anything else
imports sockets or threads, so this happens first. When the flask CLI loads this file, Flask is
already imported and nothing is served: the CLI runs unpatched.
"""
import os
import sys

if os.environ.get("TRELLIS_ASYNC_MODE", "eventlet") == "eventlet" and "flask" not in sys.modules:
    import eventlet

    eventlet.monkey_patch()

from trellis import create_app  # noqa: E402
from trellis.safety import eventlet_server_options  # noqa: E402

app = create_app()

if __name__ == "__main__":
    socketio = app.extensions["socketio"]
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "3000"))
    print(f"Trellis serving on http://{host}:{port} (swagger: http://{host}:{port}/swagger)", flush=True)
    options = eventlet_server_options() if app.config["ASYNC_MODE"] == "eventlet" else {}
    socketio.run(app, host=host, port=port, log_output=os.environ.get("TRELLIS_ACCESS_LOG") == "1", **options)
