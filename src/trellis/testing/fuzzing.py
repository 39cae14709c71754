"""Schemathesis over some operations of ``/openapi.json``, for tests of request-time paths (a module's
per-schema routes): the same settings everywhere, so a failure reproduces (derandomized, no example
database) and a slow machine does not fail it (no deadline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.generation import GenerationMode


def conformance(
    operation: Any, headers: dict[str, str], examples: int = 6, negative: bool = False
) -> Callable[[], None]:
    """A test function calling ``operation`` with generated data and ``headers``: it raises when an answer
    is a 5xx or does not match what the document says of it. ``negative``: data that does not fit the
    schemas instead (what ``--mode all`` adds), where only a 5xx fails (the answer is a 4xx of any shape
    the error handler gives)."""
    mode = GenerationMode.NEGATIVE if negative else GenerationMode.POSITIVE
    wanted = (
        [checks.not_a_server_error] if negative else [checks.not_a_server_error, checks.response_schema_conformance]
    )

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def exercise(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=wanted)

    return exercise


def failures(
    schema: Any, callers: list[dict[str, str]], examples: int = 6, negative: bool = False
) -> tuple[int, dict[str, str]]:
    """``(operations, failures)``: :func:`conformance` over every operation of a schemathesis ``schema`` for
    each caller's headers (``negative``: also with data that does not fit), every failure kept (by operation,
    caller and mode) so that one test reports them all together."""
    found: dict[str, str] = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for headers in callers:
            for mode in (False, True) if negative else (False,):
                try:
                    conformance(operation, headers, examples, negative=mode)()
                except Exception as exc:  # noqa: BLE001  (collect every failing operation, report them together)
                    found[f"{operation.label} {sorted(headers)} negative={mode}"] = str(exc)[:1500]
    return operations, found
