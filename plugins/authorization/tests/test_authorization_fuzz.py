"""Schemathesis over this module's routes, with an opted-in schema, documents and tuples in place: the
admin routes with administrator credentials, the user routes with a user's token (the core pass,
tests/test_openapi_fuzz.py, sends administrator credentials, which the user routes refuse with 403 before
reading anything). Positive data: no 5xx and answers that match their documented schemas; negative data:
a 4xx, never a 5xx."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import checks
from schemathesis.generation import GenerationMode

EXAMPLES = 12


def fuzz(app, prefix, headers, mode, checks_to_run) -> tuple[list[str], dict[str, str]]:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures: dict[str, str] = {}
    seen = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith(prefix):
            continue
        seen.append(operation.label)

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case):
            case.call_and_validate(headers=headers, checks=checks_to_run)

        try:
            exercise()
        except Unsatisfiable:
            continue
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
    positive = [checks.not_a_server_error, checks.response_schema_conformance]
    seen, failures = fuzz(app, prefix, headers, GenerationMode.POSITIVE, positive)
    assert len(seen) == operations, seen
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
    _, failures = fuzz(app, prefix, headers, GenerationMode.NEGATIVE, [checks.not_a_server_error])
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def test_admin_routes_under_fuzzing(app, access, make_user):
    _world(access, make_user)
    fuzz_both_ways(app, "/admin/authorization", access.admin, operations=9)


def test_user_routes_under_fuzzing(app, access, make_user):
    owner = _world(access, make_user)
    fuzz_both_ways(app, "/authorization/", owner.headers, operations=2)
