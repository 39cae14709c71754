"""Password hashing with argon2 (argon2-cffi), shared by admin accounts and module users.

The cost profile is process-wide: ``default`` is OWASP's argon2id recommendation (m=19 MiB, t=2, p=1);
the test suite selects ``test`` (argon2's cheapest parameters) so thousands of hashes don't dominate its
run time. Production refuses ``test`` (see ``trellis.settings``). Hashes made with other parameters
(argon2-cffi's RFC 9106 low-memory profile, the earlier default) still verify and are re-hashed at the
next sign-in.

Why not RFC 9106's low-memory profile (m=64 MiB, t=3, p=4): one verify takes several times longer and
its four lanes compete for the same cores, so sign-in throughput fell to a few requests per second
(``bench/results/core.md#argon2-profile``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from argon2 import Parameters, PasswordHasher, Type, profiles
from argon2.exceptions import InvalidHashError, VerificationError

from .offload import core_slots, off_hub

T = TypeVar("T")

OWASP_ARGON2ID = Parameters(
    type=Type.ID, version=19, salt_len=16, hash_len=32, time_cost=2, memory_cost=19 * 1024, parallelism=1
)
PROFILES = {"default": OWASP_ARGON2ID, "test": profiles.CHEAPEST}


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


# A hash holds 19 MiB and one CPU (one lane) for tens of milliseconds: at most one per core at a time.
_SLOTS = core_slots()


def _off_hub(func: Callable[..., T], *args: Any) -> T:
    """Run argon2 without freezing the process (see ``trellis.offload``)."""
    return off_hub(_SLOTS, func, *args)


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
