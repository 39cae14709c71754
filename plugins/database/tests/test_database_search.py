"""Full-text search (``docs/database.md``, "Full-text search"): ``searchable`` fields and the
search language, stemming, the prefix of the last word only, ranking, words across fields, filters, exact
counts, access control, GraphQL, stop words, bad input, adding and removing ``searchable`` on data, and every
write path keeping the index in step (on SQLite the FTS5 table's triggers)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
import sqlalchemy as sa

ACCESS = {"conduit": {"authorization": {"enabled": True}}}


def _titles(dbapi, schema: str, words: str, extra: str = "", headers: dict[str, str] | None = None) -> list[str]:
    query = urlencode({"search": words}) + (f"&{extra}" if extra else "")
    return [doc["title"] for doc in dbapi.list(schema, query, headers=headers)["documents"]]


def _search(dbapi, schema: str, words: str, extra: str = "", headers: dict[str, str] | None = None) -> Any:
    query = urlencode({"search": words}) + (f"&{extra}" if extra else "")
    return dbapi.list(schema, query, headers=headers)


@pytest.fixture()
def articles(dbapi) -> dict[str, Any]:
    return dbapi.create_schema(
        "Article",
        {
            "title": {"type": "String", "searchable": True},
            "body": {"type": "String", "searchable": True},
            "tags": {"type": ["String"], "searchable": True},
            "price": "Number",
            "code": "String",
        },
        modelOptions={"search": {"language": "english"}},
    )


def test_declaring_searchable_fields_and_the_language(dbapi):
    schema = dbapi.create_schema("Doc", {"title": {"type": "String", "searchable": True}, "tags": ["String"]})
    assert schema["fields"]["title"] == {"type": "String", "searchable": True}
    assert schema["modelOptions"]["search"] == {"language": "simple"}
    for bad in ("Number", "Boolean", "Date", "JSON", "ObjectId", ["Number"]):
        response = dbapi.client.post(
            "/admin/database/schemas",
            json={"name": "Bad", "fields": {"x": {"type": bad, "searchable": True}}},
            headers=dbapi.admin,
        )
        assert response.status_code == 400, bad
        assert "fields.x" in response.get_json()["errors"]
    response = dbapi.client.post(
        "/admin/database/schemas",
        json={"name": "Bad", "fields": {"x": {"type": "String", "searchable": "yes"}}},
        headers=dbapi.admin,
    )
    assert response.status_code == 400
    response = dbapi.client.post(
        "/admin/database/schemas",
        json={"name": "Bad", "fields": {"x": "String"}, "modelOptions": {"search": {"language": "klingon"}}},
        headers=dbapi.admin,
    )
    assert response.status_code == 400
    assert "modelOptions.search.language" in response.get_json()["errors"]
    dbapi.update_schema(schema["_id"], modelOptions={"search": {"language": "klingon"}}, expect=400)
    changed = dbapi.update_schema(schema["_id"], modelOptions={"search": {"language": "french"}})
    assert changed["modelOptions"]["search"] == {"language": "french"}


def test_english_stems_and_simple_does_not(dbapi, articles):
    dbapi.post("Article", {"title": "She runs every morning"})
    dbapi.post("Article", {"title": "Connected devices"})
    assert _titles(dbapi, "Article", "running") == ["She runs every morning"]
    assert _titles(dbapi, "Article", "RUN") == ["She runs every morning"]
    assert _titles(dbapi, "Article", "connection") == ["Connected devices"]
    dbapi.create_schema("Plain", {"title": {"type": "String", "searchable": True}})
    dbapi.post("Plain", {"title": "She runs every morning"})
    assert _titles(dbapi, "Plain", "running morning") == []
    assert _titles(dbapi, "Plain", "RUNS morning") == ["She runs every morning"]


def test_only_the_last_word_matches_as_a_prefix(dbapi, articles):
    dbapi.post("Article", {"title": "Database systems", "body": "indexes and queries"})
    assert _titles(dbapi, "Article", "datab") == ["Database systems"]
    assert _titles(dbapi, "Article", "database sys") == ["Database systems"]
    assert _titles(dbapi, "Article", "datab systems") == []  # not the last word: a whole word only
    assert _titles(dbapi, "Article", "index quer") == ["Database systems"]


def test_every_word_in_some_field_not_necessarily_the_same(dbapi, articles):
    dbapi.post("Article", {"title": "Red", "body": "a comfortable shoe"})
    dbapi.post("Article", {"title": "Blue", "body": "a red car"})
    dbapi.post("Article", {"title": "Green", "tags": ["red", "shoe"]})
    assert sorted(_titles(dbapi, "Article", "red shoe")) == ["Green", "Red"]
    assert _titles(dbapi, "Article", "red -shoe") == ["Blue"]
    assert sorted(_titles(dbapi, "Article", "red")) == ["Blue", "Green", "Red"]


def test_best_match_first_ties_by_id_and_sort_wins(dbapi, articles):
    weak = dbapi.post("Article", {"title": "apple banana cherry date elderberry fig grape", "price": 1})
    strong = dbapi.post("Article", {"title": "apple apple apple", "price": 3})
    twins = [dbapi.post("Article", {"title": "pear", "price": n}) for n in (5, 6, 7)]
    found = _search(dbapi, "Article", "apple")
    assert [doc["_id"] for doc in found["documents"]] == [strong["_id"], weak["_id"]]
    assert [doc["_id"] for doc in _search(dbapi, "Article", "pear")["documents"]] == sorted(d["_id"] for d in twins)
    by_price = _search(dbapi, "Article", "apple", "sort=price")
    assert [doc["_id"] for doc in by_price["documents"]] == [weak["_id"], strong["_id"]]


def test_filters_paging_select_and_exact_counts(dbapi, articles):
    for n in range(7):
        dbapi.post("Article", {"title": f"lamp number {n}", "price": n, "code": "even" if n % 2 == 0 else "odd"})
    dbapi.post("Article", {"title": "table", "price": 1})
    page = _search(dbapi, "Article", "lamp", "limit=2&sort=-price")
    assert page["count"] == 7
    assert [doc["price"] for doc in page["documents"]] == [6, 5]
    assert _search(dbapi, "Article", "lamp", "code=even&price[$gte]=2&limit=1")["count"] == 3
    assert _search(dbapi, "Article", "lamp", "limit=1&skip=6")["count"] == 7
    assert _search(dbapi, "Article", "lamp", "count=none&limit=1") == {
        "documents": [_search(dbapi, "Article", "lamp", "limit=1")["documents"][0]]
    }
    selected = _search(dbapi, "Article", "table", "select=price")
    assert selected == {"documents": [{"_id": selected["documents"][0]["_id"], "price": 1}], "count": 1}


def test_stop_words_and_punctuation_find_nothing(dbapi, articles):
    dbapi.post("Article", {"title": "The house on the hill"})
    for words in ("the", "The on", "!!! ...", "", "-house"):
        assert _search(dbapi, "Article", words) == {"documents": [], "count": 0}, words
    assert _titles(dbapi, "Article", "the house") == ["The house on the hill"]
    assert _titles(dbapi, "Article", 'house "hill"') == ["The house on the hill"]


def test_bad_input_is_a_400(dbapi, articles):
    dbapi.create_schema("Plain", {"title": "String"})
    response = dbapi.client.get("/database/Plain?search=x", headers=dbapi.admin)
    assert response.status_code == 400
    assert "searchable" in response.get_json()["message"]
    assert dbapi.client.get("/database/Article?search=" + "a" * 501, headers=dbapi.admin).status_code == 400
    many = " ".join(f"w{n}" for n in range(40))
    assert dbapi.client.get(f"/database/Article?search={many}", headers=dbapi.admin).status_code == 400
    assert dbapi.client.get("/database/Article?search=x&sort=nope", headers=dbapi.admin).status_code == 400


def test_adding_and_removing_searchable_on_existing_data(dbapi):
    schema = dbapi.create_schema("Book", {"title": "String", "blurb": "String"})
    dbapi.many("Book", [{"title": "Dune", "blurb": "sand worms"}, {"title": "Emma", "blurb": "matchmaking"}])
    assert dbapi.client.get("/database/Book?search=sand", headers=dbapi.admin).status_code == 400
    fields = {"title": {"type": "String", "searchable": True}, "blurb": {"type": "String", "searchable": True}}
    dbapi.update_schema(schema["_id"], fields=fields)
    assert _titles(dbapi, "Book", "sand") == ["Dune"]
    assert _titles(dbapi, "Book", "emma") == ["Emma"]
    dbapi.update_schema(schema["_id"], fields={**fields, "blurb": "String"})
    assert _titles(dbapi, "Book", "sand") == []
    assert _titles(dbapi, "Book", "dune") == ["Dune"]
    dbapi.update_schema(schema["_id"], modelOptions={"search": {"language": "english"}})
    dbapi.post("Book", {"title": "Walking"})
    assert _titles(dbapi, "Book", "walks") == ["Walking"]
    dbapi.update_schema(schema["_id"], fields={"title": "String", "blurb": "String"})
    assert dbapi.client.get("/database/Book?search=dune", headers=dbapi.admin).status_code == 400
    assert dbapi.list("Book")["count"] == 3


def test_an_extension_field_can_be_searchable(dbapi):
    dbapi.create_schema("Gadget", {"name": "String"})
    dbapi.post("Gadget", {"name": "g1"})
    response = dbapi.client.post(
        "/admin/database/schemas/Gadget/extensions",
        json={"fields": {"notes": {"type": "String", "searchable": True}}},
        headers=dbapi.admin,
    )
    assert response.status_code == 200, response.get_json()
    dbapi.post("Gadget", {"name": "g2", "notes": "waterproof"})
    assert [d["name"] for d in _search(dbapi, "Gadget", "water")["documents"]] == ["g2"]


def test_every_write_path_keeps_the_index_in_step(dbapi, articles):
    doc = dbapi.post("Article", {"title": "alpha"})
    url = f"/database/Article/{doc['_id']}"
    assert _titles(dbapi, "Article", "alpha") == ["alpha"]
    assert dbapi.client.put(url, json={"title": "bravo"}, headers=dbapi.admin).status_code == 200
    assert _titles(dbapi, "Article", "alpha") == [] and _titles(dbapi, "Article", "bravo") == ["bravo"]
    assert dbapi.client.patch(url, json={"body": "charlie"}, headers=dbapi.admin).status_code == 200
    assert _titles(dbapi, "Article", "bravo charlie") == ["bravo"]
    assert dbapi.client.patch(url, json={"body": None}, headers=dbapi.admin).status_code == 200
    assert _titles(dbapi, "Article", "charlie") == []
    assert dbapi.client.delete(url, headers=dbapi.admin).status_code == 200
    assert _titles(dbapi, "Article", "bravo") == []
    created = dbapi.many("Article", [{"title": "delta one"}, {"title": "delta two"}])
    assert created["count"] == 2
    assert sorted(_titles(dbapi, "Article", "delta")) == ["delta one", "delta two"]
    made = dbapi.graphql('mutation { createArticle(data: {title: "echo"}) { _id } }')
    assert "errors" not in made, made
    echo_id = made["data"]["createArticle"]["_id"]
    assert _titles(dbapi, "Article", "echo") == ["echo"]
    changed = dbapi.graphql(f'mutation {{ updateArticle(_id: "{echo_id}", data: {{title: "foxtrot"}}) {{ _id }} }}')
    assert "errors" not in changed, changed
    assert _titles(dbapi, "Article", "echo") == [] and _titles(dbapi, "Article", "foxtrot") == ["foxtrot"]
    gone = dbapi.graphql(f'mutation {{ deleteArticle(_id: "{echo_id}") {{ deleted }} }}')
    assert "errors" not in gone, gone
    assert _titles(dbapi, "Article", "foxtrot") == []


def test_graphql_search_and_count(dbapi, articles):
    dbapi.post("Article", {"title": "solar panel", "price": 10})
    dbapi.post("Article", {"title": "solar power bank", "price": 20})
    dbapi.post("Article", {"title": "wind turbine", "price": 30})
    got = dbapi.graphql(
        '{ Article(search: "solar", sort: "-price") { title } '
        'Article__count(search: "sol", where: {price_lt: 15}) '
        'all: Article__count(search: "solar") none: Article__count(search: "the") }'
    )
    assert "errors" not in got, got
    assert got["data"] == {
        "Article": [{"title": "solar power bank"}, {"title": "solar panel"}],
        "Article__count": 1,
        "all": 2,
        "none": 0,
    }
    dbapi.create_schema("Plain", {"title": "String"})
    refused = dbapi.graphql('{ Plain(search: "x") { title } }')
    assert refused["errors"] and refused.get("data") is None


def test_a_user_finds_only_what_it_may_read(dbapi, make_user):
    dbapi.create_schema("Memo", {"title": {"type": "String", "searchable": True}, "n": "Number"}, modelOptions=ACCESS)
    alice, bob = make_user(), make_user()
    for n in range(3):
        dbapi.post("Memo", {"title": f"budget draft {n}", "n": n}, headers=alice.headers)
    dbapi.post("Memo", {"title": "budget bob", "n": 9}, headers=bob.headers)
    found = _search(dbapi, "Memo", "budget", "limit=1", headers=alice.headers)
    assert found["count"] == 3 and found["documents"][0]["title"].startswith("budget draft")
    assert _titles(dbapi, "Memo", "budget", headers=bob.headers) == ["budget bob"]
    assert _search(dbapi, "Memo", "budget draft", headers=bob.headers) == {"documents": [], "count": 0}
    assert _search(dbapi, "Memo", "budget", "limit=1")["count"] == 4  # the master key reads everything
    count = dbapi.graphql('{ Memo__count(search: "budget") }', headers=bob.headers)
    assert count == {"data": {"Memo__count": 1}}


def test_the_per_schema_openapi_documents_search(dbapi, articles):
    dbapi.create_schema("Plain", {"title": "String"})
    spec = dbapi.client.get("/openapi.json").get_json()
    listing = spec["paths"]["/database/Article"]["get"]["parameters"]
    search = next(p for p in listing if p["name"] == "search")
    assert "body, tags, title" in search["description"]
    assert not [p for p in spec["paths"]["/database/Plain"]["get"]["parameters"] if p["name"] == "search"]
    changes = spec["paths"]["/database/Article/changes"]["get"]["parameters"]
    assert [p for p in changes if p["name"] == "search"]


def test_sqlite_keeps_an_fts5_table_that_backups_skip(app, dbapi, articles, db):
    """SQLite's index is an FTS5 table of its own: a backup lists the document table, not the FTS5 tables."""
    from trellis.backups import tables as backup_tables

    connection = db.connection()
    runtime = [t.table.name for t in backup_tables.runtime_tables(app.extensions["trellis"].hooks.hook, connection)]
    model = [t.name for t in backup_tables.model_tables(connection)]
    assert articles["_id"] and not [name for name in runtime + model if name.startswith("dbfts_")]
    if connection.dialect.name == "sqlite":
        names = set(connection.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'table'")).scalars())
        assert {f"dbfts_{articles['_id']}", f"dbfts_{articles['_id']}_data"} <= names
    else:
        indexes = set(
            connection.execute(
                sa.text("SELECT indexname FROM pg_indexes WHERE tablename = :t"), {"t": f"dbdoc_{articles['_id']}"}
            ).scalars()
        )
        assert [name for name in indexes if name.startswith("dbfts_")]


def test_postgresql_answers_from_the_gin_index(app, dbapi, articles, db):
    """The query's expression is the index's (a JSONB subscript would not be): the plan uses the index."""
    from trellis_database import search
    from trellis_database.registry import snapshot

    connection = db.connection()
    if connection.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's GIN index")
    dbapi.post("Article", {"title": "quartz clock"})
    schema = snapshot().document_schema("Article")
    statement = sa.select(schema.table.c.id).where(search.condition(schema, "quartz clo", "postgresql"))
    sql = statement.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True})
    connection.execute(sa.text("SET LOCAL enable_seqscan = off"))
    plan = "\n".join(connection.execute(sa.text(f"EXPLAIN {sql}")).scalars())
    index = search.State.of(schema.storage["search"]).index
    assert f"Bitmap Index Scan on {index}" in plan, plan
    assert connection.execute(statement).scalars().all() != []


