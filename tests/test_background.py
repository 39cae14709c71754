"""The background helper: loops restarted after a failure, warnings throttled to one a minute, and the
Redis listener subscribing again after its connection is killed (a real Redis, CLIENT KILL)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid

import redis
from flask import Flask

from trellis import background

REDIS_URL = os.environ.get("TRELLIS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
log = logging.getLogger("trellis.test_background")
WAIT = 10.0  # the most a test waits for a background thread; it passes as soon as the thread has acted


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == log.name and r.levelno == logging.WARNING]


def test_warnings_are_throttled_to_one_a_minute(caplog):
    clock = Clock()
    warning = background.ThrottledWarning(log, clock=clock)
    logged = []
    with caplog.at_level(logging.WARNING, logger=log.name):
        for at in (0.0, 1.0, 59.9, 60.0, 61.0, 119.9, 120.0):
            clock.now = 1000.0 + at
            if warning("Redis failed at %s", at):
                logged.append(at)
    assert logged == [0.0, 60.0, 120.0]
    assert _warnings(caplog) == ["Redis failed at 0.0", "Redis failed at 60.0", "Redis failed at 120.0"]


def test_a_loop_that_raises_is_restarted_and_warns_once_a_minute(caplog):
    clock = Clock()
    calls = []
    pauses = []
    done = threading.Event()

    def step() -> None:
        calls.append(len(calls))
        clock.now += 20.0  # four failures 20 s apart: the first, and the fourth a minute later, are warned about
        if len(calls) <= 4:
            raise ConnectionError(f"failure {len(calls)}")
        done.set()

    with caplog.at_level(logging.WARNING, logger=log.name):
        thread = background.start_loop(
            "test-loop",
            "test step",
            step,
            background.ThrottledWarning(log, clock=clock),
            retry_seconds=7.0,
            stopped=done.is_set,
            pause=pauses.append,
        )
        thread.join(WAIT)
    assert not thread.is_alive(), "the loop did not end when stopped"
    assert len(calls) == 5  # restarted after each of its four failures, then stopped
    assert pauses == [7.0] * 4
    warned = _warnings(caplog)
    assert len(warned) == 2, warned
    assert "test step failed (ConnectionError: failure 1)" in warned[0]
    assert "failure 4" in warned[1]


def test_the_listener_subscribes_again_after_its_connection_is_killed(caplog):
    channel = f"trellis:test-background:{uuid.uuid4().hex}"
    received: queue.Queue[bytes] = queue.Queue()
    stop = threading.Event()
    client = redis.Redis.from_url(REDIS_URL)
    listener = background.RedisListener(
        REDIS_URL,
        channel,
        "test listener",
        background.ThrottledWarning(log),
        retry_seconds=0.05,
        poll_seconds=0.05,
        stopped=stop.is_set,
    )

    def delivered(text: str) -> bool:
        """Publish until the listener hands ``text`` over (it may be between subscriptions)."""
        for _ in range(int(WAIT / 0.05)):
            client.publish(channel, text)
            try:
                while True:
                    if received.get(timeout=0.05) == text.encode():
                        return True
            except queue.Empty:
                pass
        return False

    with caplog.at_level(logging.WARNING, logger=log.name):
        thread = listener.start("test-listen", lambda message: received.put(message["data"]))
        try:
            assert delivered("before")
            ours = [c for c in client.client_list() if c["name"] == listener.client_name]
            assert len(ours) == 1, ours
            assert client.client_kill_filter(_id=ours[0]["id"]) == 1
            assert delivered("after"), "the listener did not subscribe again"
            again = [c for c in client.client_list() if c["name"] == listener.client_name]
            assert len(again) == 1 and again[0]["id"] != ours[0]["id"]
        finally:
            stop.set()
            thread.join(WAIT)
    assert not thread.is_alive()
    warned = _warnings(caplog)
    assert len(warned) == 1 and warned[0].startswith("test listener: cannot receive from Redis"), warned


class _Backlog:
    """A queue of ``items`` that a worker's step takes one at a time (``delay`` seconds each), noting which
    thread took each and how many steps ran."""

    def __init__(self, items: int = 0, delay: float = 0.0) -> None:
        self.items, self.delay = items, delay
        self.steps = 0
        self.takers: set[str] = set()
        self.lock = threading.Lock()
        self.drained = threading.Event()

    def step(self) -> bool:
        with self.lock:
            self.steps += 1
            if self.items == 0:
                return False
            self.items -= 1
            self.takers.add(threading.current_thread().name)
            if self.items == 0:
                self.drained.set()
        time.sleep(self.delay)
        return True


def _worker(backlog: _Backlog, poll_seconds: float) -> background.PollingWorker:
    worker = background.PollingWorker(
        Flask(__name__), "test-worker", backlog.step, threads=4, poll_seconds=poll_seconds, logger=log
    )
    worker.start()
    return worker


def test_an_idle_worker_polls_with_one_thread_not_all_of_them():
    backlog = _Backlog()
    worker = _worker(backlog, poll_seconds=0.1)
    try:
        time.sleep(1.0)
        steps = backlog.steps
    finally:
        worker.stop()
    # The poller: ~10 steps in a second, plus the first step of each other thread; four pollers made ~40.
    assert 3 <= steps <= 20, steps


def test_a_backlog_the_poller_finds_draws_the_other_threads_in():
    backlog = _Backlog(delay=0.02)
    worker = _worker(backlog, poll_seconds=0.2)
    try:
        time.sleep(0.5)  # every thread has found nothing: the others wait for a wake
        with backlog.lock:
            backlog.items = 40  # queued by another process: nothing wakes this one's threads
        assert backlog.drained.wait(WAIT)
    finally:
        worker.stop()
    assert len(backlog.takers) >= 3, backlog.takers  # the poller alone would have taken all 40


def test_a_wake_starts_a_thread_at_once():
    backlog = _Backlog()
    worker = _worker(backlog, poll_seconds=60)
    try:
        time.sleep(0.3)
        with backlog.lock:
            backlog.items = 1
        worker.wake()
        assert backlog.drained.wait(2.0)  # long before the next poll
    finally:
        worker.stop()
