"""Callable functions at ``POST /functions/{name}``: auth levels, params, results, errors, rate limits, their
own OpenAPI paths; and the admin overview and log."""

from __future__ import annotations

import pytest
import requests

from trellis_authentication.testing import create_user_over_http

from .conftest import WAIT, Api, eventually

pytestmark = pytest.mark.live

CALLS = """
    from trellis_functions import Reject, function, schedule

    @function("total")
    def total(ctx, params):
        \"\"\"The sum of params.values.\"\"\"
        return sum(params["values"])

    @function("whoami", auth="anyone")
    def whoami(ctx, params):
        return {"user": ctx.user, "admin": ctx.is_admin, "request": bool(ctx.request_id)}

    @function("secret", auth="admin")
    def secret(ctx, params):
        return "for admins"

    @function("odd")
    def odd(ctx, params):
        return {1, 2}

    @function("picky", auth="anyone")
    def picky(ctx, params):
        if "name" not in params:
            raise Reject("name is required", status=422, errors={"name": ["Missing"]})
        ctx.log("greeting " + params["name"])
        return "hello " + params["name"]

    @function("count_notes")
    def count_notes(ctx, params):
        return ctx.db.count(params["schema"])

    @function("get_note")
    def get_note(ctx, params):
        return ctx.db.get(params["schema"], params["id"])

    @schedule("0 3 * * *")
    def nightly(ctx):
        ctx.log("swept")
"""


@pytest.fixture()
def server(start, folder):
    folder.write("calls.py", CALLS)
    return start(TRELLIS_RATELIMIT_ENABLED="true")


def test_auth_levels_params_and_results(server):
    api = Api(server.url)
    user = create_user_over_http(server.url)
    anonymous: dict[str, str] = {}
    assert (
        api.call("POST", "/functions/total", 401, headers=anonymous, json={"values": [1]}).json()["name"]
        == "UNAUTHORIZED"
    )
    assert api.call("POST", "/functions/total", 200, headers=user.headers, json={"values": [1, 2, 3]}).json() == {
        "result": 6
    }
    assert api.call("POST", "/functions/total", 200, json={"values": [4]}).json() == {"result": 4}  # admins too
    me = api.call("POST", "/functions/whoami", 200, headers=user.headers).json()["result"]
    assert me["user"]["_id"] == user.id and me["admin"] is False and me["request"] is True
    assert api.call("POST", "/functions/whoami", 200, headers=anonymous).json()["result"]["user"] is None
    assert api.call("POST", "/functions/secret", 403, headers=user.headers).json()["name"] == "FORBIDDEN"
    assert api.call("POST", "/functions/secret", 200).json() == {"result": "for admins"}
    assert api.call("POST", "/functions/nothing", 404).json()["name"] == "NOT_FOUND"
    refused = api.call("POST", "/functions/picky", 422, headers=anonymous, json={}).json()
    assert refused["message"] == "name is required" and refused["errors"] == {"name": ["Missing"]}
    assert api.call("POST", "/functions/picky", 200, headers=anonymous, json={"name": "Ada"}).json() == {
        "result": "hello Ada"
    }


def test_a_result_json_cannot_carry_is_a_function_error_naming_it(server):
    api = Api(server.url)
    user = create_user_over_http(server.url)
    body = api.call("POST", "/functions/odd", 500, headers=user.headers).json()
    assert body["name"] == "FUNCTION_ERROR" and "'odd'" in body["message"] and body["requestId"]
    entry = eventually(lambda: api.log(function="odd"))[0]
    assert entry["status"] == "error" and entry["kind"] == "function"


def test_bad_bodies_answer_4xx(server):
    for data, headers, status in (
        ("{", {"Content-Type": "application/json"}, 400),
        ("[]", {"Content-Type": "application/json"}, 400),
        ("x=1", {"Content-Type": "application/x-www-form-urlencoded"}, 415),
    ):
        response = requests.post(f"{server.url}/functions/whoami", data=data, headers=headers, timeout=WAIT)
        assert response.status_code == status, (data, response.text)
        assert response.json()["status"] == status


def test_calls_are_rate_limited_per_caller(server):
    api = Api(server.url)
    api.call("PUT", "/config/functions", 200, json={"rateLimit": "3/minute"})
    user = create_user_over_http(server.url)
    answers = [api.call("POST", "/functions/whoami", headers=user.headers).status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]
    assert api.call("POST", "/functions/whoami").status_code == 200  # another caller


