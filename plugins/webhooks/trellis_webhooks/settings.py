"""Process settings of the delivery machinery (``TRELLIS_WEBHOOKS_*`` environment variables).

They are settings, not module config, because they shape the background workers of each process: the
contract fixes the retry schedule, and tests shorten it (``TRELLIS_WEBHOOKS_RETRY_SECONDS=0.2,0.2``).
"""

from __future__ import annotations

from dataclasses import dataclass

from trellis.work_queue import QueueSettings

# About 10 s, 1 min, 10 min, 1 h, 6 h: five retries after the first attempt, six attempts in all.
RETRY_SECONDS = (10.0, 60.0, 600.0, 3600.0, 21600.0)
# A claimed delivery is due again after this long: a worker that died mid-delivery loses nothing. Longer
# than a send can take (10 s timeout) so that a slow delivery is not sent twice.
LEASE_SECONDS = 60.0
SENDERS = 16  # deliveries in flight at once per process
POLL_SECONDS = 1.0  # how often idle workers look for due deliveries and new events
SEND_TIMEOUT_SECONDS = 10.0  # the contract's limit on one attempt


@dataclass(frozen=True)
class DeliverySettings(QueueSettings):
    """The queue's settings and how many deliveries a process may hold claimed ahead of its senders."""

    @property
    def claim_ahead(self) -> int:
        """How many deliveries a process may hold claimed at once: the senders' share of work queued behind
        them, as long as the last one queued is still sent well within its lease (each waits at most one
        10 s attempt per round of senders before its own): 3 rounds with the default 60 s lease, 1 with a
        lease under 40 s. Bigger claims and outcome batches cost fewer transactions per delivery."""
        rounds = max(1, int(self.lease_seconds // (2 * SEND_TIMEOUT_SECONDS)))
        return self.senders * rounds


DEFAULTS = DeliverySettings(RETRY_SECONDS, LEASE_SECONDS, SENDERS, POLL_SECONDS)
SETTINGS = DEFAULTS.declare(
    "WEBHOOKS",
    retry="delays before each retry (attempts = delays + 1)",
    lease="how long a claimed delivery is held before another worker may send it again",
    senders="attempts in flight at once per process (sender threads); a process holds up to 3× as many "
    "deliveries claimed ahead of them (1× with a lease under 40 s), so that each is still sent well "
    "within its lease",
    poll="how often idle workers look for due deliveries and missed events",
)
