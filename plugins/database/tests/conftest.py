"""Helpers for the Database module's tests: thin calls to the real routes through the test client."""

from __future__ import annotations

from typing import Any

import pytest


class DatabaseApi:
    def __init__(self, client: Any, admin_headers: dict[str, str]) -> None:
        self.client = client
        self.admin = admin_headers

    # schemas

    def create_schema(self, name: str, fields: dict[str, Any], expect: int = 201, **extra: Any) -> dict[str, Any]:
        response = self.client.post(
            "/admin/database/schemas", json={"name": name, "fields": fields, **extra}, headers=self.admin
        )
        assert response.status_code == expect, response.get_json()
        return response.get_json()

    def update_schema(self, schema_id: str, expect: int = 200, **changes: Any) -> dict[str, Any]:
        response = self.client.put(f"/admin/database/schemas/{schema_id}", json=changes, headers=self.admin)
        assert response.status_code == expect, response.get_json()
        return response.get_json()

    def crud(self, name: str, fields: dict[str, Any], **crud: Any) -> dict[str, Any]:
        """A schema whose crudOperations are given as op=(enabled, authenticated)."""
        operations = {op: {"enabled": rule[0], "authenticated": rule[1]} for op, rule in crud.items()}
        return self.create_schema(name, fields, modelOptions={"conduit": {"cms": {"crudOperations": operations}}})

    def tasks_read_through_projects(self, task_fields: dict[str, Any]) -> None:
        """``Project`` and ``Task`` under access control, a Task also readable by whoever may read its
        ``project`` (``project->read``)."""
        access = {"conduit": {"authorization": {"enabled": True}}}
        self.create_schema("Project", {"name": "String"}, modelOptions=access)
        fields = {**task_fields, "project": {"type": "Relation", "model": "Project"}}
        self.create_schema("Task", fields, modelOptions=access)
        permissions = {
            "read": ["reader", "editor", "owner", "project->read"],
            "edit": ["editor", "owner"],
            "delete": ["owner"],
            "share": ["owner"],
        }
        response = self.client.patch(
            "/admin/authorization/resources/Task", json={"permissions": permissions}, headers=self.admin
        )
        assert response.status_code == 200, response.get_json()

    # documents

    def post(self, schema: str, doc: dict[str, Any], headers: dict[str, str] | None = None, expect: int = 201):
        response = self.client.post(f"/database/{schema}", json=doc, headers=self.admin if headers is None else headers)
        assert response.status_code == expect, response.get_json()
        return response.get_json()

    def many(self, schema: str, docs: list[dict[str, Any]], expect: int = 201) -> Any:
        response = self.client.post(f"/database/{schema}/many", json={"docs": docs}, headers=self.admin)
        assert response.status_code == expect, response.get_json()
        return response.get_json()

    def list(self, schema: str, query: str = "", headers: dict[str, str] | None = None, expect: int = 200) -> Any:
        url = f"/database/{schema}" + (f"?{query}" if query else "")
        response = self.client.get(url, headers=self.admin if headers is None else headers)
        assert response.status_code == expect, (url, response.get_json())
        return response.get_json()

    def ids(self, schema: str, query: str = "") -> list[str]:
        return [doc["_id"] for doc in self.list(schema, query)["documents"]]

    def graphql(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        expect: int = 200,
    ) -> dict[str, Any]:
        response = self.client.post(
            "/graphql",
            json={"query": query, "variables": variables},
            headers=self.admin if headers is None else headers,
        )
        assert response.status_code == expect, response.get_json()
        return response.get_json()


@pytest.fixture()
def dbapi(client, admin_headers) -> DatabaseApi:
    return DatabaseApi(client, admin_headers)


@pytest.fixture()
def products(dbapi: DatabaseApi) -> dict[str, Any]:
    """Schemas Company ← Author ← Product with a few documents, for query tests."""
    company = dbapi.create_schema("Company", {"name": {"type": "String", "required": True}})
    acme = dbapi.post("Company", {"name": "Acme"})
    globex = dbapi.post("Company", {"name": "Globex"})
    dbapi.create_schema("Author", {"name": "String", "company": {"type": "Relation", "model": "Company"}})
    ann = dbapi.post("Author", {"name": "Ann", "company": acme["_id"]})
    bob = dbapi.post("Author", {"name": "Bob", "company": globex["_id"]})
    dbapi.create_schema(
        "Product",
        {
            "title": {"type": "String", "required": True},
            "price": "Number",
            "inStock": "Boolean",
            "released": "Date",
            "tags": ["String"],
            "meta": "JSON",
            "author": {"type": "Relation", "model": "Author"},
            "coauthors": {"type": ["Relation"], "model": "Author"},
        },
    )
    docs = [
        {
            "title": "Apple pie",
            "price": 5,
            "inStock": True,
            "released": "2024-01-01T00:00:00Z",
            "tags": ["food", "sweet"],
            "meta": {"kcal": 300},
            "author": ann["_id"],
            "coauthors": [bob["_id"]],
        },
        {
            "title": "Banana bread",
            "price": 12.5,
            "inStock": False,
            "released": "2024-03-01T12:00:00+02:00",
            "tags": ["food"],
            "author": bob["_id"],
            "coauthors": [],
        },
        {
            "title": "Cherry Cake",
            "price": 20,
            "inStock": True,
            "released": "2023-06-15",
            "tags": ["sweet", "party"],
            "author": ann["_id"],
            "coauthors": [ann["_id"], bob["_id"]],
        },
        {"title": "Dates", "price": 3, "tags": []},
        {"title": "éclair", "price": 7.25, "inStock": False, "tags": ["sweet", "French"]},
    ]
    created = [dbapi.post("Product", doc) for doc in docs]
    return {
        "company": company,
        "acme": acme,
        "globex": globex,
        "ann": ann,
        "bob": bob,
        "products": created,
        "by_title": {doc["title"]: doc for doc in created},
    }
