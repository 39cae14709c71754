"""Schemathesis over some operations of ``/openapi.json``, for tests of request-time paths (a module's
per-schema routes): the same settings everywhere, so a failure reproduces (derandomized, no example
database) and a slow machine does not fail it (no deadline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from schemathesis import checks


def conformance(operation: Any, headers: dict[str, str], examples: int = 6) -> Callable[[], None]:
    """A test function calling ``operation`` with generated data and ``headers``: it raises when an answer
    is a 5xx or does not match what the document says of it."""

    @given(case=operation.as_strategy())
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def exercise(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=[checks.not_a_server_error, checks.response_schema_conformance])

    return exercise
