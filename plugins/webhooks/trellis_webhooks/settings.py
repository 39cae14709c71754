"""Process settings of the delivery machinery (``TRELLIS_WEBHOOKS_*`` environment variables).

They are settings, not module config, because they shape the background workers of each process: the
contract fixes the retry schedule, and tests shorten it (``TRELLIS_WEBHOOKS_RETRY_SECONDS=0.2,0.2``).
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask

from trellis.settings import COUNT, SECONDS, SECONDS_LIST, Setting

# About 10 s, 1 min, 10 min, 1 h, 6 h: five retries after the first attempt, six attempts in all.
RETRY_SECONDS = (10.0, 60.0, 600.0, 3600.0, 21600.0)
# A claimed delivery is due again after this long: a worker that died mid-delivery loses nothing. Longer
# than a send can take (10 s timeout) so that a slow delivery is not sent twice.
LEASE_SECONDS = 60.0
SENDERS = 16  # deliveries in flight at once per process
POLL_SECONDS = 1.0  # how often idle workers look for due deliveries and new events
SEND_TIMEOUT_SECONDS = 10.0  # the contract's limit on one attempt

SETTINGS = (
    Setting(
        "WEBHOOKS_RETRY_SECONDS",
        SECONDS_LIST,
        RETRY_SECONDS,
        "delays before each retry (attempts = delays + 1)",
    ),
    Setting(
        "WEBHOOKS_LEASE_SECONDS",
        SECONDS,
        LEASE_SECONDS,
        "how long a claimed delivery is held before another worker may send it again",
    ),
    Setting(
        "WEBHOOKS_SENDERS",
        COUNT,
        SENDERS,
        "attempts in flight at once per process (sender threads); a process holds up to 3× as many "
        "deliveries claimed ahead of them (1× with a lease under 40 s), so that each is still sent well "
        "within its lease",
    ),
    Setting(
        "WEBHOOKS_POLL_SECONDS",
        SECONDS,
        POLL_SECONDS,
        "how often idle workers look for due deliveries and missed events",
    ),
)


@dataclass(frozen=True)
class DeliverySettings:
    retry_seconds: tuple[float, ...] = RETRY_SECONDS
    lease_seconds: float = LEASE_SECONDS
    senders: int = SENDERS
    poll_seconds: float = POLL_SECONDS

    @property
    def max_attempts(self) -> int:
        return len(self.retry_seconds) + 1

    @property
    def claim_ahead(self) -> int:
        """How many deliveries a process may hold claimed at once: the senders' share of work queued behind
        them, as long as the last one queued is still sent well within its lease (each waits at most one
        10 s attempt per round of senders before its own): 3 rounds with the default 60 s lease, 1 with a
        lease under 40 s. Bigger claims and outcome batches cost fewer transactions per delivery."""
        rounds = max(1, int(self.lease_seconds // (2 * SEND_TIMEOUT_SECONDS)))
        return self.senders * rounds

    @classmethod
    def from_app(cls, app: Flask) -> DeliverySettings:
        config = app.config
        return cls(
            retry_seconds=config["WEBHOOKS_RETRY_SECONDS"],
            lease_seconds=config["WEBHOOKS_LEASE_SECONDS"],
            senders=config["WEBHOOKS_SENDERS"],
            poll_seconds=config["WEBHOOKS_POLL_SECONDS"],
        )
