"""Schemathesis over a searchable schema's list path (and its change stream's documentation): whatever words,
filters and paging the fuzzer sends, as the admin or anonymously, no 5xx and answers that match the
documented schemas; data that does not fit the schemas gets a 4xx, never a 5xx."""

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trellis.testing.fuzzing import conformance
from trellis.testing.plugin import TEST_MASTER_KEY

EXAMPLES = 40


def test_a_searchable_list_never_fails(app, dbapi):
    dbapi.create_schema(
        "Searchy",
        {
            "title": {"type": "String", "searchable": True},
            "tags": {"type": ["String"], "searchable": True},
            "price": "Number",
        },
        modelOptions={"search": {"language": "english"}},
    )
    dbapi.many(
        "Searchy",
        [
            {"title": "The quick brown fox", "tags": ["animal"], "price": 3},
            {"title": "Über café naïve", "tags": ["unicode", "accents"], "price": 5},
            {"title": "0 1 2 3 – numbers, punctuation!", "price": 7},
        ],
    )
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app).include(
        path_regex=r"^/database/Searchy$", method="GET"
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 1
    for headers in ({"masterkey": TEST_MASTER_KEY}, {}):
        conformance(operations[0], headers, EXAMPLES)()
        conformance(operations[0], headers, EXAMPLES, negative=True)()
    spec = dbapi.client.get("/openapi.json").get_json()
    assert any(p["name"] == "search" for p in spec["paths"]["/database/Searchy"]["get"]["parameters"])


@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(words=st.text(max_size=80))
def _any_words(client, words: str) -> None:
    response = client.get("/database/Searchy", query_string={"search": words}, headers={"masterkey": TEST_MASTER_KEY})
    assert response.status_code in (200, 400), (words, response.get_json())
    body = response.get_json()
    if response.status_code == 200:
        assert body["count"] == len(body["documents"]) <= 3
    else:
        assert body["name"] == "INVALID_ARGUMENTS"


def test_any_text_as_words_is_an_answer_or_a_400(dbapi):
    """Arbitrary Unicode (operators of to_tsquery and FTS5 included: & | ! : * ( ) " NEAR AND) never reaches
    the database as syntax."""
    dbapi.create_schema("Searchy", {"title": {"type": "String", "searchable": True}})
    dbapi.many("Searchy", [{"title": "a & b | c"}, {"title": "NEAR AND OR NOT"}, {"title": "x:* !y (z)"}])
    _any_words(dbapi.client)
    for words in ('"', "a & b", "NEAR(a b)", "x:*", "!y", "(z)", "AND", "a OR", "* * *", "'", "\\", "\x00"):
        _any_words.hypothesis.inner_test(dbapi.client, words)
    assert _search_count(dbapi, "near and") == 1


def _search_count(dbapi, words: str) -> int:
    response = dbapi.client.get("/database/Searchy", query_string={"search": words}, headers=dbapi.admin)
    return response.get_json()["count"]
