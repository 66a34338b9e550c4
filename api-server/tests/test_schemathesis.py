"""schemathesis against the live API: no 5xx, and every answer conforms to the OpenAPI document.

Every operation of the committed document (`schemas/api/openapi.json`) is exercised with
generated requests, valid and invalid, on a real ovsdb-server. The run is bounded (a few
examples per operation, no coverage phase) and deterministic, so it fits in CI. Every
operation that takes a body is also sent an oversized one and deeply nested ones: each must
be a documented 4xx (413, 400), never a 5xx.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, settings
from schemathesis.core.result import Ok
from schemathesis.specs.openapi import checks as openapi_checks

from loom_api import limits
from loom_api.auth import Tokens
from loom_api.http import WAIT_HEADER
from loom_api.store import ReadView, Store, WriteView
from loom_schemas import OPENAPI_DOCUMENT, schema_path

pytestmark = pytest.mark.ovs

#: Examples per operation: enough to reach every error path, small enough for CI.
MAX_EXAMPLES = 15
#: The longest realization wait a generated request may ask for (nothing realizes yet, so a
#: wait always lasts its full length).
MAX_WAIT = 0.05

#: The root tables, users before what they use, so each can be emptied in its own transaction.
WIPE_ORDER = [
    "NAT_Rule",
    "Static_Route",
    "Logical_Switch_Port",
    "Logical_Router_Port",
    "Logical_Router",
    "Subnet",
    "Logical_Switch",
    "Security_Profile",
    "Gateway_Service",
    "QoS_Queue",
    "Transport_Node",
    "Transport_Zone",
]

CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.response_schema_conformance,
]


#: The committed document; the base URL is the live server's, given at each call.
schema = schemathesis.openapi.from_dict(
    json.loads(schema_path(OPENAPI_DOCUMENT).read_text()),
    config=schemathesis.Config.from_dict(
        {
            "seed": 1,
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
            "phases": {
                "coverage": {"enabled": False},
                # Only the document's own links: inferred ones pick items out of lists, whose
                # order (by random uuid) differs from run to run.
                "stateful": {"inference": {"algorithms": []}},
            },
        }
    ),
)


@pytest.fixture
def admin_auth(app: Flask) -> dict[str, str]:
    """The Authorization header of the app's admin token."""
    tokens: Tokens = app.extensions["loom.tokens"]
    return {"Authorization": f"Bearer {tokens.admin}"}


def _bounded_wait(case: schemathesis.Case[Any]) -> None:
    """Cap a generated realization wait (valid values up to 300 s would stall the run)."""
    headers = case.headers
    if not headers or WAIT_HEADER not in headers:
        return
    try:
        seconds = float(headers[WAIT_HEADER])
    except (TypeError, ValueError):
        return
    if seconds > MAX_WAIT:
        headers[WAIT_HEADER] = str(MAX_WAIT)


@schema.parametrize()
@settings(
    deadline=None,
    derandomize=True,
    max_examples=MAX_EXAMPLES,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,  # one server per operation, shared by its examples
    ],
)
def test_api_conforms_to_its_document(
    case: schemathesis.Case[Any], live_api: str, admin_auth: dict[str, str]
) -> None:
    _bounded_wait(case)
    case.call_and_validate(base_url=f"{live_api}/api/v1", headers=admin_auth, checks=CHECKS)


#: Stateful scenarios: sequences of calls that follow the document's links (create a switch,
#: then read, change, delete it or create ports on it), so item operations meet real objects.
STATEFUL = settings(
    deadline=None,
    derandomize=True,
    max_examples=25,
    stateful_step_count=8,
    suppress_health_check=list(HealthCheck),
)


def _wipe(store: Store) -> None:
    """Delete every configuration object (the generation counter stays), a table at a time.

    One transaction per table: when a parent and its children go in one transaction, the
    store's child indexes trip over the children's dangling parent references.
    """
    for table in WIPE_ORDER:

        def count(view: ReadView, table: str = table) -> int:
            return view.count(table)

        def empty(view: WriteView, table: str = table) -> None:
            for row in list(view.rows(table)):
                view.delete(row)

        if store.read(count):  # (the store refuses a write that changes nothing)
            store.write(empty)


def test_stateful_scenarios_conform(
    live_api: str, store: Store, admin_auth: dict[str, str]
) -> None:
    base_url = f"{live_api}/api/v1"

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            # Each scenario starts from an empty configuration, so the same calls get the same
            # answers (Hypothesis requires it, and replays scenarios when it shrinks).
            _wipe(store)

        def before_call(self, case: schemathesis.Case[Any]) -> None:
            _bounded_wait(case)

        def get_call_kwargs(self, case: schemathesis.Case[Any]) -> dict[str, Any]:
            return {"base_url": base_url, "headers": admin_auth}

        def validate_response(
            self,
            response: schemathesis.Response,
            case: schemathesis.Case[Any],
            additional_checks: Any = None,
            **kwargs: Any,
        ) -> None:
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    Workflow.run(settings=STATEFUL)


#: Operations that take a request body (the hostile bodies' targets).
BODY_OPERATIONS = [
    result.ok()
    for result in schema.get_all_operations()
    if isinstance(result, Ok) and result.ok().body
]
#: Any id: the hostile bodies are refused before the object is looked up.
SOME_ID = "00000000-0000-0000-0000-00000000beef"


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("kind", "body", "status"),
    [
        ("oversized", {"name": "x" * limits.DEFAULT_MAX_BODY_BYTES}, 413),
        ("nested-33", {"name": _nested(limits.DEFAULT_MAX_JSON_DEPTH)}, 400),
        ("nested-500", {"name": _nested(500)}, 400),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_hostile_bodies_are_refused_with_a_documented_4xx(
    live_api: str, admin_auth: dict[str, str], kind: str, body: Any, status: int
) -> None:
    assert BODY_OPERATIONS, "the document has operations with bodies"
    for operation in BODY_OPERATIONS:
        path_parameters = {p.name: SOME_ID for p in operation.path_parameters}
        case = operation.Case(
            body=body, path_parameters=path_parameters, media_type="application/json"
        )
        response = case.call_and_validate(
            base_url=f"{live_api}/api/v1", headers=admin_auth, checks=CHECKS
        )
        assert response.status_code == status, (operation.label, kind, response.text[:200])
        error = json.loads(response.content)["error"]
        assert error == ("body_too_large" if status == 413 else "json_too_deep"), error
