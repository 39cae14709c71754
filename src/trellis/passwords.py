"""Password hashing with argon2 (argon2-cffi), shared by admin accounts and module users.

The cost profile is process-wide: ``default`` is argon2-cffi's RFC 9106 low-memory profile; the test
suite selects ``test`` (argon2's cheapest parameters) so thousands of hashes don't dominate its run
time. Production refuses ``test`` (see ``trellis.settings``).
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, TypeVar

from argon2 import PasswordHasher, profiles
from argon2.exceptions import InvalidHashError, VerificationError

T = TypeVar("T")

PROFILES = {"default": profiles.RFC_9106_LOW_MEMORY, "test": profiles.CHEAPEST}


class _Hashing:
    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.hasher = PasswordHasher.from_parameters(PROFILES[profile])
        # Verified against when the account does not exist, so both paths cost one argon2 verify.
        self.dummy_hash = self.hasher.hash("trellis-timing-equaliser")


_current = _Hashing("default")


def configure(profile: str) -> None:
    global _current
    if profile not in PROFILES:
        raise ValueError(f"unknown password profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if profile != _current.profile:
        _current = _Hashing(profile)


# A hash holds 64 MiB and a CPU for tens of milliseconds: at most one per core at a time.
_SLOTS = threading.BoundedSemaphore(os.cpu_count() or 1)


def _off_hub(func: Callable[..., T], *args: Any) -> T:
    """Run argon2 without freezing the process: under eventlet the calling thread is the hub that
    serves every request, so the (GIL-releasing) C work goes to eventlet's pool of OS threads."""
    with _SLOTS:
        if "eventlet" in sys.modules:
            from eventlet import patcher, tpool

            if patcher.is_monkey_patched("thread"):
                return tpool.execute(func, *args)
        return func(*args)


def hash_password(password: str) -> str:
    return _off_hub(_current.hasher.hash, password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """Constant-cost check; ``password_hash=None`` (unknown account) still runs a full verify."""
    try:
        ok = _off_hub(_current.hasher.verify, password_hash or _current.dummy_hash, password)
    except (VerificationError, InvalidHashError):
        return False
    return ok and password_hash is not None


def needs_rehash(password_hash: str) -> bool:
    return _current.hasher.check_needs_rehash(password_hash)
