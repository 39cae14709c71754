"""Every document write records its event in the write's transaction (trellis.events): REST create, PUT,
PATCH, delete, /many, custom endpoints and GraphQL mutations, with the whole document after the change
and the one before it. The test's transaction is rolled back, so the rows are read before numbering."""

from __future__ import annotations

import json

import sqlalchemy as sa

from trellis import db
from trellis.events import recorded as recorded_events

table = recorded_events()  # numbered or still pending


def recorded(after_id: int = 0) -> list[tuple[int, str, dict]]:
    rows = db.session.execute(
        sa.select(table.c.id, table.c.topic, table.c.payload).where(table.c.id > after_id).order_by(table.c.id)
    ).all()
    return [(row_id, topic, json.loads(payload)) for row_id, topic, payload in rows]


def last_id() -> int:
    return db.session.execute(sa.select(sa.func.coalesce(sa.func.max(table.c.id), 0))).scalar_one()


def test_rest_writes_record_create_update_delete(dbapi):
    dbapi.create_schema("Note", {"title": "String", "n": "Number"})
    start = last_id()
    doc = dbapi.post("Note", {"title": "a", "n": 1})
    put = dbapi.client.put(f"/database/Note/{doc['_id']}", json={"title": "b"}, headers=dbapi.admin).get_json()
    patched = dbapi.client.patch(f"/database/Note/{doc['_id']}", json={"n": 5}, headers=dbapi.admin).get_json()
    assert dbapi.client.delete(f"/database/Note/{doc['_id']}", headers=dbapi.admin).status_code == 200
    assert dbapi.client.delete(f"/database/Note/{doc['_id']}", headers=dbapi.admin).status_code == 404
    found = [(topic, payload) for _, topic, payload in recorded(start)]
    assert found == [
        ("database.Note.create", {"document": doc}),
        ("database.Note.update", {"document": put, "previous": doc}),
        ("database.Note.update", {"document": patched, "previous": put}),
        ("database.Note.delete", {"document": {"_id": doc["_id"]}, "previous": patched}),
    ]
    assert patched == {**put, "n": 5, "__v": 2, "updatedAt": patched["updatedAt"]}


def test_an_update_to_and_from_an_empty_document_records_its_json(dbapi):
    """The payload is spliced from the JSONB's text in SQL (documents.json_sql.document_sql): an empty ``data``
    leaves no stray comma, a unicode value comes through whole."""
    dbapi.create_schema("Blank", {"title": "String"})
    doc = dbapi.post("Blank", {"title": 'é "q" }{'})
    start = last_id()
    emptied = dbapi.client.put(f"/database/Blank/{doc['_id']}", json={}, headers=dbapi.admin).get_json()
    refilled = dbapi.client.patch(f"/database/Blank/{doc['_id']}", json={"title": "b"}, headers=dbapi.admin).get_json()
    assert "title" not in emptied and refilled["title"] == "b"
    assert [payload for _, _, payload in recorded(start)] == [
        {"document": emptied, "previous": doc},
        {"document": refilled, "previous": emptied},
    ]


def test_a_failed_write_records_nothing(dbapi):
    dbapi.create_schema("Code", {"code": {"type": "String", "unique": True}})
    dbapi.post("Code", {"code": "x"})
    start = last_id()
    dbapi.post("Code", {"code": "x"}, expect=409)
    dbapi.many("Code", [{"code": "y"}, {"code": "x"}], expect=409)
    dbapi.post("Code", {"code": 5}, expect=400)
    assert recorded(start) == []


def test_many_records_one_event_per_document(dbapi):
    dbapi.create_schema("Bulk", {"n": "Number"})
    start = last_id()
    docs = dbapi.many("Bulk", [{"n": i} for i in range(3)])["docs"]
    assert [(topic, payload) for _, topic, payload in recorded(start)] == [
        ("database.Bulk.create", {"document": doc}) for doc in docs
    ]


def test_custom_endpoints_and_graphql_mutations_record(dbapi):
    dbapi.create_schema("Task", {"item": "String", "done": "Boolean"})
    task = dbapi.post("Task", {"item": "a", "done": False})
    for body in (
        {
            "name": "finish",
            "operation": "PUT",
            "selectedSchema": "Task",
            "query": {
                "AND": [{"schemaField": "item", "operation": "eq", "comparisonField": {"type": "Custom", "value": "a"}}]
            },
            "assignments": [
                {"schemaField": "done", "action": "set", "assignmentField": {"type": "Custom", "value": True}}
            ],
        },
        {
            "name": "purge",
            "operation": "DELETE",
            "selectedSchema": "Task",
            "query": {
                "AND": [
                    {"schemaField": "done", "operation": "eq", "comparisonField": {"type": "Custom", "value": True}}
                ]
            },
        },
    ):
        response = dbapi.client.post("/admin/database/customEndpoints", json=body, headers=dbapi.admin)
        assert response.status_code == 201, response.get_json()
    start = last_id()
    assert dbapi.client.put("/database/function/finish").status_code == 200
    assert dbapi.client.delete("/database/function/purge").status_code == 200
    created = dbapi.graphql('mutation { createTask(data: {item: "g"}) { _id } }')["data"]["createTask"]
    dbapi.graphql("mutation ($id: ID!) { updateTask(_id: $id, data: {done: true}) { _id } }", {"id": created["_id"]})
    dbapi.graphql("mutation ($id: ID!) { deleteTask(_id: $id) { _id } }", {"id": created["_id"]})
    found = recorded(start)
    assert [topic for _, topic, _ in found] == [
        "database.Task.update",
        "database.Task.delete",
        "database.Task.create",
        "database.Task.update",
        "database.Task.delete",
    ]
    finish, purge, g_create, g_update, g_delete = (payload for _, _, payload in found)
    assert finish["previous"] == task and finish["document"]["done"] is True
    assert purge == {"document": {"_id": task["_id"]}, "previous": finish["document"]}
    assert g_create["document"]["item"] == "g" and g_update["previous"] == g_create["document"]
    assert g_update["document"]["done"] is True and g_delete["document"] == {"_id": created["_id"]}