def test_a_custom_endpoint_write_is_indexed_too(dbapi, articles):
    response = dbapi.client.post(
        "/admin/database/customEndpoints",
        headers=dbapi.admin,
        json={
            "name": "addArticle",
            "operation": "POST",
            "selectedSchema": "Article",
            "inputs": [{"name": "title", "type": "String", "location": "body"}],
            "assignments": [
                {"schemaField": "title", "action": "set", "assignmentField": {"type": "Input", "value": "title"}}
            ],
        },
    )
    assert response.status_code == 201, response.get_json()
    made = dbapi.client.post("/database/function/addArticle", json={"title": "Gardening tools"})
    assert made.status_code == 201, made.get_json()
    assert _titles(dbapi, "Article", "garden") == ["Gardening tools"]


def test_aggregates_take_the_same_search(dbapi, articles, make_user):
    """``search`` on ``/aggregate`` and ``X__aggregate``/``X_aggregate`` groups exactly what the list finds."""
    dbapi.post("Article", {"title": "running shoes", "code": "a", "price": 10})
    dbapi.post("Article", {"title": "runner socks", "code": "a", "price": 5})
    dbapi.post("Article", {"title": "runs daily", "code": "b", "price": 7})
    dbapi.post("Article", {"title": "walking shoes", "code": "b", "price": 20})

    def groups(query: str) -> Any:
        response = dbapi.client.get(f"/database/Article/aggregate?{query}", headers=dbapi.admin)
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    got = groups(urlencode({"search": "run", "groupBy": "code", "count": "true", "sum": "price"}))
    # "run" stems "running" and "runs" (english) and, as the last word, is a prefix of "runner"
    assert got == {
        "groups": [
            {"key": {"code": "a"}, "count": 2, "sum": {"price": 15}},
            {"key": {"code": "b"}, "count": 1, "sum": {"price": 7}},
        ],
        "count": 2,
    }
    assert _search(dbapi, "Article", "run")["count"] == 3
    assert groups(urlencode({"search": "shoes", "count": "true", "price[$gt]": "15"}))["groups"] == [
        {"key": {}, "count": 1}
    ]
    assert groups(urlencode({"search": "the !", "count": "true"}))["groups"] == [{"key": {}, "count": 0}]
    dbapi.create_schema("Plain", {"title": "String"})
    refused = dbapi.client.get("/database/Plain/aggregate?search=x&count=true", headers=dbapi.admin)
    assert refused.status_code == 400 and "search" in refused.get_json()["errors"]
    got = dbapi.graphql(
        '{ a: Article__aggregate(search: "run", count: true) { count groups { key count } } '
        'b: Article_aggregate(search: "shoes", groupBy: ["code"], count: true) { groups { key count } } }'
    )
    assert got == {
        "data": {
            "a": {"count": 1, "groups": [{"key": {}, "count": 3}]},
            "b": {"groups": [{"key": {"code": "a"}, "count": 1}, {"key": {"code": "b"}, "count": 1}]},
        }
    }
    dbapi.create_schema("Memo", {"title": {"type": "String", "searchable": True}}, modelOptions=ACCESS)
    alice, bob = make_user(), make_user()
    dbapi.post("Memo", {"title": "budget alice"}, headers=alice.headers)
    dbapi.post("Memo", {"title": "budget bob"}, headers=bob.headers)
    mine = dbapi.client.get("/database/Memo/aggregate?search=budget&count=true", headers=bob.headers)
    assert mine.status_code == 200 and mine.get_json()["groups"] == [{"key": {}, "count": 1}]
