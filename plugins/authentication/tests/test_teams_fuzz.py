"""Schemathesis over the team routes with a user Bearer token and teams switched on: the core's pass
(tests/test_openapi_fuzz.py) sends administrator credentials, which these routes refuse with 403 before
reading anything. Positive data: no 5xx and answers that match their documented schemas; negative data
(what does not fit the schemas): a 4xx, never a 5xx."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import checks
from schemathesis.generation import GenerationMode

from .team_calls import teams  # noqa: F401  (the fixture)

EXAMPLES = 12


def fuzz(app, headers, mode, checks_to_run) -> tuple[list[str], dict[str, str]]:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures: dict[str, str] = {}
    seen = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith("/authentication/teams"):
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


def test_team_routes_under_fuzzing(app, teams):
    owner = teams.user()
    teams.create(owner, "Fuzzed")
    seen, failures = fuzz(
        app, owner.headers, GenerationMode.POSITIVE, [checks.not_a_server_error, checks.response_schema_conformance]
    )
    assert len(seen) == 14, seen
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
    _, failures = fuzz(app, owner.headers, GenerationMode.NEGATIVE, [checks.not_a_server_error])
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
