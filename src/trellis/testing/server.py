"""Entry point of the live server used by tests: the same as ``python wsgi.py``, importable."""
import os

if os.environ.get("TRELLIS_ASYNC_MODE", "eventlet") == "eventlet":
    import eventlet

    eventlet.monkey_patch()

from trellis import create_app  # noqa: E402
from trellis.safety import eventlet_server_options  # noqa: E402

if __name__ == "__main__":
    app = create_app()
    options = eventlet_server_options() if app.config["ASYNC_MODE"] == "eventlet" else {}
    app.extensions["socketio"].run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ["PORT"]), **options)
