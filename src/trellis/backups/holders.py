"""Who holds a running backup or the restore lock: a holder's id names its host and process, so a holder
on this host is known dead as soon as its process is gone; one elsewhere once it stops renewing."""

from __future__ import annotations

import os
import secrets
import socket
from datetime import timedelta
from typing import Any

from .. import db

LOCK_STALE_SECONDS = 600.0  # PostgreSQL: the restore lock is renewed every 30 s from another connection


def new_holder() -> str:
    """A new holder's id: this host, this process, and a random part."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


def dead(holder: str, heartbeat: Any) -> bool:
    """Whether the holder is gone: on this host, its process; elsewhere, no renewal for ``LOCK_STALE_SECONDS``."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname()[:40] and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return heartbeat < db.utcnow() - timedelta(seconds=LOCK_STALE_SECONDS)
