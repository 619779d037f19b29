"""The client and the service's OpenAPI document agree: every operation of the document is one
the client calls, with the same method, path, parameters, request body and answer, every
property of every schema the client reads is a field of its dataclass (and the other way
round), and the enums list the same values. Checked against the snapshot in
crates/server/tests/snapshots (which the service's own test keeps equal to its document), and
the live document against the snapshot."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import urllib.request
from typing import Any

from conftest import REPO, Replica

from kubeferry_client._errors import error_class
from kubeferry_client._models import ENUMS, SCHEMAS, wire_fields
from kubeferry_client._operations import OPERATIONS, STREAM_EVENTS

SNAPSHOT = REPO / "crates" / "server" / "tests" / "snapshots" / "openapi__openapi.snap"


def snapshot_document() -> dict[str, Any]:
    """The document in the snapshot (after insta's header)."""
    text = SNAPSHOT.read_text()
    _, header, body = text.split("---\n", 2)
    assert "source:" in header, header
    document: dict[str, Any] = json.loads(body)
    return document


def _ref(schema: dict[str, Any] | None) -> str | None:
    if schema is None or "$ref" not in schema:
        return None
    return str(schema["$ref"]).rsplit("/", 1)[-1]


def _referenced(schema: Any) -> set[str]:
    """Every schema name a schema refers to, at any depth."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value.rsplit("/", 1)[-1])
            else:
                found |= _referenced(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _referenced(value)
    return found


def disagreements(document: dict[str, Any]) -> list[str]:
    """What the client and the document disagree on, one sentence each."""
    problems: list[str] = []
    schemas = document["components"]["schemas"]
    reachable: set[str] = set()
    documented: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            documented[operation["operationId"]] = (method.upper(), path, operation)

    for operation_id in sorted(set(documented) - set(OPERATIONS)):
        method, path, _ = documented[operation_id]
        problems.append(f"operation {operation_id} ({method} {path}) is missing from the client")
    for operation_id in sorted(set(OPERATIONS) - set(documented)):
        problems.append(f"the client calls operation {operation_id}, which the document lacks")

    for operation_id in sorted(set(documented) & set(OPERATIONS)):
        method, path, operation = documented[operation_id]
        client = OPERATIONS[operation_id]
        if (client.method, client.path) != (method, path):
            problems.append(
                f"{operation_id}: the client calls {client.method} {client.path}, "
                f"the document says {method} {path}"
            )
        parameters = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        for name in sorted(parameters - client.query):
            problems.append(f"{operation_id}: query parameter {name} is missing from the client")
        for name in sorted(client.query - parameters):
            problems.append(
                f"{operation_id}: the client sends query parameter {name}, which the document lacks"
            )
        if client.authenticated != bool(operation.get("security")):
            problems.append(
                f"{operation_id}: the client's authentication differs from the document's"
            )

        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        body_schema = _ref(body["schema"]) if body else None
        if body_schema != client.body:
            problems.append(
                f"{operation_id}: request body {client.body} in the client, "
                f"{body_schema} in the document"
            )
        elif body_schema is not None:
            properties = set(schemas[body_schema]["properties"])
            for name in sorted(properties - client.body_properties):
                problems.append(f"{body_schema}.{name} is missing from the client")
            for name in sorted(client.body_properties - properties):
                problems.append(f"the client sends {body_schema}.{name}, which the document lacks")

        successes: dict[int, dict[str, Any]] = {}
        for status, response in operation["responses"].items():
            content = response.get("content", {})
            refs = {_ref(media.get("schema")) for media in content.values()}
            reachable |= _referenced(content)
            if status.startswith("2") or (refs and "ErrorBody" not in refs):
                successes[int(status)] = content
        if set(successes) != set(client.success):
            problems.append(
                f"{operation_id}: the client takes {sorted(client.success)} for success, "
                f"the document {sorted(successes)}"
            )
        media_type = {"json": "application/json", "sse": "text/event-stream", "text": "text/plain"}[
            client.kind
        ]
        for status, content in successes.items():
            if media_type not in content:
                problems.append(
                    f"{operation_id}: the document's {status} answer is not {media_type}"
                )
                continue
            answer = _ref(content[media_type].get("schema"))
            if answer != client.answer:
                problems.append(
                    f"{operation_id}: the client reads the {status} answer as {client.answer}, "
                    f"the document says {answer}"
                )
        if client.kind == "sse":
            text = operation.get("description", "") + " ".join(
                r.get("description", "") for r in operation["responses"].values()
            )
            names = set(re.findall(r"`(\w+)`", text.split("Server-Sent Events:")[-1]))
            names |= set(re.findall(r"event: (\w+)", text))
            client_events = set(STREAM_EVENTS[operation_id])
            for name in sorted(names - client_events):
                problems.append(f"{operation_id}: event {name} is missing from the client")
            for name in sorted(client_events - names):
                problems.append(
                    f"{operation_id}: the client reads event {name}, which the document lacks"
                )

    # The schemas the answers use, at any depth, and the client's dataclasses and enums.
    pending = set(reachable)
    while pending:
        name = pending.pop()
        for more in _referenced(schemas.get(name, {})) - reachable:
            reachable.add(more)
            pending.add(more)
    known = set(SCHEMAS) | set(ENUMS)
    for name in sorted(reachable - known):
        problems.append(f"schema {name} is missing from the client")
    for name in sorted(known - set(schemas)):
        problems.append(f"the client reads schema {name}, which the document lacks")

    for name, cls in sorted(SCHEMAS.items()):
        if name not in schemas:
            continue
        schema = schemas[name]
        properties = set(schema.get("properties", {}))
        required = set(schema.get("required", []))
        fields = wire_fields(cls)
        for prop in sorted(properties - set(fields)):
            problems.append(f"field {name}.{prop} is missing from the client ({cls.__name__})")
        for prop in sorted(set(fields) - properties):
            problems.append(f"the client reads field {name}.{prop}, which the document lacks")
        for prop, field in sorted(fields.items()):
            optional = (
                field.default is not dataclasses.MISSING
                or field.default_factory is not dataclasses.MISSING
            )
            if prop in required and optional:
                problems.append(
                    f"{name}.{prop} is required in the document, optional in the client"
                )
            if prop in properties and prop not in required and not optional:
                problems.append(
                    f"{name}.{prop} is optional in the document, required in the client"
                )

    for name, enum_cls in sorted(ENUMS.items()):
        if name not in schemas:
            continue
        values = set(schemas[name]["enum"])
        members = {member.value for member in enum_cls}
        for value in sorted(values - members):
            problems.append(f"{name} value {value} is missing from the client")
        for value in sorted(members - values):
            problems.append(f"the client's {name} has {value}, which the document lacks")

    codes = set(re.findall(r"`(\w+)`", schemas["ErrorBody"]["properties"]["code"]["description"]))
    if "no_such_job" not in codes or error_class(404, "no_such_job").__name__ != "NoSuchJob":
        problems.append(
            "ErrorBody.code: the client branches on no_such_job, which the document lacks"
        )
    return problems


def test_the_client_agrees_with_the_openapi_snapshot() -> None:
    assert disagreements(snapshot_document()) == []


def test_the_live_document_is_the_snapshot(replica: Replica) -> None:
    with urllib.request.urlopen(replica.url + "/openapi.json", timeout=10) as response:
        live = json.loads(response.read())
    assert live == snapshot_document()


def test_each_kind_of_disagreement_is_found() -> None:
    document = snapshot_document()
    cases: list[tuple[str, Any]] = []

    def case(expected: str, change: Any) -> None:
        cases.append((expected, change))

    def drop_operation(doc: dict[str, Any]) -> None:
        del doc["paths"]["/v1/sweep"]

    def add_operation(doc: dict[str, Any]) -> None:
        doc["paths"]["/v1/things"] = {"get": {"operationId": "listThings", "responses": {}}}

    def add_field(doc: dict[str, Any]) -> None:
        doc["components"]["schemas"]["JobInfo"]["properties"]["node"] = {"type": "string"}

    def drop_field(doc: dict[str, Any]) -> None:
        del doc["components"]["schemas"]["LogTail"]["properties"]["warning"]

    def add_parameter(doc: dict[str, Any]) -> None:
        doc["paths"]["/v1/jobs"]["get"]["parameters"].append({"name": "sortBy", "in": "query"})

    def drop_parameter(doc: dict[str, Any]) -> None:
        parameters = doc["paths"]["/v1/events"]["get"]["parameters"]
        parameters[:] = [p for p in parameters if p["name"] != "selector"]

    def add_body_property(doc: dict[str, Any]) -> None:
        doc["components"]["schemas"]["SubmitRequest"]["properties"]["priority"] = {
            "type": "integer"
        }

    def add_state(doc: dict[str, Any]) -> None:
        doc["components"]["schemas"]["JobState"]["enum"].append("PAUSED")

    def make_required(doc: dict[str, Any]) -> None:
        doc["components"]["schemas"]["JobInfo"]["required"].append("exitCode")

    def add_event(doc: dict[str, Any]) -> None:
        operation = doc["paths"]["/v1/events"]["get"]
        operation["description"] += " `event: bookmark` now and then."

    def change_answer(doc: dict[str, Any]) -> None:
        doc["paths"]["/v1/jobs"]["post"]["responses"]["201"]["content"]["application/json"][
            "schema"
        ] = {"$ref": "#/components/schemas/JobInfo"}

    case("operation sweepOrphans", drop_operation)
    case("operation listThings (GET /v1/things) is missing from the client", add_operation)
    case("field JobInfo.node is missing from the client", add_field)
    case("the client reads field LogTail.warning, which the document lacks", drop_field)
    case("listJobs: query parameter sortBy is missing from the client", add_parameter)
    case("watchJobs: the client sends query parameter selector", drop_parameter)
    case("SubmitRequest.priority is missing from the client", add_body_property)
    case("JobState value PAUSED is missing from the client", add_state)
    case("JobInfo.exitCode is required in the document, optional in the client", make_required)
    case("watchJobs: event bookmark is missing from the client", add_event)
    case(
        "submitJob: the client reads the 201 answer as Submitted, the document says JobInfo",
        change_answer,
    )
    for expected, change in cases:
        doctored = copy.deepcopy(document)
        change(doctored)
        found = disagreements(doctored)
        assert any(expected in problem for problem in found), (expected, found)
