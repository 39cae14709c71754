"""Process settings of the Functions module (``TRELLIS_FUNCTIONS_*``)."""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from trellis.settings import BOOL, SECONDS, TEXT, Setting, is_production
from trellis.work_queue import QueueSettings

# After-triggers: retried after about 10 s, 1 min and 10 min, then marked failed (four attempts).
RETRY_SECONDS = (10.0, 60.0, 600.0)
# A claimed run is due again after this long: longer than the time limit, so a run is never started twice
# while the first may still be running; a process killed mid-run loses nothing.
LEASE_SECONDS = 60.0
RUNNERS = 4
POLL_SECONDS = 1.0
TIME_LIMIT_SECONDS = 10.0

QUEUE_DEFAULTS = QueueSettings(RETRY_SECONDS, LEASE_SECONDS, RUNNERS, POLL_SECONDS)
SETTINGS = (
    Setting("FUNCTIONS_PATH", TEXT, None, "the folder of the functions files", shown="<instance folder>/functions"),
    Setting(
        "FUNCTIONS_RELOAD",
        BOOL,
        None,
        "import the files again when one is added, changed or removed (within 2 s)",
        shown="true outside production",
    ),
    Setting(
        "FUNCTIONS_TIME_LIMIT_SECONDS",
        SECONDS,
        TIME_LIMIT_SECONDS,
        "how long one run of a function (or a file's import) may take before it is stopped",
    ),
    *QUEUE_DEFAULTS.declare(
        "FUNCTIONS",
        retry="delays before each retry of a failed after-trigger (attempts = delays + 1)",
        lease="how long a claimed after-trigger run is held before another process may run it again "
        "(longer than the time limit)",
        senders="after-trigger runs at once per process",
        poll="how often idle processes look for due after-trigger runs and schedules",
    ),
)


def folder(app: Flask) -> Path:
    configured = app.config.get("FUNCTIONS_PATH")
    return Path(configured).resolve() if configured else (Path(app.instance_path) / "functions").resolve()


def reloads(app: Flask) -> bool:
    configured = app.config.get("FUNCTIONS_RELOAD")
    return (not is_production(app)) if configured is None else bool(configured)


def queue_settings(app: Flask) -> QueueSettings:
    return QUEUE_DEFAULTS.read(app.config, "FUNCTIONS")
