"""Schemathesis over /openapi.json: every operation, with admin credentials, no 5xx and responses that
match their documented schemas. Runs in-process (WSGI) inside the rolled-back test transaction."""
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from trellis.testing.plugin import TEST_MASTER_KEY

EXAMPLES_PER_OPERATION = 12


def test_no_server_errors_and_documented_responses(app, db):
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures: dict[str, str] = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def exercise(case):
            case.call_and_validate(
                headers={"masterkey": TEST_MASTER_KEY},
                checks=[checks.not_a_server_error, checks.response_schema_conformance],
            )

        try:
            exercise()
        except Exception as exc:  # collect every failing operation, then report them together
            failures[operation.label] = str(exc)[:2000]
    assert operations >= 4
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
