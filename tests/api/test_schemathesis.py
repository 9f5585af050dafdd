"""Z-4 (bounded, in CI): schemathesis drives every operation of /openapi.json against the real app and
database. No server error, and no response outside the documented schema, status codes and types. A request
that is valid by the schema is never a 422: the schemas say what validation enforces. The one exception is a
definition document, whose cross-field rules (after-references, cycles, expressions) no schema can state."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from api.http import Connections


def schema_valid_is_never_422(ctx, response, case) -> None:
    """Generated data is valid by the schema, so a 422 means the schema says less than validation enforces."""
    if response.status_code == 422 and not case.operation.path.endswith("/definitions"):
        raise AssertionError(f"a schema-valid {case.method} {case.formatted_path} was answered 422: {response.text}")


CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance,
          schema_valid_is_never_422]
ADMIN_PATHS = ("/apps", "/queues", "/credentials", "/definitions")


def test_Z4_every_operation_conforms_to_the_openapi_document(db, world):
    world.publish({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 60_000}]})
    world.start("cool-off")
    schema = schemathesis.openapi.from_wsgi("/openapi.json", create_app(Connections(db.dsn)))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        exercise(operation, world.admin if operation.path.endswith(ADMIN_PATHS) else world.token)


def exercise(operation, token: str) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    def run(case):
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)

    run()
