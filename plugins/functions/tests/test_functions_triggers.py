"""Before- and after-triggers on every path that writes a document (REST one and many, GraphQL, custom
endpoints, ``ctx.db``), against a real server on a functions folder: what a trigger changes is stored and
checked like a client's body, a ``Reject`` answers its status and writes nothing (no row, no event), any
other error answers 500 ``FUNCTION_ERROR`` with the request id, and after-triggers run once the write
committed."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from trellis_authentication.testing import create_user_over_http

from .conftest import Api, eventually

pytestmark = pytest.mark.live

TASKS = """
    from trellis_functions import Reject, after_create, after_update, before_create, before_delete, before_update

    @before_create("Task")
    def stamp(ctx, doc):
        doc["slug"] = doc["title"].lower().replace(" ", "-")

    @before_update("Task")
    def guard(ctx, doc, previous):
        if previous.get("done") and not doc.get("done"):
            raise Reject("a done task stays done", status=409, errors={"done": ["Cannot be reopened"]})
        doc["slug"] = doc["title"].lower().replace(" ", "-")

    @before_delete("Task")
    def keep(ctx, doc):
        if doc.get("done"):
            raise Reject("done tasks are archived, not deleted", status=403)

    @after_create("Task")
    def notify(ctx, doc):
        ctx.db.as_admin().create("Notice", {"task": doc["_id"], "what": "created", "attempt": ctx.attempt})

    @after_update("Task")
    def notify_update(ctx, doc, previous):
        ctx.db.as_admin().create("Notice", {"task": doc["_id"], "what": previous["title"] + " -> " + doc["title"]})
