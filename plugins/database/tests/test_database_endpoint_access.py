"""Custom endpoints under per-document access control: each operation runs with the caller's access.
GET reads only what the caller may read (exact count, populate keeps an unreadable target as its id),
POST grants owner, PUT/PATCH need edit and DELETE needs delete on every readable matched document (a
403 and nothing written when one is missing; documents it may not read are not matched at all),
``scope`` acts as a team, administrators see and change everything."""

from __future__ import annotations

from typing import Any

import pytest

ACCESS = {"conduit": {"authorization": {"enabled": True}}}


def _make(dbapi, expect: int = 201, **body: Any) -> dict[str, Any]:
    response = dbapi.client.post("/admin/database/customEndpoints", json=body, headers=dbapi.admin)
    assert response.status_code == expect, response.get_json()
    return response.get_json()


def _share(dbapi, owner, doc_id: str, subject: str, relation: str, schema: str = "Card") -> None:
    response = dbapi.client.post(
        f"/database/{schema}/{doc_id}/grants", json={"subject": subject, "relation": relation}, headers=owner.headers
    )
    assert response.status_code == 201, response.get_json()


def _titles(response) -> list[str]:
    assert response.status_code == 200, response.get_json()
    return sorted(doc["title"] for doc in response.get_json()["documents"])


def _by_colour(dbapi, name: str, operation: str, **extra: Any) -> None:
    """An endpoint on Card whose query is ``colour = ?colour``."""
    condition = {"schemaField": "colour", "operation": "eq", "comparisonField": {"type": "Input", "value": "colour"}}
    _make(
        dbapi,
        name=name,
        operation=operation,
        selectedSchema="Card",
        inputs=[{"name": "colour", "type": "String", "location": "query"}],
        query={"AND": [condition]},
        **extra,
    )


@pytest.fixture()
def cards(dbapi, make_user) -> dict[str, Any]:
    """Alice owns three red cards and a blue one, bob one red card; bob reads alice's first red card and
    edits her second."""
    dbapi.create_schema("Card", {"title": "String", "colour": "String", "n": "Number"}, modelOptions=ACCESS)
    alice, bob = make_user(), make_user()
    mine = [
        dbapi.post("Card", {"title": title, "colour": colour, "n": 0}, headers=alice.headers)
        for title, colour in (("a1", "red"), ("a2", "red"), ("a3", "red"), ("a4", "blue"))
    ]
    dbapi.post("Card", {"title": "b1", "colour": "red", "n": 0}, headers=bob.headers)
    _share(dbapi, alice, mine[0]["_id"], f"User:{bob.id}", "reader")
    _share(dbapi, alice, mine[1]["_id"], f"User:{bob.id}", "editor")
    return {"alice": alice, "bob": bob, "mine": mine}


def test_get_reads_only_what_the_caller_may_read_with_an_exact_count(dbapi, cards):
    alice, bob = cards["alice"], cards["bob"]
    _by_colour(dbapi, "byColour", "GET", paginated=True)
    url = "/database/function/byColour?colour=red&limit=1"
    assert dbapi.client.get(url, headers=alice.headers).get_json()["count"] == 3
    assert dbapi.client.get(url, headers=bob.headers).get_json()["count"] == 3  # b1, a1, a2
    assert _titles(dbapi.client.get("/database/function/byColour?colour=red", headers=bob.headers)) == [
        "a1",
        "a2",
        "b1",
    ]
    assert dbapi.client.get(url, headers=dbapi.admin).get_json()["count"] == 4
    assert dbapi.client.get(url).get_json() == {"documents": [], "count": 0}  # anonymous: nothing granted to *


def test_get_populate_keeps_an_unreadable_target_as_its_id(dbapi, cards):
    alice, bob = cards["alice"], cards["bob"]
    dbapi.create_schema("Pin", {"label": "String", "card": {"type": "Relation", "model": "Card"}}, modelOptions=ACCESS)
    hidden, shown = cards["mine"][3], cards["mine"][0]
    for card in (hidden, shown):
        pin = dbapi.post("Pin", {"label": card["title"], "card": card["_id"]}, headers=alice.headers)
        _share(dbapi, alice, pin["_id"], f"User:{bob.id}", "reader", schema="Pin")
    _make(dbapi, name="pins", operation="GET", selectedSchema="Pin")
    response = dbapi.client.get("/database/function/pins?populate=card", headers=bob.headers)
    assert response.status_code == 200, response.get_json()
    by_label = {doc["label"]: doc["card"] for doc in response.get_json()["documents"]}
    assert by_label["a4"] == hidden["_id"]  # bob may not read a4: it stays its id
    assert by_label["a1"]["_id"] == shown["_id"] and by_label["a1"]["title"] == "a1"


