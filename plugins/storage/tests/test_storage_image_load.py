"""Image transforms under a burst, against a real eventlet server process: 24 transforms of a 49-megapixel PNG
asked for at once. What the header decides is answered 400 at once, decodes are bounded (a few run or wait, the
rest are 503 with Retry-After), the server's resident memory (read from /proc) comes back near where it was, and
``/health`` answers promptly throughout."""

from __future__ import annotations

import io
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from PIL import Image

from trellis_authentication.testing import create_user_over_http
from trellis_storage import imaging

pytestmark = pytest.mark.live

MiB = 1024 * 1024
BURST = 24
# RSS growth left after a burst: what the process keeps of it (caches, a request's buffers), never the decodes.
SETTLED_GROWTH = 150 * MiB
HEALTH_SECONDS = 1.0


def memory(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", status).group(1)) * 1024


def grey_png(side: int) -> bytes:
    out = io.BytesIO()
    Image.new("L", (side, side), 128).save(out, "PNG", optimize=True)
    return out.getvalue()


class Probe:
    """``/health`` asked every 50 ms from a thread while a burst runs: each answer's status and latency."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                status = requests.get(f"{self.url}/health", timeout=10).status_code
            except requests.RequestException:
                status = 0
            self.answers.append((status, time.monotonic() - started))
            time.sleep(0.05)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


def test_a_burst_of_transforms_keeps_memory_bounded_and_health_prompt(live_server):
    user = create_user_over_http(live_server.url)
    pid = live_server.process.pid

    def store(name: str, content: bytes) -> str:
        response = requests.post(
            f"{live_server.url}/storage/upload", files={"file": (name, content)}, headers=user.headers, timeout=60
        )
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def burst(file_id: str, query: str) -> list[requests.Response]:
        def ask(quality: int) -> requests.Response:
            url = f"{live_server.url}/storage/download/{file_id}?{query}&quality={quality}"
            return requests.get(url, headers=user.headers, timeout=120)

        with ThreadPoolExecutor(BURST) as pool:
            return list(pool.map(ask, range(1, BURST + 1)))

    small = io.BytesIO()
    Image.new("RGB", (300, 200), (10, 120, 200)).save(small, "PNG")
    warm = store("warm.png", small.getvalue())
    assert requests.get(f"{live_server.url}/storage/download/{warm}?width=50&format=webp", headers=user.headers).ok
    grey = store("grey.png", grey_png(7000))
    idle = memory(pid, "VmRSS")

    # Every result would be 7000 px a side: the header decides, no decode runs, nothing waits.
    with Probe(live_server.url) as probe:
        started = time.monotonic()
        answers = burst(grey, "format=webp")
        took = time.monotonic() - started
    assert [a.status_code for a in answers] == [400] * BURST, [a.text[:200] for a in answers]
    assert all("4096" in a.json()["message"] for a in answers)
    assert took < 5, took  # decoding one 49 MP PNG takes about a second
    assert memory(pid, "VmRSS") - idle < SETTLED_GROWTH
    assert probe.answers and all(status == 200 and seconds < HEALTH_SECONDS for status, seconds in probe.answers)

    # Real decodes (49 MP each): a few run or wait, the rest are told to come back; memory at its peak is bounded
    # by the decodes allowed at once, and given back afterwards.
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
    with Probe(live_server.url) as probe:
        answers = burst(grey, "format=webp&width=2000")
    statuses = [a.status_code for a in answers]
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 1, statuses
    assert all(a.headers.get("Retry-After") for a in answers if a.status_code == 503)
    running = max(1, (os.cpu_count() or 1) - 1)
    assert memory(pid, "VmHWM") - idle < running * imaging.MAX_DECODE_BYTES + SETTLED_GROWTH
    time.sleep(0.5)
    assert memory(pid, "VmRSS") - idle < SETTLED_GROWTH
    slowest = max(seconds for _, seconds in probe.answers)
    assert all(status == 200 for status, _ in probe.answers) and slowest < HEALTH_SECONDS, slowest
