"""The service's operations as this client calls them: method, path, query parameters, request
body properties and the schema of the answer, by OpenAPI operationId. The client builds every
request from this table (a parameter or body property not listed here cannot be sent), and the
OpenAPI agreement test compares it with the service's document."""

from __future__ import annotations

import dataclasses
from typing import Literal


@dataclasses.dataclass(frozen=True)
class Operation:
    """One operation of the service."""

    method: str
    path: str
    query: frozenset[str] = frozenset()
    """The query parameters the client may send."""
    body: str | None = None
    """The schema of the JSON request body, if there is one."""
    body_properties: frozenset[str] = frozenset()
    """The request body properties the client may send."""
    answer: str | None = None
    """The schema of the success answer (of each event of a stream); None for plain text."""
    success: frozenset[int] = frozenset({200})
    """The HTTP statuses of a success (answers with another are errors)."""
    kind: Literal["json", "sse", "text"] = "json"
    """How the answer comes: one JSON document, Server-Sent Events, or plain text."""
    authenticated: bool = True
    """Whether the operation takes the bearer token."""


_JOB = "/v1/jobs/{cluster}/{kind}/{namespace}/{name}"

OPERATIONS: dict[str, Operation] = {
    "submitJob": Operation(
        "POST",
        "/v1/jobs",
        body="SubmitRequest",
        body_properties=frozenset(
            {"jobId", "spec", "template", "params", "namespace", "cluster", "dryRun"}
        ),
        answer="Submitted",
        success=frozenset({200, 201}),
    ),
    "getJob": Operation("GET", _JOB, answer="JobInfo"),
    "getJobTimeline": Operation("GET", _JOB + "/timeline", answer="Timeline"),
    "cancelJob": Operation(
        "POST", _JOB + "/cancel", answer="CancelResult", success=frozenset({202})
    ),
    "getJobLogs": Operation(
        "GET",
        _JOB + "/logs",
        query=frozenset({"lines", "bytes", "previous", "follow", "index", "replica"}),
        answer="LogTail",
    ),
    "watchJob": Operation("GET", _JOB + "/events", answer="JobInfo", kind="sse"),
    "listJobs": Operation(
        "GET",
        "/v1/jobs",
        query=frozenset(
            {"namespace", "cluster", "selector", "jobId", "status", "limit", "continue"}
        ),
        answer="JobList",
    ),
    "watchJobs": Operation(
        "GET",
        "/v1/events",
        query=frozenset({"namespace", "cluster", "selector"}),
        answer="JobInfo",
        kind="sse",
    ),
    "sweepOrphans": Operation(
        "POST",
        "/v1/sweep",
        body="SweepRequest",
        body_properties=frozenset({"knownJobIds", "delete", "namespace", "cluster"}),
        answer="SweepResult",
    ),
    "listTemplates": Operation("GET", "/v1/templates", answer="TemplateList"),
    "whoAmI": Operation("GET", "/v1/whoami", answer="WhoAmI"),
    "jobStats": Operation("GET", "/v1/stats", query=frozenset({"namespace"}), answer="Stats"),
    "health": Operation("GET", "/healthz", answer="Health", authenticated=False),
    "ready": Operation(
        "GET",
        "/readyz",
        answer="Readiness",
        success=frozenset({200, 503}),
        authenticated=False,
    ),
    "metrics": Operation("GET", "/metrics", kind="text", authenticated=False),
}

#: The schemas of the events of the streams, by event name (`status` is the operation's answer).
STREAM_EVENTS: dict[str, dict[str, str]] = {
    "watchJob": {"status": "JobInfo", "gone": "GoneEvent", "error": "ErrorBody"},
    "watchJobs": {"status": "JobInfo", "listed": "ListedEvent", "gone": "GoneEvent"},
}