def test_post_grants_owner_to_the_caller_or_the_scope_team(dbapi, cards, admin_headers):
    alice, bob = cards["alice"], cards["bob"]
    _make(
        dbapi,
        name="newCard",
        operation="POST",
        selectedSchema="Card",
        authentication=True,
        inputs=[{"name": "title", "type": "String", "location": "body"}],
        assignments=[{"schemaField": "title", "action": "set", "assignmentField": {"type": "Input", "value": "title"}}],
    )
    response = dbapi.client.post("/database/function/newCard", json={"title": "fresh"}, headers=bob.headers)
    assert response.status_code == 201, response.get_json()
    doc_id = response.get_json()["_id"]
    grants = dbapi.client.get(f"/database/Card/{doc_id}/grants", headers=bob.headers).get_json()
    assert grants["grants"] == [{"subject": f"User:{bob.id}", "relation": "owner"}]
    assert dbapi.client.get(f"/database/Card/{doc_id}", headers=alice.headers).status_code == 404

    settings = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
    assert dbapi.client.put("/config/authentication", json=settings, headers=admin_headers).status_code == 200
    team = dbapi.client.post("/authentication/teams", json={"name": "Crew"}, headers=alice.headers).get_json()["_id"]
    url = f"/database/function/newCard?scope=Team:{team}"
    response = dbapi.client.post(url, json={"title": "crew's"}, headers=alice.headers)
    assert response.status_code == 201, response.get_json()
    grants = dbapi.client.get(f"/database/Card/{response.get_json()['_id']}/grants", headers=alice.headers)
    assert grants.get_json()["grants"] == [{"subject": f"Team:{team}", "relation": "owner"}]
    refused = dbapi.client.post(url, json={"title": "not mine"}, headers=bob.headers)  # bob is not in Crew
    assert refused.status_code == 403 and refused.get_json()["name"] == "FORBIDDEN"
    assert dbapi.list("Card", "title=not mine")["count"] == 0


def test_put_needs_edit_on_every_readable_match(dbapi, cards):
    alice, bob = cards["alice"], cards["bob"]
    for operation in ("PUT", "PATCH"):
        _make(
            dbapi,
            name=f"bump{operation}",
            operation=operation,
            selectedSchema="Card",
            inputs=[{"name": "title", "type": "String", "location": "query"}],
            query={
                "AND": [
                    {"schemaField": "title", "operation": "in", "comparisonField": {"type": "Input", "value": "title"}}
                ]
            },
            assignments=[
                {"schemaField": "n", "action": "increment", "assignmentField": {"type": "Custom", "value": 1}}
            ],
        )
        call = getattr(dbapi.client, operation.lower())
        # a1 is readable but not editable for bob: 403, and nothing is written (a2 neither)
        refused = call(f"/database/function/bump{operation}?title=a1,a2", headers=bob.headers)
        assert refused.status_code == 403, refused.get_json()
        # a3 and a4 are not readable for bob: they do not match at all
        done = call(f"/database/function/bump{operation}?title=a2,a3,a4,b1", headers=bob.headers)
        assert done.status_code == 200, done.get_json()
        assert sorted(d["title"] for d in done.get_json()["documents"]) == ["a2", "b1"]
    counters = {d["title"]: d["n"] for d in dbapi.list("Card")["documents"]}
    assert counters == {"a1": 0, "a2": 2, "a3": 0, "a4": 0, "b1": 2}
    everything = dbapi.client.put("/database/function/bumpPUT?title=a1,a3", headers=dbapi.admin)
    assert everything.status_code == 200 and everything.get_json()["count"] == 2
    assert dbapi.client.put("/database/function/bumpPUT?title=a1", headers=alice.headers).status_code == 200


def test_delete_needs_delete_on_every_readable_match(dbapi, cards):
    alice, bob = cards["alice"], cards["bob"]
    _by_colour(dbapi, "purge", "DELETE")
    # bob reads a1 and a2 (red) but may delete neither: 403, nothing deleted, not even his own b1
    refused = dbapi.client.delete("/database/function/purge?colour=red", headers=bob.headers)
    assert refused.status_code == 403, refused.get_json()
    assert dbapi.list("Card")["count"] == 5
    # alice deletes her red cards; bob's b1 is not readable for her, so it is not matched
    done = dbapi.client.delete("/database/function/purge?colour=red", headers=alice.headers)
    assert done.get_json() == {"deleted": True, "count": 3}
    assert sorted(d["title"] for d in dbapi.list("Card")["documents"]) == ["a4", "b1"]
    # the deleted documents' grants went with them: bob now deletes his own card only
    assert dbapi.client.delete("/database/function/purge?colour=red", headers=bob.headers).get_json()["count"] == 1


def test_scope_on_a_schema_without_access_is_400(dbapi, make_user):
    dbapi.create_schema("Plain", {"title": "String"})
    _make(dbapi, name="plain", operation="GET", selectedSchema="Plain")
    user = make_user()
    assert dbapi.client.get("/database/function/plain", headers=user.headers).status_code == 200
    response = dbapi.client.get("/database/function/plain?scope=Team:abc", headers=user.headers)
    assert response.status_code == 400 and "scope" in response.get_json()["errors"]


def test_scope_is_a_reserved_input_name(dbapi):
    dbapi.create_schema("Plain", {"title": "String"})
    scope = {"name": "scope", "type": "String", "location": "query"}
    refused = _make(dbapi, 400, name="scoped", operation="GET", selectedSchema="Plain", inputs=[scope])
    assert refused["errors"] == {"inputs.0.name": ["Reserved for pagination, sorting, populate and scope"]}
