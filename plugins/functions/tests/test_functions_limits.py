"""Runaway code: a trigger that never ends is stopped at the time limit and the process goes on; triggers
that write recursively stop at depth 8; what a before-trigger wrote through ``ctx.db`` goes with the
request's write, refused or not."""

from __future__ import annotations

import time

import pytest

from .conftest import Api

pytestmark = pytest.mark.live

RUNAWAY = """
    import time
    from trellis_functions import Reject, before_create, function

    @before_create("Spin")
    def spin(ctx, doc):
        while True:
            pass

    @function("sleepy", auth="anyone")
    def sleepy(ctx, params):
        time.sleep(30)

    @function("ping", auth="anyone")
    def ping(ctx, params):
        return "pong"

    @before_create("Chain")
    def chain(ctx, doc):
        ctx.db.create("Chain", {"n": doc["n"] + 1})

    @before_create("Audited")
    def audit(ctx, doc):
        ctx.db.as_admin().create("Audit", {"what": doc["title"]})
        if doc["title"] == "refused":
            raise Reject("not this one")
"""


@pytest.fixture()
def api(start, folder):
    folder.write("runaway.py", RUNAWAY)
    return Api(start(TRELLIS_FUNCTIONS_TIME_LIMIT_SECONDS="1").url)


def test_a_trigger_that_never_ends_is_stopped_and_the_process_goes_on(api):
    api.schema({"title": "String"}, name="Spin")
    began = time.monotonic()
    body = api.call("POST", "/database/Spin", 500, json={"title": "x"}).json()
    assert time.monotonic() - began < 10
    assert body["name"] == "FUNCTION_ERROR" and "time limit of 1 s" in body["message"]
    assert api.call("POST", "/functions/ping", 200, headers={}).json() == {"result": "pong"}
    assert api.documents("Spin") == []
    waited = api.call("POST", "/functions/sleepy", 500, headers={}).json()  # a wait is stopped too
    assert "time limit" in waited["message"]
    assert api.call("POST", "/functions/ping", 200, headers={}).json() == {"result": "pong"}


def test_recursive_writes_stop_at_depth_eight(api):
    api.schema({"n": "Number"}, name="Chain")
    body = api.call("POST", "/database/Chain", 500, json={"n": 0}).json()
    assert body["name"] == "FUNCTION_ERROR" and "nested more than 8 deep" in body["message"]
    assert api.documents("Chain") == []


def test_a_before_triggers_writes_commit_with_the_request_or_not_at_all(api):
    api.schema({"title": "String"}, name="Audited")
    api.schema({"what": "String"}, name="Audit")
    api.call("POST", "/database/Audited", 201, json={"title": "kept"})
    api.call("POST", "/database/Audited", 400, json={"title": "refused"})
    assert [a["what"] for a in api.documents("Audit")] == ["kept"]
    assert [a["title"] for a in api.documents("Audited")] == ["kept"]
