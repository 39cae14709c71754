"""A huge ``users`` array is refused on its length before any element is looked at, and an error body
with many reasons is bounded (``errorsOmitted`` says how many were left out)."""

from __future__ import annotations

import json
import threading

import requests

from trellis.errors import MAX_ERRORS
from trellis_authentication.testing import create_user_over_http

ELEMENTS = 1_000_000


def test_a_million_element_array_is_refused_at_once_while_health_answers(live_server):
    owner = create_user_over_http(live_server.url)
    payload = json.dumps({"roomName": "big", "users": list(range(ELEMENTS))})
    health: list[int] = []
    started = threading.Event()

    def probe_health() -> None:
        started.wait()
        # A process busy validating (and answering) a million errors would not answer within the timeout.
        health.append(requests.get(f"{live_server.url}/health", timeout=5).status_code)

    prober = threading.Thread(target=probe_health)
    prober.start()
    started.set()
    answer = requests.post(
        f"{live_server.url}/chat/rooms",
        data=payload,
        headers={**owner.headers, "Content-Type": "application/json"},
        timeout=60,
    )
    prober.join()
    assert answer.status_code == 400
    assert len(answer.content) < 2000
    assert answer.json()["errors"] == {"users": ["Longer than maximum length 1000."]}
    assert health == [200]


def test_many_bad_elements_answer_a_bounded_error_body(client, make_user):
    owner = make_user()
    response = client.post("/chat/rooms", json={"roomName": "r", "users": [5] * 1000}, headers=owner.headers)
    assert response.status_code == 400
    body = response.get_json()
    assert len(body["errors"]["users"]) == MAX_ERRORS
    assert body["errorsOmitted"] == 1000 - MAX_ERRORS
    assert f"{1000 - MAX_ERRORS} more error(s) left out" in body["message"]
