"""Aggregates (``docs/database.md``, "Aggregation"): every operation, groups
of one and more fields, date buckets (weeks from Monday, year boundaries, UTC), sorts, limit and the group
count, filters with ``where``, null keys, and every bad input as a 400 naming its parameter."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trellis import db as trellis_db
from trellis.db import UTCDateTime


@pytest.fixture()
def sales(dbapi) -> dict[str, Any]:
    dbapi.create_schema("Customer", {"name": "String"})
    ann = dbapi.post("Customer", {"name": "Ann"})["_id"]
    bob = dbapi.post("Customer", {"name": "Bob"})["_id"]
    dbapi.create_schema(
        "Sale",
        {
            "region": "String",
            "amount": "Number",
            "paid": "Boolean",
            "when": "Date",
            "customer": {"type": "Relation", "model": "Customer"},
            "tags": ["String"],
            "meta": "JSON",
        },
    )
    docs = [
        {"region": "north", "amount": 10, "paid": True, "when": "2024-12-30T10:00:00Z", "customer": ann},  # a Monday
        {"region": "north", "amount": 5.5, "paid": False, "when": "2025-01-05T23:59:59Z", "customer": bob},  # Sunday
        {"region": "south", "amount": 20, "paid": True, "when": "2025-01-06T00:00:00Z", "customer": ann},  # Monday
        {"region": "south", "amount": 2.5, "paid": True, "when": "2025-02-28T12:00:00Z"},
        {"amount": 7, "tags": ["x"]},
        # 23:30 at UTC-1 is 00:30 on 1 January 2024 in UTC: it belongs to 2024
        {"region": "north", "when": "2023-12-31T23:30:00-01:00", "paid": False},
    ]
    created = dbapi.many("Sale", docs)["docs"]
    return {"ann": ann, "bob": bob, "docs": created}


def aggregate(dbapi, query: str, schema: str = "Sale", headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = dbapi.client.get(
        f"/database/{schema}/aggregate?{query}", headers=dbapi.admin if headers is None else headers
    )
    assert response.status_code == 200, (query, response.get_json())
    return response.get_json()


def refused(dbapi, query: str, parameter: str) -> str:
    response = dbapi.client.get(f"/database/Sale/aggregate?{query}", headers=dbapi.admin)
    assert response.status_code == 400, (query, response.get_json())
    body = response.get_json()
    assert body["name"] == "INVALID_ARGUMENTS" and parameter in body["errors"], (query, body)
    return body["message"]


def test_every_operation_per_group_with_the_null_group_first(dbapi, sales):
    answer = aggregate(dbapi, "groupBy=region&count=true&sum=amount&avg=amount&min=amount,when&max=amount,when")
    assert answer == {
        "count": 3,
        "groups": [
            {
                "key": {"region": None},
                "count": 1,
                "sum": {"amount": 7},
                "avg": {"amount": 7},
                "min": {"amount": 7, "when": None},
                "max": {"amount": 7, "when": None},
            },
            {
                "key": {"region": "north"},
                "count": 3,
                "sum": {"amount": 15.5},
                "avg": {"amount": 7.75},
                "min": {"amount": 5.5, "when": "2024-01-01T00:30:00.000000Z"},
                "max": {"amount": 10, "when": "2025-01-05T23:59:59.000000Z"},
            },
            {
                "key": {"region": "south"},
                "count": 2,
                "sum": {"amount": 22.5},
                "avg": {"amount": 11.25},
                "min": {"amount": 2.5, "when": "2025-01-06T00:00:00.000000Z"},
                "max": {"amount": 20, "when": "2025-02-28T12:00:00.000000Z"},
            },
        ],
    }


def test_only_the_requested_operations_appear(dbapi, sales):
    assert aggregate(dbapi, "groupBy=paid") == {
        "count": 3,
        "groups": [{"key": {"paid": None}}, {"key": {"paid": False}}, {"key": {"paid": True}}],
    }
    assert aggregate(dbapi, "groupBy=paid&max=amount&count=false")["groups"][2] == {
        "key": {"paid": True},
        "max": {"amount": 20},
    }


def test_without_group_by_one_group_covers_everything(dbapi, sales):
    assert aggregate(dbapi, "count=true&sum=amount&avg=amount") == {
        "count": 1,
        "groups": [{"key": {}, "count": 6, "sum": {"amount": 45}, "avg": {"amount": 9}}],
    }
    assert aggregate(dbapi, "groupBy=&count=true&sum=")["groups"] == [{"key": {}, "count": 6}]
    # nothing matches: still the one group, of no documents (sum 0, avg null)
    assert aggregate(dbapi, "count=true&sum=amount&avg=amount&region=west") == {
        "count": 1,
        "groups": [{"key": {}, "count": 0, "sum": {"amount": 0}, "avg": {"amount": None}}],
    }
    # with groups, no match is no group
    assert aggregate(dbapi, "groupBy=region&count=true&region=west") == {"count": 0, "groups": []}


def test_several_group_fields_and_relations(dbapi, sales):
    answer = aggregate(dbapi, "groupBy=region,paid&count=true")
    assert [(g["key"]["region"], g["key"]["paid"], g["count"]) for g in answer["groups"]] == [
        (None, None, 1),
        ("north", False, 2),
        ("north", True, 1),
        ("south", True, 2),
    ]
    assert answer["count"] == 4
    by_customer = aggregate(dbapi, "groupBy=customer&sum=amount&sort=-sum.amount")
    assert [(g["key"]["customer"], g["sum"]["amount"]) for g in by_customer["groups"]] == [
        (sales["ann"], 30),
        (None, 9.5),
        (sales["bob"], 5.5),
    ]


def _buckets(dbapi, query: str) -> list[tuple[Any, int]]:
    return [(g["key"]["when"], g["count"]) for g in aggregate(dbapi, f"{query}&count=true")["groups"]]


def test_date_buckets_in_utc_with_weeks_from_monday(dbapi, sales):
    assert _buckets(dbapi, "groupBy=when:day") == [
        (None, 1),
        ("2024-01-01T00:00:00.000000Z", 1),
        ("2024-12-30T00:00:00.000000Z", 1),
        ("2025-01-05T00:00:00.000000Z", 1),
        ("2025-01-06T00:00:00.000000Z", 1),
        ("2025-02-28T00:00:00.000000Z", 1),
    ]
    # Monday 30 December 2024 to Sunday 5 January 2025 is one week, across the new year
    assert _buckets(dbapi, "groupBy=when:week") == [
        (None, 1),
        ("2024-01-01T00:00:00.000000Z", 1),  # 1 January 2024 was a Monday
        ("2024-12-30T00:00:00.000000Z", 2),
        ("2025-01-06T00:00:00.000000Z", 1),
        ("2025-02-24T00:00:00.000000Z", 1),
    ]
    assert _buckets(dbapi, "groupBy=when:month") == [
        (None, 1),
        ("2024-01-01T00:00:00.000000Z", 1),
        ("2024-12-01T00:00:00.000000Z", 1),
        ("2025-01-01T00:00:00.000000Z", 2),
        ("2025-02-01T00:00:00.000000Z", 1),
    ]
    assert _buckets(dbapi, "groupBy=when:year") == [
        (None, 1),
        ("2024-01-01T00:00:00.000000Z", 2),
        ("2025-01-01T00:00:00.000000Z", 3),
    ]
    # without a bucket, the value itself (as documents show it)
    assert _buckets(dbapi, "groupBy=when&when[$gte]=2025-01-01")[0] == ("2025-01-05T23:59:59.000000Z", 1)


def test_a_week_starting_on_a_sunday_or_in_a_leap_year(dbapi):
    dbapi.create_schema("Day", {"when": "Date"})
    days = ["2023-01-01", "2023-01-02", "2024-02-29", "2024-03-03", "2024-03-04", "2020-12-31", "2021-01-03"]
    dbapi.many("Day", [{"when": f"{day}T12:00:00Z"} for day in days])
    answer = aggregate(dbapi, "groupBy=when:week&count=true", schema="Day")
    assert [(g["key"]["when"][:10], g["count"]) for g in answer["groups"]] == [
        ("2020-12-28", 2),  # Thursday 31 December 2020 and Sunday 3 January 2021
        ("2022-12-26", 1),  # Sunday 1 January 2023 ends the week of Monday 26 December
        ("2023-01-02", 1),
        ("2024-02-26", 2),  # Thursday 29 February and Sunday 3 March 2024
        ("2024-03-04", 1),
    ]


def _set_created(name: str, stamps: dict[str, str]) -> None:
    """Give documents chosen creation times (the server sets createdAt; tests need the calendar's edges)."""
    storage = trellis_db.session.execute(
        sa.text("SELECT storage FROM database_schemas WHERE name = :n"), {"n": name}
    ).scalar_one()
    table = (storage if isinstance(storage, dict) else json.loads(storage))["table"]
    update = sa.text(f"UPDATE {table} SET created_at = :at WHERE id = :id").bindparams(
        sa.bindparam("at", type_=UTCDateTime())
    )
    for doc_id, stamp in stamps.items():
        trellis_db.session.execute(update, {"at": datetime.fromisoformat(stamp).astimezone(UTC), "id": doc_id})


def test_created_at_buckets_and_extremes(dbapi, sales):
    ids = [doc["_id"] for doc in sales["docs"]]
    stamps = [
        "2024-12-31T23:59:59.999999+00:00",  # Tuesday
        "2025-01-01T00:00:00+00:00",  # Wednesday: same week, next year
        "2025-01-05T23:00:00-02:00",  # Monday 6 January 01:00 UTC
        "2025-03-01T00:00:00+00:00",
        "2025-03-01T08:00:00+00:00",
        "2025-03-02T08:00:00+00:00",
    ]
    _set_created("Sale", dict(zip(ids, stamps, strict=True)))
    weeks = aggregate(dbapi, "groupBy=createdAt:week&count=true")
    assert [(g["key"]["createdAt"], g["count"]) for g in weeks["groups"]] == [
        ("2024-12-30T00:00:00.000000Z", 2),
        ("2025-01-06T00:00:00.000000Z", 1),
        ("2025-02-24T00:00:00.000000Z", 3),  # Saturday 1 and Sunday 2 March 2025
    ]
    years = aggregate(dbapi, "groupBy=createdAt:year&count=true&min=createdAt&max=createdAt")
    assert years["groups"] == [
        {
            "key": {"createdAt": "2024-01-01T00:00:00.000000Z"},
            "count": 1,
            "min": {"createdAt": "2024-12-31T23:59:59.999999Z"},
            "max": {"createdAt": "2024-12-31T23:59:59.999999Z"},
        },
        {
            "key": {"createdAt": "2025-01-01T00:00:00.000000Z"},
            "count": 5,
            "min": {"createdAt": "2025-01-01T00:00:00.000000Z"},
            "max": {"createdAt": "2025-03-02T08:00:00.000000Z"},
        },
    ]
    days = aggregate(dbapi, "groupBy=createdAt:day&count=true&sort=-count&limit=1")
    assert days == {"count": 5, "groups": [{"key": {"createdAt": "2025-03-01T00:00:00.000000Z"}, "count": 2}]}
    # the ISO form documents use
    document = dbapi.client.get(f"/database/Sale/{ids[0]}", headers=dbapi.admin).get_json()
    exact = aggregate(dbapi, f"groupBy=createdAt&_id={ids[0]}")
    assert exact["groups"][0]["key"]["createdAt"] == document["createdAt"] == "2024-12-31T23:59:59.999999Z"


def test_sort_by_count_keys_and_operations(dbapi, sales):
    def order(query: str) -> list[Any]:
        return [g["key"]["region"] for g in aggregate(dbapi, f"groupBy=region&{query}")["groups"]]

    assert order("sort=count") == [None, "south", "north"]
    assert order("sort=-count") == ["north", "south", None]
    assert order("sort=region") == [None, "north", "south"]
    assert order("sort=-region") == ["south", "north", None]  # missing last when descending, as lists do
    assert order("sort=-sum.amount") == ["south", "north", None]
    assert order("sort=avg.amount") == [None, "north", "south"]
    assert order("sort=max.when") == [None, "north", "south"]  # sorting by an operation not asked for
    assert order("sort=-count,-region") == ["north", "south", None]
    two = aggregate(dbapi, "groupBy=region,paid&count=true&sort=-count,paid")
    assert [(g["key"]["region"], g["key"]["paid"]) for g in two["groups"]] == [
        ("north", False),
        ("south", True),
        (None, None),
        ("north", True),
    ]


def test_limit_keeps_the_count_of_every_group(dbapi, sales):
    answer = aggregate(dbapi, "groupBy=when:day&count=true&sort=-when&limit=2")
    assert answer["count"] == 6
    assert [g["key"]["when"] for g in answer["groups"]] == [
        "2025-02-28T00:00:00.000000Z",
        "2025-01-06T00:00:00.000000Z",
    ]
    assert len(aggregate(dbapi, "groupBy=_id&limit=1000")["groups"]) == 6
    assert aggregate(dbapi, "groupBy=_id")["count"] == 6


def test_filters_and_where_combined(dbapi, sales):
    where = quote(json.dumps({"$or": [{"region": "south"}, {"amount": {"$lt": 6}}]}))
    answer = aggregate(dbapi, f"groupBy=region&count=true&sum=amount&paid=true&where={where}")
    assert answer == {"count": 1, "groups": [{"key": {"region": "south"}, "count": 2, "sum": {"amount": 22.5}}]}
    answer = aggregate(dbapi, f"groupBy=paid&count=true&amount[$gte]=5&where={where}")
    assert [(g["key"]["paid"], g["count"]) for g in answer["groups"]] == [(False, 1), (True, 1)]
    assert aggregate(dbapi, "count=true&tags[$contains]=x&region[$exists]=false")["groups"][0]["count"] == 1


def test_every_bad_input_is_a_400_naming_its_parameter(dbapi, sales):
    cases = [
        ("groupBy=nope", "groupBy", "Unknown field 'nope'"),
        ("groupBy=tags", "groupBy", "tags is an array"),
        ("groupBy=meta", "groupBy", "meta is JSON"),
        ("groupBy=when:hour", "groupBy", "Unknown date bucket"),
        ("groupBy=amount:day", "groupBy", "Only Date fields take a bucket"),
        ("groupBy=region,region", "groupBy", "twice"),
        ("groupBy=a,b,c,d,e,f", "groupBy", "at most 5"),
        ("groupBy=region,", "groupBy", "comma-separated"),
        ("sum=region", "sum", "region is String"),
        ("avg=when", "avg", "when is Date"),
        ("sum=tags", "sum", "tags is an array"),
        ("min=paid", "min", "Number or Date"),
        ("max=customer", "max", "customer is Relation"),
        ("max=nope", "max", "Unknown field"),
        ("sort=amount", "sort", "Cannot sort by 'amount'"),
        ("groupBy=region&sort=sum.region", "sort", "region is String"),
        ("sort=median.amount", "sort", "Cannot sort by"),
        ("sort=,count", "sort", "comma-separated"),
        ("limit=1001", "limit", "1 to 1000"),
        ("limit=0", "limit", "1 to 1000"),
        ("limit=ten", "limit", "whole number"),
        ("limit=1&limit=2", "limit", "more than once"),
        ("count=maybe", "count", "true or false"),
        ("where=%7Bnot-json", "where", "JSON object"),
        ("where=%5B1%5D", "where", "where must be an object"),
        ("where=%7B%22nope%22%3A1%7D", "nope", "Unknown field"),
        ("amount[$lt]=abc", "amount[$lt]", "Not a number"),
        ("nope=1", "nope", "Unknown field"),
        ("skip=1", "skip", "Unknown field"),
        ("scope=Team:abc", "scope", "under access control"),
        ("sum=amount,amount", "sum", "names amount twice"),
        ("groupBy=when:day,when:week", "groupBy", "twice"),
    ]
    for query, parameter, words in cases:
        message = refused(dbapi, query, parameter)
        assert words.lower() in message.lower(), (query, message)


def test_a_date_value_written_before_a_type_change_is_the_null_bucket(dbapi):
    schema = dbapi.create_schema("Loose", {"when": "String"})
    dbapi.many(
        "Loose", [{"when": w} for w in ("2024-02-30T00:00:00Z", "soon", "2024-13-01", "0000-01-01", "2024-03-01")]
    )
    dbapi.update_schema(schema["_id"], fields={"when": "Date"})
    answer = aggregate(dbapi, "groupBy=when:week&count=true&min=when", schema="Loose")
    # 30 February rolls over to 1 March on both databases (a Friday: the week of 26 February)
    assert [(g["key"]["when"], g["count"]) for g in answer["groups"]] == [
        (None, 3),
        ("2024-02-26T00:00:00.000000Z", 2),
    ]


def test_the_crud_rules_of_the_list_apply(dbapi, make_user):
    dbapi.crud("Private", {"n": "Number"}, read=(True, True))
    dbapi.post("Private", {"n": 1})
    response = dbapi.client.get("/database/Private/aggregate?count=true", headers={})
    assert response.status_code == 401
    user = make_user()
    assert aggregate(dbapi, "count=true", schema="Private", headers=user.headers)["groups"][0]["count"] == 1
    dbapi.crud("Closed", {"n": "Number"}, read=(False, False))
    assert dbapi.client.get("/database/Closed/aggregate", headers=user.headers).status_code == 404
    assert dbapi.client.get("/database/Nowhere/aggregate", headers=dbapi.admin).status_code == 404


def _documented_examples() -> list[tuple[str, Any]]:
    """``(query, answer)`` of each ``curl`` example in docs/database.md's Aggregation section."""
    text = (Path(__file__).parents[3] / "docs" / "database.md").read_text()
    section = text.split("## Aggregation", 1)[1].split("\n## ", 1)[0]
    examples = []
    for block in section.split("$ curl")[1:]:
        command, _, output = block.partition("\n")
        query = re.search(r'aggregate\?([^"]*)"', command).group(1)
        encoded = re.search(r"--data-urlencode '(\w+)=([^']*)'", command)
        if encoded:
            query += f"&{encoded.group(1)}={quote(encoded.group(2))}"
        examples.append((query, json.loads(output.split("```", 1)[0].replace("\n", ""))))
    return examples


def test_the_documented_examples_answer_as_documented(dbapi, sales):
    examples = _documented_examples()
    assert len(examples) == 3
    for query, answer in examples:
        assert aggregate(dbapi, query) == answer, query


# Mostly what the route accepts, with about one value in ten that it must refuse (or a text of anything).
GROUPS = ["region", "paid", "when", "when:day", "when:week", "when:month", "when:year", "createdAt:week", "customer"]
GROUPS += ["amount", "updatedAt:year", "_id", "region", "paid", "tags", "when:hour"]
KEYS = (
    st.sampled_from(GROUPS)
    | st.sampled_from(GROUPS)
    | st.sampled_from(GROUPS)
    | st.text(alphabet="abz_:,.-0", max_size=6)
)
OPERANDS = {
    "sum": ["amount"] * 5 + ["region"],
    "avg": ["amount"] * 5 + ["when"],
    "min": ["amount", "when", "createdAt", "updatedAt", "amount", "when", "paid"],
    "max": ["amount", "when", "createdAt", "updatedAt", "amount", "when", "tags"],
}
OPERATIONS = st.fixed_dictionaries(
    {},
    optional={
        op: st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True) for op, names in OPERANDS.items()
    },
)
SORTS = st.builds(
    lambda sign, what: sign + what,
    st.sampled_from(["", "-"]),
    st.sampled_from(["count", "sum.amount", "avg.amount", "min.when", "max.createdAt", "region", "paid", "when"])
    | st.sampled_from(["count", "sum.amount", "region", "sum.region", "x.y", ""]),
)
WHERE = st.sampled_from(
    ['{"amount":{"$gt":3}}', '{"$or":[{"paid":true},{"region":"south"}]}', '{"when":{"$exists":true}}']
)
WHERE |= st.sampled_from(["[]", "{", '{"a":1}'])


@settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(
    group_by=st.lists(KEYS, max_size=3, unique=True),
    operations=OPERATIONS,
    sort=st.none() | st.none() | st.lists(SORTS, min_size=1, max_size=2),
    limit=st.none() | st.integers(1, 1000).map(str) | st.sampled_from(["0", "1001", "x", ""]),
    count=st.sampled_from([None, "true", "false", "1", "true", "yes"]),
    where=st.none() | st.none() | WHERE,
)
def test_combinations_are_answered_or_refused_never_failed(
    dbapi, sales, group_by, operations, sort, limit, count, where
):
    """Generated combinations of the aggregate's own parameters: a 200 of the documented shape, or a 400."""
    params: list[tuple[str, str]] = [("groupBy", ",".join(group_by))] if group_by else []
    params += [(op, ",".join(names)) for op, names in operations.items()]
    params += [
        (name, value)
        for name, value in (("sort", sort and ",".join(sort)), ("limit", limit), ("count", count), ("where", where))
        if value is not None
    ]
    response = dbapi.client.get("/database/Sale/aggregate", query_string=params, headers=dbapi.admin)
    body = response.get_json()
    assert response.status_code in (200, 400), (params, body)
    if response.status_code == 400:
        assert body["message"] and body["errors"], (params, body)
        return
    assert 0 <= len(body["groups"]) <= body["count"], (params, body)
    for group in body["groups"]:
        assert set(group) == {"key"} | ({"count"} if count in ("true", "1") else set()) | set(operations), (
            params,
            group,
        )


def test_a_sum_beyond_a_float_is_a_400(dbapi):
    dbapi.create_schema("Huge", {"n": "Number"})
    dbapi.many("Huge", [{"n": 1e308}, {"n": 1e308}])
    response = dbapi.client.get("/database/Huge/aggregate?sum=n&max=n", headers=dbapi.admin)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["message"] == "The sum of n is beyond the range of a 64-bit float"
    assert aggregate(dbapi, "max=n", schema="Huge")["groups"] == [{"key": {}, "max": {"n": 1e308}}]
