"""Long text in indexed fields (a 400, never PostgreSQL's btree 500) and fields that become required."""

from __future__ import annotations


def test_indexed_strings_hold_1024_characters_unless_declared(dbapi):
    dbapi.create_schema(
        "Texts",
        {
            "title": "String",
            "code": {"type": "String", "unique": True},
            "body": {"type": "String", "index": False},
            "short": {"type": "String", "maxLength": 5},
        },
    )
    assert dbapi.post("Texts", {"title": "t" * 1024, "code": "c" * 1024, "body": "b" * 100_000})
    for field in ("title", "code"):
        refused = dbapi.post("Texts", {field: "x" * 3000}, expect=400)
        assert refused["errors"][field][0].startswith("Longer than 1024 characters"), refused
    assert dbapi.post("Texts", {"short": "123456"}, expect=400)["errors"] == {"short": ["Longer than 5 characters"]}


def test_declared_max_length_never_passes_the_index_limit_in_bytes(dbapi):
    dbapi.create_schema("Wide", {"title": {"type": "String", "maxLength": 5000}})
    assert dbapi.post("Wide", {"title": "é" * 999})  # 1,998 bytes
    refused = dbapi.post("Wide", {"title": "😀" * 600}, expect=400)  # 2,400 bytes
    assert "bytes" in refused["errors"]["title"][0]


def test_max_length_is_validated_in_the_definition(dbapi):
    for definition in (
        {"type": "Number", "maxLength": 3},
        {"type": "String", "maxLength": 0},
        {"type": "String", "maxLength": True},
    ):
        dbapi.create_schema("Bad", {"f": definition}, expect=400)
    created = dbapi.create_schema("Good", {"f": {"type": ["String"], "maxLength": 3}})
    assert created["fields"]["f"]["maxLength"] == 3
    assert dbapi.post("Good", {"f": ["abcd"]}, expect=400)


def test_a_required_field_without_default_is_refused_while_documents_lack_it(dbapi):
    schema = dbapi.create_schema("Grown", {"title": "String"})
    dbapi.post("Grown", {"title": "old"})
    refused = dbapi.update_schema(
        schema["_id"], expect=409, fields={"title": "String", "rank": {"type": "Number", "required": True}}
    )
    assert "fields.rank" in refused["errors"]
    assert [d.get("rank") for d in dbapi.list("Grown")["documents"]] == [None]


def test_a_required_field_with_a_default_fills_existing_documents(dbapi):
    schema = dbapi.create_schema("Filled", {"title": "String"})
    dbapi.post("Filled", {"title": "old"})
    dbapi.update_schema(
        schema["_id"], fields={"title": "String", "rank": {"type": "Number", "required": True, "default": 3}}
    )
    documents = dbapi.list("Filled", "rank=3")
    assert documents["count"] == 1 and documents["documents"][0]["rank"] == 3  # the indexed column follows


def test_making_an_existing_field_required_checks_the_documents(dbapi):
    schema = dbapi.create_schema("Tightened", {"title": "String"})
    dbapi.post("Tightened", {"title": "has one"})
    dbapi.update_schema(schema["_id"], fields={"title": {"type": "String", "required": True}})
    dbapi.post("Tightened", {}, expect=400)
    other = dbapi.create_schema("Loose", {"title": "String", "n": "Number"})
    dbapi.post("Loose", {"n": 1})
    dbapi.update_schema(other["_id"], expect=409, fields={"title": {"type": "String", "required": True}, "n": "Number"})
