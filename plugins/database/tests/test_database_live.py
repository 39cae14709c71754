"""Real server processes (eventlet) on the test database: schema changes reach a second worker without a
restart, and the autocommit fast path of reads never leaks into writes (a failed batch leaves nothing)."""

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY

pytestmark = pytest.mark.live
ADMIN = {"masterkey": TEST_MASTER_KEY}


def test_two_workers_share_schema_changes_and_reads_never_leak_autocommit(live_server_factory):
    first, second = live_server_factory(), live_server_factory()
    created = requests.post(
        f"{first.url}/admin/database/schemas",
        headers=ADMIN,
        timeout=30,
        json={"name": "LiveItem", "fields": {"code": {"type": "String", "unique": True}, "n": "Number"}},
    )
    assert created.status_code == 201, created.text
    schema_id = created.json()["_id"]
    try:
        # The second worker serves the new schema at once, without a restart.
        doc = requests.post(f"{second.url}/database/LiveItem", json={"code": "a", "n": 1}, timeout=30)
        assert doc.status_code == 201, doc.text
        with requests.Session() as http:
            for _ in range(30):  # reads on pooled connections (autocommit fast path on PostgreSQL)
                assert http.get(f"{first.url}/database/LiveItem/{doc.json()['_id']}", timeout=30).status_code == 200
                assert http.get(f"{first.url}/database/LiveItem?n[$gte]=1", timeout=30).json()["count"] >= 1
            assert http.post(f"{first.url}/database/LiveItem", json={"code": "b", "n": 1}, timeout=30).ok
            endpoint = http.post(
                f"{first.url}/admin/database/customEndpoints",
                headers=ADMIN,
                timeout=30,
                json={
                    "name": "recode",
                    "operation": "PUT",
                    "selectedSchema": "LiveItem",
                    "query": {
                        "AND": [
                            {"schemaField": "n", "operation": "eq", "comparisonField": {"type": "Custom", "value": 1}}
                        ]
                    },
                    "assignments": [
                        {"schemaField": "code", "action": "set", "assignmentField": {"type": "Custom", "value": "same"}}
                    ],
                },
            )
            assert endpoint.status_code == 201, endpoint.text
            for _ in range(10):  # one UPDATE per document: the second one conflicts, so none may stay
                assert http.put(f"{first.url}/database/function/recode", timeout=30).status_code == 409
                codes = sorted(
                    d["code"] for d in http.get(f"{first.url}/database/LiveItem", timeout=30).json()["documents"]
                )
                assert codes == ["a", "b"], codes
        changed = requests.put(
            f"{second.url}/admin/database/schemas/{schema_id}",
            headers=ADMIN,
            timeout=30,
            json={"fields": {"code": "String", "n": "Number", "label": "String"}},
        )
        assert changed.status_code == 200, changed.text
        labelled = requests.post(f"{first.url}/database/LiveItem", json={"code": "c", "label": "new"}, timeout=30)
        assert labelled.status_code == 201, labelled.text
        graph = requests.post(
            f"{first.url}/graphql", timeout=30, json={"query": '{ LiveItem(where: {label: "new"}) { code } }'}
        )
        assert graph.json() == {"data": {"LiveItem": [{"code": "c"}]}}
    finally:
        requests.delete(f"{first.url}/admin/database/schemas/{schema_id}?deleteData=true", headers=ADMIN, timeout=30)
