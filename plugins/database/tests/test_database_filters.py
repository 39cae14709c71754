"""One filter language, two evaluators: the SQL of a list and the Python predicate of a live subscription
(``Compiler.predicate``) are built from the same prepared conditions and must select the same documents,
on both databases, over a corpus that includes missing fields and values of another type."""

from __future__ import annotations

import pytest

from trellis.errors import APIError
from trellis_database import documents
from trellis_database.query import Compiler, parse_where
from trellis_database.registry import snapshot

FILTERS = [
    {"title": "apple"},
    {"title": {"$ne": "apple"}},
    {"title": {"$contains": "AP"}},
    {"title": {"$contains": "ÉCL"}},
    {"title": {"$in": ["apple", "pear"]}},
    {"title": {"$nin": ["apple"]}},
    {"title": {"$lt": "b"}},
    {"title": {"$gte": "pear"}},
    {"title": {"$in": []}},
    {"title": {"$nin": []}},
    {"title": {"$exists": False}},
    {"price": {"$gt": 2}},
    {"price": {"$lte": 2.5}},
    {"price": 3},
    {"price": "3"},
    {"price": {"$ne": 3}},
    {"price": {"$in": [1, 3]}},
    {"price": {"$nin": "1,3"}},
    {"price": {"$gt": 1, "$lt": 4}},
    {"active": True},
    {"active": "false"},
    {"active": {"$ne": False}},
    {"active": {"$in": [True]}},
    {"active": {"$exists": False}},
    {"tags": "red"},
    {"tags": {"$contains": "blue"}},
    {"tags": {"$nin": ["red"]}},
    {"tags": {"$ne": "red"}},
    {"tags": {"$in": ["red", "green"]}},
    {"tags": {"$exists": True}},
    {"when": {"$gte": "2026-01-01"}},
    {"when": {"$lt": "2026-06-01T12:00:00+02:00"}},
    {"createdAt": {"$gt": "2000-01-01T00:00:00Z"}},
    {"updatedAt": {"$lt": "2000-01-01"}},
    {"size": {"$gt": 1}},
    {"size": {"$ne": 2}},
    {"size": 2},
    {"size": {"$exists": True}},
    {"meta": {"$exists": True}},
    {"$or": [{"price": {"$lt": 2}}, {"active": True}]},
    {"$and": [{"price": {"$gte": 1}}, {"$or": [{"tags": "red"}, {"title": {"$contains": "e"}}]}]},
    {"OR": []},
]


@pytest.fixture()
def corpus(dbapi):
    schema = dbapi.create_schema(
        "Fruit",
        {
            "title": "String",
            "price": "Number",
            "active": "Boolean",
            "tags": ["String"],
            "when": "Date",
            "size": "String",
            "meta": "JSON",
        },
    )
    docs = [
        {"title": "apple", "price": 1, "active": True, "tags": ["red", "green"], "when": "2026-03-01", "size": "L"},
        {"title": "pear", "price": 2.5, "active": False, "tags": ["green"], "meta": {"a": 1}},
        {"title": "Éclair", "price": 3, "tags": [], "when": "2025-12-31T23:00:00Z"},
        {"title": "banana", "active": True, "tags": ["blue", "yellow"], "size": "M"},
        {"price": 0},
        {"title": "apricot", "price": -4, "active": False, "when": "2026-06-01T10:00:00Z", "meta": None},
    ]
    for doc in docs:
        dbapi.post("Fruit", doc)
    # A type change: documents written before keep their text; the typed column ignores it.
    dbapi.update_schema(schema["_id"], fields={**schema["fields"], "size": "Number"})
    for size in (1, 2, 3):
        dbapi.post("Fruit", {"title": f"size {size}", "size": size})
    return dbapi.list("Fruit", "limit=100")["documents"]


@pytest.mark.parametrize("where", FILTERS, ids=[str(f) for f in FILTERS])
def test_python_predicate_and_sql_select_the_same_documents(corpus, where):
    schema = snapshot().document_schema("Fruit")
    compiler = Compiler(schema, documents.dialect())
    condition = parse_where(where)
    from_sql = {doc["_id"] for doc in documents.find(schema, condition, limit=1000, count=False)[0]}
    predicate = compiler.predicate(condition)
    from_python = {doc["_id"] for doc in corpus if predicate(doc)}
    assert from_python == from_sql
    assert len(corpus) == 9


@pytest.mark.parametrize(
    "where,key",
    [
        ("price", "where"),
        ({"nope": 1}, "nope"),
        ({"price": {"$near": 1}}, "price[$near]"),
        ({"price": "cheap"}, "price"),
        ({"meta": {"a": 1}}, "meta"),
        ({"tags": {"$lt": "x"}}, "tags[$lt]"),
        ({"$or": {"price": 1}}, "where.$or"),
        ({"price": {"$in": [{"x": 1}]}}, "price[$in]"),
    ],
)
def test_bad_filters_are_refused_alike(corpus, where, key):
    """A filter the list would refuse is refused for a subscription too, with the same message."""
    schema = snapshot().document_schema("Fruit")
    with pytest.raises(APIError) as caught:
        Compiler(schema, documents.dialect()).predicate(parse_where(where))
    assert caught.value.status == 400 and key in caught.value.errors
