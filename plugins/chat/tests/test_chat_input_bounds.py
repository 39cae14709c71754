"""A huge ``users`` array is refused on its length before any element is looked at, and an error body
with many reasons is bounded (``errorsOmitted`` says how many were left out)."""

from __future__ import annotations

import http.client
import json

import requests

from trellis.errors import MAX_ERRORS
from trellis_authentication.testing import create_user_over_http

ELEMENTS = 1_000_000


def test_a_million_element_array_is_refused_at_once_while_health_answers(live_server):
    owner = create_user_over_http(live_server.url)
    payload = json.dumps({"roomName": "big", "users": list(range(ELEMENTS))})
    big = http.client.HTTPConnection("127.0.0.1", live_server.port, timeout=60)
    big.request("POST", "/chat/rooms", body=payload, headers={**owner.headers, "Content-Type": "application/json"})
    # The whole body is sent and its answer not read yet: the server has the big request in hand. A process
    # busy validating a million elements (and rendering a million errors) would not answer this in time.
    health = requests.get(f"{live_server.url}/health", timeout=5)
    answer = big.getresponse()
    text = answer.read()
    big.close()
    assert health.status_code == 200
    assert answer.status == 400
    assert len(text) < 2000
    assert json.loads(text)["errors"] == {"users": ["Longer than maximum length 1000."]}


def test_many_bad_elements_answer_a_bounded_error_body(client, make_user):
    owner = make_user()
    response = client.post("/chat/rooms", json={"roomName": "r", "users": [5] * 1000}, headers=owner.headers)
    assert response.status_code == 400
    body = response.get_json()
    assert len(body["errors"]["users"]) == MAX_ERRORS
    assert body["errorsOmitted"] == 1000 - MAX_ERRORS
    assert f"{1000 - MAX_ERRORS} more error(s) left out" in body["message"]
