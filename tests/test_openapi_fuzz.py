"""Schemathesis over /openapi.json: every operation, with admin credentials, no 5xx and responses that
match their documented schemas; then the negative phase (data that does not fit the schemas, what
``--mode all`` adds), where every answer must be a 4xx, never a 5xx. Runs in-process (WSGI) inside
the rolled-back test transaction."""

import threading

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import checks
from schemathesis.generation import GenerationMode

from trellis.testing.plugin import TEST_MASTER_KEY

# tus chunks (the Storage module's /storage/uploads) are bytes like any octet stream.
schemathesis.serializer.alias("application/offset+octet-stream", "application/octet-stream")

EXAMPLES_PER_OPERATION = 12
# The negative phase runs every operation too (a sample schema adds its generated routes); 6 examples
# each keep it well under a minute on a loaded 2-core machine.
NEGATIVE_EXAMPLES_PER_OPERATION = 6
BACKGROUND_JOBS = ("trellis-backup-", "trellis-restore-")  # names of the threads trellis.backups.jobs starts


def endless(operation) -> bool:
    """An event stream never ends, so an in-process call never returns: those routes are tested by a real
    HTTP client reading the stream (plugins/database/tests/test_database_subscriptions.py)."""
    content = operation.definition.raw.get("responses", {}).get("200", {}).get("content", {})
    return "text/event-stream" in content


def settled(call):
    """Run one call, then wait for the background jobs it started (``POST /admin/backups`` writes its archive
    in a thread): in a test every session shares the test transaction's one connection, which two threads
    must not use at once."""
    try:
        return call()
    finally:
        for thread in threading.enumerate():
            if thread.name.startswith(BACKGROUND_JOBS):
                thread.join(60)


@pytest.mark.long
def test_no_server_errors_and_documented_responses(app, db):
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures: dict[str, str] = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        if endless(operation):
            continue

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case):
            settled(
                lambda: case.call_and_validate(
                    headers={"masterkey": TEST_MASTER_KEY},
                    checks=[checks.not_a_server_error, checks.response_schema_conformance],
                )
            )

        try:
            exercise()
        except Exception as exc:  # collect every failing operation, then report them together
            failures[operation.label] = str(exc)[:2000]
    assert operations >= 4
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


@pytest.mark.long
def test_negative_data_never_gets_a_server_error(app, client, admin_headers):
    created = client.post(
        "/admin/database/schemas",
        headers=admin_headers,
        json={
            "name": "FuzzSample",
            "fields": {"title": {"type": "String", "required": True}, "n": "Number", "tags": ["String"]},
        },
    )
    assert created.status_code == 201, created.get_json()
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures: dict[str, str] = {}
    operations = 0
    negated: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        if endless(operation):
            continue
        if not (len(operation.body) or len(operation.query)):
            continue  # only free-text path parameters: nothing to make invalid (Hypothesis gives up slowly)
        negated.append(operation.label)

        @given(case=operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
        @settings(
            max_examples=NEGATIVE_EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case):
            settled(
                lambda: case.call_and_validate(
                    headers={"masterkey": TEST_MASTER_KEY}, checks=[checks.not_a_server_error]
                )
            )

        try:
            exercise()
        except Unsatisfiable:
            continue  # nothing in this operation can be made invalid (e.g. only free-text path parameters)
        except Exception as exc:
            failures[operation.label] = str(exc)[:2000]
    assert operations >= 40 and len(negated) >= 30, negated
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
