"""Image transforms under a burst: a server's resident memory and its /health latency while 24 transforms of
one large PNG are asked for at once.

    .venv/bin/python -m bench.image_memory_bench            # figures to stdout; --write also to the results note

One Trellis server process (eventlet, `python -m trellis.testing.server`, modules authentication and storage)
on a throwaway PostgreSQL database. A user uploads a 7000 x 7000 grey PNG (49 megapixels, under the 50 MP
limit; about 48 KB). After a warm-up transform of a small image (Pillow loaded), the server's RSS is read from
/proc as "idle". Two bursts follow, each of 24 requests sent at once from 24 client threads, while a 25th
thread asks `/health` every 50 ms:

- `header`: `format=webp&quality=1…24`, no size: every result would be 7000 px a side, over the 4096 px limit;
- `decode`: `format=webp&width=2000&quality=1…24`: every one needs the 49 MP image decoded.

For each burst: the answers by status, the slowest answer, the slowest `/health`, and the server's RSS growth
over idle after the burst (VmRSS) and at its peak (VmHWM, reset before the burst through /proc/PID/clear_refs).
"""

from __future__ import annotations

import argparse
import io
import platform
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from PIL import Image

from bench.common import ROOT, Server, bench_server

RESULTS = ROOT / "bench" / "results" / "image_memory.md"
MODULES = "authentication,email,sms,storage"
SIDE = 7000
BURST = 24
TIMEOUT = 90  # seconds a client waits for an answer


def grey_png(side: int) -> bytes:
    out = io.BytesIO()
    Image.new("L", (side, side), 128).save(out, "PNG", optimize=True)
    return out.getvalue()


def make_user(server: Server) -> dict[str, str]:
    body = {"email": f"bench-{time.time_ns()}@example.com", "password": "bench-password-long-enough"}
    requests.post(f"{server.url}/authentication/users", json=body, headers=server.admin_headers, timeout=60)
    tokens = requests.post(f"{server.url}/authentication/local", json=body, timeout=60)
    tokens.raise_for_status()
    return {"Authorization": f"Bearer {tokens.json()['accessToken']}"}


def store(server: Server, headers: dict[str, str], name: str, content: bytes) -> str:
    response = requests.post(
        f"{server.url}/storage/upload", files={"file": (name, content)}, headers=headers, timeout=60
    )
    response.raise_for_status()
    return response.json()["id"]


def reset_peak(server: Server) -> None:
    Path(f"/proc/{server.process.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS


def burst(server: Server, headers: dict[str, str], file_id: str, query: str) -> dict[str, Any]:
    stop = threading.Event()
    health: list[float] = []

    def probe() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                ok = requests.get(f"{server.url}/health", timeout=TIMEOUT).status_code == 200
            except requests.Timeout:
                ok = False
            health.append(time.perf_counter() - started if ok else float("inf"))
            time.sleep(0.05)

    def ask(quality: int) -> tuple[int | str, float]:
        started = time.perf_counter()
        try:
            answer = requests.get(
                f"{server.url}/storage/download/{file_id}?{query}&quality={quality}", headers=headers, timeout=TIMEOUT
            )
        except requests.Timeout:
            return "no answer", time.perf_counter() - started
        return answer.status_code, time.perf_counter() - started

    idle = server.rss_mb()
    reset_peak(server)
    prober = threading.Thread(target=probe)
    prober.start()
    with ThreadPoolExecutor(BURST) as pool:
        answers = list(pool.map(ask, range(1, BURST + 1)))
    stop.set()
    prober.join()
    time.sleep(1.0)  # buffers given back after the answers show in the next reading
    return {
        "query": query,
        "statuses": dict(sorted(Counter(str(status) for status, _ in answers).items())),
        "slowest": max(seconds for _, seconds in answers),
        "health_slowest": max(health),
        "health_count": len(health),
        "rss_growth": server.rss_mb() - idle,
        "peak_growth": server.peak_rss_mb() - idle,
        "idle": idle,
    }


def run() -> list[dict[str, Any]]:
    png = grey_png(SIDE)
    with bench_server(modules=MODULES) as server:
        headers = make_user(server)
        small = io.BytesIO()
        Image.new("RGB", (300, 200), (10, 120, 200)).save(small, "PNG")
        warm = store(server, headers, "warm.png", small.getvalue())
        requests.get(f"{server.url}/storage/download/{warm}?width=50&format=webp", headers=headers, timeout=60)
        file_id = store(server, headers, "grey.png", png)
        results = [
            burst(server, headers, file_id, "format=webp"),
            burst(server, headers, file_id, "format=webp&width=2000"),
        ]
    for result in results:
        result["png_bytes"] = len(png)
    return results


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        "| burst (24 at once) | answers | slowest answer | slowest /health | RSS growth after | peak RSS growth |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        statuses = ", ".join(f"{count}× {status}" for status, count in r["statuses"].items())
        lines.append(
            f"| `{r['query']}&quality=1…24` | {statuses} | {r['slowest']:.2f} s | {r['health_slowest'] * 1000:.0f} ms "
            f"({r['health_count']} probes) | {r['rss_growth']:+.0f} MiB | {r['peak_growth']:+.0f} MiB |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"append the table to {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    results = run()
    table = report(results)
    print(f"PNG {SIDE}x{SIDE} grey, {results[0]['png_bytes']} bytes; idle RSS {results[0]['idle']:.0f} MiB")
    print(table)
    if args.write:
        with RESULTS.open("a") as out:
            out.write(f"\n{time.strftime('%Y-%m-%d')} on {platform.node()}:\n\n{table}\n")


if __name__ == "__main__":
    main()
