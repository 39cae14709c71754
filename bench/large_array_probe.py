"""A signed-in user's ``POST /chat/rooms`` with a 1,000,000-element ``users`` array, while ``/health`` is polled.

    .venv/bin/python -m bench.large_array_probe                 # PostgreSQL, Redis child
    .venv/bin/python -m bench.large_array_probe --database sqlite

One eventlet server process. The array's elements are numbers (each one invalid), the worst case for a
validator that looks at every element and reports each. Reported: the time to the answer, its status and
body size, and the slowest ``/health`` answered while the big request was in flight (a stalled process
answers none until the big one is done).
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import requests

from bench.common import bench_server, redis_child

ELEMENTS = 1_000_000


def _token(url: str) -> str:
    account = {"email": "probe@example.com", "password": "probe-password-1234"}
    requests.post(f"{url}/authentication/local/new", json=account, timeout=30).raise_for_status()
    answer = requests.post(f"{url}/authentication/local", json=account, timeout=30)
    answer.raise_for_status()
    return answer.json()["accessToken"]


def probe(url: str) -> dict[str, float | int]:
    headers = {"Authorization": f"Bearer {_token(url)}", "Content-Type": "application/json"}
    payload = json.dumps({"roomName": "big", "users": list(range(ELEMENTS))}).encode()
    done = threading.Event()
    health: list[tuple[float, int]] = []

    def poll() -> None:
        while not done.is_set():
            started = time.perf_counter()
            status = requests.get(f"{url}/health", timeout=60).status_code
            health.append((time.perf_counter() - started, status))
            time.sleep(0.05)

    poller = threading.Thread(target=poll)
    started = time.perf_counter()
    poller.start()
    answer = requests.post(f"{url}/chat/rooms", data=payload, headers=headers, timeout=120)
    elapsed = time.perf_counter() - started
    done.set()
    poller.join()
    return {
        "status": answer.status_code,
        "seconds": round(elapsed, 3),
        "body_bytes": len(answer.content),
        "request_bytes": len(payload),
        "health_polls": len(health),
        "slowest_health_seconds": round(max(seconds for seconds, _ in health), 3),
        "health_not_200": sum(1 for _, status in health if status != 200),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="postgresql", choices=["postgresql", "sqlite"])
    args = parser.parse_args()
    with (
        redis_child() as redis_url,
        bench_server(args.database, modules="authentication,chat,email,sms", TRELLIS_REDIS_URL=redis_url) as server,
    ):
        print(json.dumps(probe(server.url), indent=2))


if __name__ == "__main__":
    main()