def test_every_function_has_its_own_path_in_openapi(server):
    doc = requests.get(f"{server.url}/openapi.json", timeout=WAIT).json()
    total = doc["paths"]["/functions/total"]["post"]
    assert total["operationId"] == "callFunctionTotal" and total["description"] == "The sum of params.values."
    assert total["security"] == [{"bearerAuth": []}, {"masterkey": []}]
    assert {} in doc["paths"]["/functions/whoami"]["post"]["security"]
    assert "401" in total["responses"] and "401" not in doc["paths"]["/functions/whoami"]["post"]["responses"]
    assert "/functions/{name}" in doc["paths"]


def test_the_admin_overview_and_the_log(server):
    api = Api(server.url)
    assert api.call("GET", "/admin/functions", 401, headers={}).status_code == 401
    overview = api.call("GET", "/admin/functions", 200).json()
    assert [(f["name"], f["loaded"]) for f in overview["files"]] == [("calls.py", True)]
    assert {f["name"]: f["auth"] for f in overview["functions"]} == {
        "total": "user", "whoami": "anyone", "secret": "admin", "odd": "user", "picky": "anyone", "count_notes": "user",
        "get_note": "user",
    }  # fmt: skip
    (nightly,) = overview["schedules"]
    assert (
        nightly["name"] == "nightly" and nightly["cron"] == "0 3 * * *" and nightly["nextRunAt"].endswith("03:00:00Z")
    )
    assert "lastRunAt" not in nightly
    api.call("POST", "/functions/picky", 200, headers={}, json={"name": "Bo"})
    assert api.call("POST", "/admin/functions/schedules/nightly/run", 202).json() == {
        "name": "nightly",
        "started": True,
    }
    assert api.call("POST", "/admin/functions/schedules/nope/run", 404).status_code == 404
    ran = eventually(lambda: api.log(function="nightly"))
    assert ran[0]["status"] == "ok" and ran[0]["kind"] == "schedule" and ran[0]["message"] == "swept"
    assert eventually(lambda: "lastRunAt" in api.call("GET", "/admin/functions", 200).json()["schedules"][0])
    greeted = api.log(function="picky")
    assert greeted[0]["message"] == "greeting Bo" and greeted[0]["requestId"]
    assert api.call("GET", "/admin/functions/log", 200, params={"status": "ok", "limit": 1}).json()["count"] >= 2
    assert (
        api.call("GET", "/admin/functions/log", 400, params={"status": "maybe"}).json()["name"] == "INVALID_ARGUMENTS"
    )
    assert api.call("GET", "/admin/functions/log", 400, params={"limit": 5000}).status_code == 400


def test_ctx_db_reads_as_the_caller(server):
    api = Api(server.url)
    name = api.schema({"title": "String"}, modelOptions={"conduit": {"authorization": {"enabled": True}}})
    alice, bob = create_user_over_http(server.url), create_user_over_http(server.url)
    made = [api.call("POST", f"/database/{name}", 201, headers=alice.headers, json={"title": t}).json() for t in "ab"]
    mine = api.call("POST", "/functions/count_notes", 200, headers=alice.headers, json={"schema": name}).json()
    theirs = api.call("POST", "/functions/count_notes", 200, headers=bob.headers, json={"schema": name}).json()
    assert (mine, theirs) == ({"result": 2}, {"result": 0})
    missing = api.call("POST", "/functions/count_notes", 404, headers=bob.headers, json={"schema": "Nope"}).json()
    assert missing["name"] == "NOT_FOUND"
    # Another user's document is the 404 of a missing id, message and all.
    own = api.call(
        "POST", "/functions/get_note", 200, headers=alice.headers, json={"schema": name, "id": made[0]["_id"]}
    )
    assert own.json()["result"] == made[0]
    hidden = api.call(
        "POST", "/functions/get_note", 404, headers=bob.headers, json={"schema": name, "id": made[0]["_id"]}
    )
    absent_id = "0" * 32
    absent = api.call("POST", "/functions/get_note", 404, headers=bob.headers, json={"schema": name, "id": absent_id})
    assert hidden.json()["message"].replace(made[0]["_id"], "ID") == absent.json()["message"].replace(absent_id, "ID")