"""


def _tasks(api: Api) -> None:
    api.schema({"title": "String", "slug": "String", "done": "Boolean"}, name="Task")
    api.schema({"task": "String", "what": "String", "attempt": "Number"}, name="Notice")


@pytest.fixture()
def server(start, folder):
    folder.write("tasks.py", TASKS)
    return start()


def test_a_before_trigger_runs_on_every_write_path(server):
    api = Api(server.url)
    _tasks(api)
    one = api.call("POST", "/database/Task", 201, json={"title": "Write Docs"}).json()
    assert one["slug"] == "write-docs"
    many = api.call("POST", "/database/Task/many", 201, json={"docs": [{"title": "A B"}, {"title": "C"}]}).json()
    assert [doc["slug"] for doc in many["docs"]] == ["a-b", "c"]
    patched = api.call("PATCH", f"/database/Task/{one['_id']}", 200, json={"title": "Read Docs"}).json()
    assert patched["slug"] == "read-docs" and patched["title"] == "Read Docs"
    replaced = api.call("PUT", f"/database/Task/{one['_id']}", 200, json={"title": "Ship It"}).json()
    assert replaced["slug"] == "ship-it" and replaced["__v"] == 2
    mutation = 'mutation { createTask(data: {title: "From GraphQL"}) { _id slug } }'
    answer = api.call("POST", "/graphql", 200, json={"query": mutation}).json()
    assert answer["data"]["createTask"]["slug"] == "from-graphql", answer
    stored = {doc["title"]: doc["slug"] for doc in api.documents("Task")}
    assert stored == {"Ship It": "ship-it", "A B": "a-b", "C": "c", "From GraphQL": "from-graphql"}


def test_a_reject_answers_its_status_and_writes_nothing(server, app_config):
    api = Api(server.url)
    _tasks(api)
    task = api.call("POST", "/database/Task", 201, json={"title": "Done", "done": True}).json()
    eventually(lambda: api.documents("Notice"))  # its after-trigger's write, done
    engine = sa.create_engine(app_config["DATABASE_URL"])
    try:
        events_before = _events(engine)
        refused = api.call("PATCH", f"/database/Task/{task['_id']}", 409, json={"done": False}).json()
        assert refused == {
            "name": "CONFLICT",
            "status": 409,
            "message": "a done task stays done",
            "errors": {"done": ["Cannot be reopened"]},
            "requestId": refused["requestId"],
        }
        kept = api.call("DELETE", f"/database/Task/{task['_id']}", 403).json()
        assert kept["message"] == "done tasks are archived, not deleted"
        assert api.call("GET", f"/database/Task/{task['_id']}", 200).json() == task
        assert _events(engine) == events_before  # no event, so no webhook and no live change
        entries = eventually(lambda: api.log(status="rejected"))
        assert {(e["function"], e["kind"]) for e in entries} == {("guard", "before_update"), ("keep", "before_delete")}
    finally:
        engine.dispose()


def _events(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        counted = connection.execute(sa.text("SELECT count(*) FROM core_events")).scalar_one()
        if engine.dialect.name == "postgresql":
            counted += connection.execute(sa.text("SELECT count(*) FROM core_events_pending")).scalar_one()
        return counted


def test_a_trigger_that_raises_answers_function_error_and_writes_nothing(start, folder):
    folder.write(
        "broken_trigger.py",
        """
        from trellis_functions import before_create

        @before_create("*")
        def explode(ctx, doc):
            raise KeyError("missing")
        """,
    )
    api = Api(start().url)
    name = api.schema({"title": "String"})
    answer = api.call("POST", f"/database/{name}", 500, json={"title": "x"})
    body = answer.json()
    assert body["name"] == "FUNCTION_ERROR" and "'explode'" in body["message"] and body["requestId"] in body["message"]
    assert "Traceback" not in answer.text and "missing" not in body["message"]
    assert api.documents(name) == []
    entry = eventually(lambda: api.log(function="explode"))[0]
    assert entry["status"] == "error" and "KeyError" in entry["message"] and entry["requestId"] == body["requestId"]


def test_what_a_trigger_stores_is_checked_like_a_body(start, folder):
    folder.write(
        "wrong.py",
        """
        from trellis_functions import before_create

        @before_create("*")
        def wrong(ctx, doc):
            doc["count"] = "not a number"
            doc["extra"] = 1
        """,
    )
    api = Api(start().url)
    name = api.schema({"title": "String", "count": "Number"})
    refused = api.call("POST", f"/database/{name}", 400, json={"title": "x"}).json()
    assert set(refused["errors"]) == {"count", "extra"}
    assert api.documents(name) == []


def test_after_triggers_run_once_the_write_committed(server):
    api = Api(server.url)
    _tasks(api)
    task = api.call("POST", "/database/Task", 201, json={"title": "First"}).json()
    api.call("PATCH", f"/database/Task/{task['_id']}", 200, json={"title": "Second"})
    notices = eventually(lambda: len(found := api.documents("Notice")) == 2 and found)
    assert sorted(n["what"] for n in notices) == ["First -> Second", "created"]
    assert [n.get("attempt") for n in notices if n["what"] == "created"] == [1]
    runs = eventually(lambda: len(found := api.log(status="ok")) == 2 and found)
    assert {(e["function"], e["kind"], e["attempt"]) for e in runs} == {
        ("notify", "after_create", 1),
        ("notify_update", "after_update", 1),
    }
    # a refused write queues nothing
    api.call("PATCH", f"/database/Task/{task['_id']}", 200, json={"done": True})
    eventually(lambda: len(api.documents("Notice")) == 3)
    api.call("PATCH", f"/database/Task/{task['_id']}", 409, json={"done": False})
    assert len(api.documents("Notice")) == 3


def test_custom_endpoints_and_ctx_db_run_the_triggers(server, folder):
    folder.write(
        "z_calls.py",
        """
        from trellis_functions import function

        @function("add_task", auth="admin")
        def add_task(ctx, params):
            return ctx.db.create("Task", {"title": params["title"]})
        """,
    )
    api = Api(server.url)
    _tasks(api)
    made = eventually(lambda: (r := api.call("POST", "/functions/add_task", json={"title": "Via Ctx"})).ok and r.json())
    assert made["result"]["slug"] == "via-ctx"
    endpoint = {
        "name": "newTask",
        "operation": "POST",
        "selectedSchema": "Task",
        "inputs": [{"name": "title", "type": "String", "location": "body"}],
        "assignments": [
            {"schemaField": "title", "action": "set", "assignmentField": {"type": "Input", "value": "title"}}
        ],
    }
    api.call("POST", "/admin/database/customEndpoints", 201, json=endpoint)
    created = api.call("POST", "/database/function/newTask", 201, json={"title": "Via Endpoint"}).json()
    assert created["slug"] == "via-endpoint", created


def test_a_reject_under_access_control_leaves_no_grant(start, folder, app_config):
    """The owner's tuple of a create is written in the create's statement: a refused create leaves none."""
    folder.write(
        "refuse.py",
        """
        from trellis_functions import Reject, before_create

        @before_create("*")
        def refuse(ctx, doc):
            if doc.get("title") == "no":
                raise Reject("no", status=422)
        """,
    )
    api = Api(start().url)
    name = api.schema({"title": "String"}, modelOptions={"conduit": {"authorization": {"enabled": True}}})
    alice = create_user_over_http(api.url)
    engine = sa.create_engine(app_config["DATABASE_URL"])
    try:
        with engine.connect() as connection:
            before = connection.execute(sa.text("SELECT count(*) FROM authz_relations")).scalar_one()
        api.call("POST", f"/database/{name}", 422, headers=alice.headers, json={"title": "no"})
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT count(*) FROM authz_relations")).scalar_one() == before
        api.call("POST", f"/database/{name}", 201, headers=alice.headers, json={"title": "yes"})
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT count(*) FROM authz_relations")).scalar_one() == before + 1
    finally:
        engine.dispose()


def test_an_after_trigger_that_touches_nothing_ends_its_job_and_logs_its_run(start, folder, app_config):
    """A run that neither reads nor writes: its job row goes and its entry is kept (on PostgreSQL in one
    statement of their own)."""
    folder.write(
        "quiet.py",
        """
        from trellis_functions import after_create

        @after_create("*")
        def quiet(ctx, doc):
            ctx.log("saw " + doc["title"])
        """,
    )
    api = Api(start().url)
    name = api.schema({"title": "String"})
    api.call("POST", f"/database/{name}", 201, json={"title": "one"})
    entry = eventually(lambda: api.log(function="quiet"))[0]
    assert (entry["status"], entry["message"], entry["attempt"], entry["kind"]) == ("ok", "saw one", 1, "after_create")
    engine = sa.create_engine(app_config["DATABASE_URL"])
    try:
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT count(*) FROM functions_jobs")).scalar_one() == 0
    finally:
        engine.dispose()
