"""Schemathesis over this module's routes, with an opted-in schema, documents and tuples in place: the
admin routes with administrator credentials, the user routes with a user's token (the core pass,
tests/test_openapi_fuzz.py, sends administrator credentials, which the user routes refuse with 403 before
reading anything). Positive data: no 5xx and answers that match their documented schemas; negative data:
a 4xx, never a 5xx."""

from __future__ import annotations

import schemathesis
from hypothesis.errors import Unsatisfiable

from trellis.testing.fuzzing import conformance

EXAMPLES = 12


def fuzz(app, prefix: str, headers: dict[str, str], negative: bool) -> tuple[list[str], dict[str, str]]:
    """Every operation under ``prefix``: the operations seen, and the failures by operation."""
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures: dict[str, str] = {}
    seen = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith(prefix):
            continue
        seen.append(operation.label)
        try:
            conformance(operation, headers, EXAMPLES, negative=negative)()
        except Unsatisfiable:
            continue  # nothing in this operation can be made invalid
        except Exception as exc:
            failures[operation.label] = str(exc)[:2000]
    return seen, failures


def _world(access, make_user):
    access.enable_teams()
    access.projects_and_tasks()
    owner = make_user()
    team = access.team(owner, "Fuzzers")
    project = access.post("Project", {"name": "p"}, headers=owner.headers)["_id"]
    access.post("Task", {"title": "t", "project": project, "assignee": owner.id}, headers=owner.headers)
    access.grant(f"Team:{team}", "reader", f"Project:{project}")
    return owner


def fuzz_both_ways(app, prefix: str, headers: dict[str, str], operations: int) -> None:
    """Positive data: no 5xx, documented answers; then negative data: never a 5xx."""
    for negative in (False, True):
        seen, failures = fuzz(app, prefix, headers, negative)
        assert len(seen) == operations, seen
        assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def test_admin_routes_under_fuzzing(app, access, make_user):
    _world(access, make_user)
    fuzz_both_ways(app, "/admin/authorization", access.admin, operations=9)


def test_user_routes_under_fuzzing(app, access, make_user):
    owner = _world(access, make_user)
    fuzz_both_ways(app, "/authorization/", owner.headers, operations=2)
