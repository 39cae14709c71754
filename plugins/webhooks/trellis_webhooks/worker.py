"""The background work of one serving process: queueing events as deliveries, and sending due deliveries.

Green threads (``Module.background``, started by ``trellis.server.serve``), every process running the same ones;
the database decides who does what:

- the dispatcher turns new events of the log into delivery rows, woken by ``events.subscribe`` and a poll;
  the rows it inserts already claimed (as many as the senders have room for) go straight to the senders;
- the claimer claims the other due deliveries (retries, another process's overflow, a dead worker's), up
  to ``DeliverySettings.claim_ahead`` held at once with the dispatcher's, and queues them
  for ``senders`` sender threads, so a slow receiver (up to 10 s) holds up one sender, not the others;
  claiming ahead of the senders makes claims (and outcome batches) bigger: one transaction for many
  deliveries, not one per free sender (``bench/results/webhooks.md``);
- a claim's slot is free once it is attempted; the recorder writes the senders' outcomes in batches, one
  transaction (one statement on PostgreSQL) for all that came in within ``RECORD_COALESCE_SECONDS``.
  Recording per attempt cost a commit (an fsync on PostgreSQL) per delivery; batched, 1,000 deliveries to
  a fast receiver take a few dozen commits (``bench/results/webhooks.md``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from flask import Flask

from trellis.background import ThrottledWarning, start_loop
from trellis.module_config import get as get_config

from . import deliveries
from .deliveries import Claimed, Runtime
from .sender import Outcome
from .settings import SEND_TIMEOUT_SECONDS

log = logging.getLogger(__name__)


# Woken by an event, the dispatcher waits this long so the events of a burst share one pass (a pass
# reads the active webhooks and the cursor: two queries per write otherwise).
DISPATCH_COALESCE_SECONDS = 0.05
# Woken by an outcome, the recorder waits this long so that the outcomes of a burst share one transaction
# (the log shows a delivery's outcome that much later; its receiver got it at once).
RECORD_COALESCE_SECONDS = 0.05


class Worker:
    def __init__(self, app: Flask, runtime: Runtime) -> None:
        self.app = app
        self.settings = runtime.settings
        self.sender = runtime.sender
        self.delivery_wanted = threading.Event()
        self.dispatch_wanted = threading.Event()
        self.outcomes_ready = threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0  # claimed and not yet attempted
        # (claim, allowPrivateTargets, until when its lease leaves time for an attempt): green under eventlet
        self._to_send: queue.Queue[tuple[Claimed, bool, float]] = queue.Queue()
        self._unsent: list[Claimed] = []  # claims given back: their lease ran short in the queue
        self._outcomes: list[tuple[Claimed, Outcome]] = []
        self._soonest_retry = float("inf")  # monotonic time of the earliest retry this process scheduled
        # Due deliveries may be waiting for room (a claim or a pass had more than it took): the senders wake
        # the claimer as they free up. Otherwise it claims on its poll and at retries' times only; claiming
        # after every outcome made mostly empty claims (bench/results/modules.md#webhook-deliveries).
        self._backlog = False
        self._unsubscribe: Callable[[], None] | None = None  # the dispatcher's subscription to the event log

    def start(self) -> None:
        poll = self.settings.poll_seconds
        loops = (
            # Not claimed: due deliveries stay due for the next claim.
            ("claim", "claiming due deliveries", self._claim_step, poll, self.delivery_wanted.wait),
            # Not recorded: the claims run out and the deliveries are attempted again (the step waits for outcomes).
            ("record", "recording delivery outcomes", self._record_step, 0.0, time.sleep),
            ("dispatch", "queueing events as deliveries", self._dispatch_step, poll, self.dispatch_wanted.wait),
        )
        for name, what, step, retry, pause in loops:
            start_loop(
                f"webhooks-{name}", f"webhooks: {what}", step, ThrottledWarning(log), retry_seconds=retry, pause=pause
            )
        for n in range(self.settings.senders):
            threading.Thread(target=self._send_loop, name=f"webhooks-send-{n}", daemon=True).start()

    # --- sending ---------------------------------------------------------------------------------------

    def _claim_step(self) -> None:
        self.delivery_wanted.clear()
        # Claim in chunks of at least one per sender (or when idle): a claim per freed sender was a
        # transaction per delivery or two.
        free = self._reserve(at_least=min(self.settings.senders, self.settings.claim_ahead))
        claimed: list[Claimed] = []
        if free:
            self._backlog = False  # this claim takes what is due: senders finishing meanwhile need not wake us
            try:
                with self.app.app_context():
                    config = get_config("webhooks")
                    if config["active"]:
                        claimed = deliveries.claim_due(free)
                        self._hand_to_senders(claimed, bool(config["allowPrivateTargets"]))
            finally:
                self._give_back(free - len(claimed))
            if len(claimed) == free:  # due deliveries may be left behind: claim again as senders free up
                self._backlog = True
        if claimed and len(claimed) == free:  # all claimed: the senders wake us as they free up
            self.delivery_wanted.wait(self.settings.poll_seconds)
        elif not claimed and self._in_flight:  # waiting for the senders to free room
            self.delivery_wanted.wait(self.settings.poll_seconds)
        else:
            self.delivery_wanted.wait(self._idle_seconds())

    def _reserve(self, at_least: int = 1) -> int:
        """Room for new claims, counted in flight at once (the claimer and the dispatcher both claim): all
        that is free when that is ``at_least`` or nothing is in flight, else 0."""
        with self._lock:
            free = self.settings.claim_ahead - self._in_flight
            if free < at_least and not (free > 0 and self._in_flight == 0):
                return 0
            self._in_flight += free
            return free

    def _give_back(self, unused: int) -> None:
        """Free slots (unused, or attempted); with a backlog the claimer wakes to fill them. Whoever frees
        them must wake it: a dispatcher's pass holding all room while the senders ran dry left a burst
        waiting a whole poll (1 s) for its next claim."""
        with self._lock:
            self._in_flight -= unused
        if unused and self._backlog:
            self.delivery_wanted.set()

    def _hand_to_senders(self, claimed: list[Claimed], allow_private: bool) -> None:
        # An attempt may outlast its 10 s limit (a receiver trickling its answer): one that starts later
        # than this could still be running when the lease ends and another worker sends it. (A lease too
        # short for that margin, as tests set, keeps half of itself for the attempt.)
        lease = self.settings.lease_seconds
        send_by = time.monotonic() + max(lease - 2 * SEND_TIMEOUT_SECONDS, lease / 2)
        for one in claimed:
            self._to_send.put((one, allow_private, send_by))

    def _idle_seconds(self) -> float:
        """Until the next poll, or sooner when a retry this process scheduled falls due first."""
        wait = self.settings.poll_seconds
        soonest = self._soonest_retry - time.monotonic()
        if soonest < wait:
            self._soonest_retry = float("inf")
            wait = max(soonest, 0.0)
        return wait

    def _send_loop(self) -> None:
        while True:
            self._send_next()

    def _send_next(self) -> None:
        """Attempt the next queued claim, or give it back unattempted when its lease has run short."""
        claimed, allow_private, send_by = self._to_send.get()
        if time.monotonic() > send_by:  # slow receivers held the senders
            with self._lock:
                self._unsent.append(claimed)
        else:
            outcome = self._attempt(claimed, allow_private)
            with self._lock:
                self._outcomes.append((claimed, outcome))
        self._give_back(1)  # free once attempted: its outcome waits for the recorder's next batch
        self.outcomes_ready.set()

    def _attempt(self, claimed: Claimed, allow_private: bool) -> Outcome:
        try:
            return deliveries.attempt(claimed, allow_private, self.sender)
        except Exception:
            log.exception("webhooks: delivery %s could not be attempted", claimed.id)
            return Outcome(False, None, "Internal error while sending (see the server log)")

    def _record_step(self) -> None:
        self.outcomes_ready.wait()
        time.sleep(RECORD_COALESCE_SECONDS)
        self.outcomes_ready.clear()
        if self._record_once():
            self.delivery_wanted.set()  # the claimer's next wait ends by the earliest retry

    def _record_once(self) -> bool:
        """Write the outcomes that have come in (one transaction) and give back the unattempted claims;
        whether a retry was scheduled."""
        with self._lock:
            batch, self._outcomes = self._outcomes, []
            unsent, self._unsent = self._unsent, []
        if not batch and not unsent:
            return False
        with self.app.app_context():
            if unsent:
                deliveries.release(unsent)
            statuses = deliveries.record(batch)
        retrying = False
        for (claimed, _outcome), status in zip(batch, statuses, strict=True):
            if status == deliveries.RETRYING:
                # The jittered delay is at least 90 % of the schedule's; from then on a claim finds it.
                due = self.settings.retry_seconds[claimed.attempts - 1] * (1 - deliveries.JITTER)
                self._soonest_retry = min(self._soonest_retry, time.monotonic() + due)
                retrying = True
        return retrying

    # --- queueing events -----------------------------------------------------------------------------------

    def _dispatch_step(self) -> None:
        from .dispatcher import subscribe

        if self._unsubscribe is None:
            with self.app.app_context():
                self._unsubscribe = subscribe(self.dispatch_wanted.set)
        self.dispatch_wanted.clear()
        busy = self._dispatch_once()
        # Another process holds the cursor: it may be finishing just before our event, so look again soon.
        if self.dispatch_wanted.wait(0.02 if busy else self.settings.poll_seconds) and not busy:
            time.sleep(DISPATCH_COALESCE_SECONDS)  # a burst of events: one pass, not one per event

    def _dispatch_once(self) -> bool:
        """Queue every event after the cursor, pass by pass, sending what each pass claimed; whether another
        process held the cursor."""
        from .dispatcher import Pass, one_pass

        while True:
            room = self._reserve()
            done = Pass()
            try:
                with self.app.app_context():
                    done = one_pass(room)
            finally:  # what a committed pass claimed is sent, even if the app context's teardown failed
                self._give_back(room - len(done.claimed))
                self._hand_to_senders(done.claimed, done.allow_private)
            if done.queued > len(done.claimed):  # more than our senders have room for: the claimers' share
                self._backlog = True
                self.delivery_wanted.set()
            if done.busy or not done.full:
                return done.busy


def start(app: Flask) -> None:
    """``Module.background``: this process's dispatcher, claimer and recorder."""
    Worker(app, deliveries.runtime_of(app)).start()
