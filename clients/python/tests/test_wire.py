"""Reading the wire without a service: Server-Sent Events framing, answers decoded into the
dataclasses (tolerant of what a newer service adds, strict about what is missing), and error
answers mapped to their exception classes."""

from __future__ import annotations

import datetime
import io

import pytest

from kubeferry_client import (
    ApiError,
    BadRequest,
    Client,
    InvalidArgument,
    InvalidSpec,
    JobInfo,
    JobState,
    NoSuchJob,
    NotFound,
    ProtocolError,
    Reason,
    ServerError,
    Unavailable,
    WrongCluster,
)
from kubeferry_client._errors import error_class
from kubeferry_client._models import decode_as
from kubeferry_client._sse import SseEvent, SseReader


def events(text: bytes) -> tuple[list[SseEvent], SseReader]:
    reader = SseReader(io.BytesIO(text).readline)
    return list(reader), reader


def test_sse_framing() -> None:
    stream = (
        b": keep-alive\n\n"
        b'event: status\ndata: {"a":\ndata: 1}\n\n'
        b" data: a field name with a space before it is not data\n\n"
        b"data:no space\r\n\r\n"
        b"id: 7\nretry: 250\nevent: gone\ndata: x\n\n"
        b"event: empty\n\n"
        b"event: cut\ndata: never dispatched"
    )
    read, reader = events(stream)
    assert read == [
        SseEvent("status", '{"a":\n1}'),
        SseEvent("message", "no space"),
        SseEvent("gone", "x", "7"),
    ]
    assert (reader.last_event_id, reader.retry_ms) == ("7", 250)


def test_job_info_decoding() -> None:
    info = decode_as(
        JobInfo,
        {
            "id": "sim/job/default/x-1",
            "state": "FAILED",
            "reason": "SomethingNew",
            "message": "m",
            "exitCode": 3,
            "failureClass": "user",
            "startedAt": "2026-01-02T03:04:05Z",
            "finishedAt": "2026-01-02T03:09:12.5+00:00",
            "aFieldFromANewerService": True,
        },
    )
    assert info.state is JobState.FAILED and info.is_final
    # A reason this client does not know is kept, not refused.
    assert info.reason == "SomethingNew" and isinstance(info.reason, Reason)
    assert info.started_at == datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    assert info.finished_at is not None and info.finished_at.microsecond == 500_000
    minimal = decode_as(JobInfo, {"id": "a/b/c/d", "state": "QUEUED", "reason": "Pending"})
    assert (minimal.message, minimal.exit_code, minimal.started_at) == ("", None, None)
    assert not minimal.is_final


def test_index_summary_decoding() -> None:
    info = decode_as(
        JobInfo,
        {
            "id": "sim/job/default/shards-1",
            "state": "FAILED",
            "reason": "OomKilled",
            "exitCode": 137,
            "indexes": {
                "completions": 5,
                "succeeded": 3,
                "failed": 1,
                "running": 0,
                "pending": 1,
                "completedIndexes": "0-2",
                "failedIndexes": "3",
                "failures": [
                    {"index": 3, "reason": "OomKilled", "exitCode": 137, "message": "m"},
                ],
            },
        },
    )
    assert info.indexes is not None
    assert (info.indexes.succeeded, info.indexes.failed, info.indexes.pending) == (3, 1, 1)
    assert info.indexes.completed_indexes == "0-2"
    failure = info.indexes.failures[0]
    assert (failure.index, failure.reason, failure.exit_code) == (3, Reason.OOM_KILLED, 137)
    # Every other job has no index summary.
    plain = decode_as(JobInfo, {"id": "a/b/c/d", "state": "QUEUED", "reason": "Pending"})
    assert plain.indexes is None
    with pytest.raises(ProtocolError, match=r"Indexes\.completions: missing"):
        decode_as(
            JobInfo,
            {"id": "a/b/c/d", "state": "QUEUED", "reason": "Pending", "indexes": {"failed": 0}},
        )


def test_replica_summary_decoding() -> None:
    info = decode_as(
        JobInfo,
        {
            "id": "sim/jobset/default/train-1",
            "state": "FAILED",
            "reason": "OomKilled",
            "exitCode": 137,
            "replicas": {
                "restarts": 1,
                "terminalState": "Failed",
                "replicatedJobs": [
                    {
                        "name": "leader",
                        "replicas": 1,
                        "ready": 1,
                        "succeeded": 0,
                        "failed": 0,
                        "active": 1,
                        "suspended": 0,
                    },
                    {
                        "name": "workers",
                        "replicas": 2,
                        "ready": 1,
                        "succeeded": 0,
                        "failed": 1,
                        "active": 1,
                        "suspended": 0,
                    },
                ],
            },
        },
    )
    assert info.replicas is not None
    assert (info.replicas.restarts, info.replicas.terminal_state) == (1, "Failed")
    workers = info.replicas.replicated_jobs[1]
    assert (workers.name, workers.replicas, workers.failed, workers.active) == ("workers", 2, 1, 1)
    # Every other job has no replica summary.
    plain = decode_as(JobInfo, {"id": "a/b/c/d", "state": "QUEUED", "reason": "Pending"})
    assert plain.replicas is None
    with pytest.raises(ProtocolError, match=r"Replicas\.replicatedJobs: missing"):
        decode_as(
            JobInfo,
            {"id": "a/b/c/d", "state": "QUEUED", "reason": "Pending", "replicas": {"restarts": 0}},
        )


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"id": "a/b/c/d", "reason": "Pending"}, "JobInfo.state: missing"),
        ({"id": "a/b/c/d", "state": "PAUSED", "reason": "Pending"}, "JobInfo.state: 'PAUSED'"),
        ({"id": "a/b/c/d", "state": "QUEUED", "reason": "Pending", "startedAt": 5}, "startedAt"),
        ([], "JobInfo: expected a JSON object"),
    ],
)
def test_what_cannot_be_read_is_a_protocol_error_naming_the_field(data: object, named: str) -> None:
    with pytest.raises(ProtocolError, match=named.replace("(", r"\(")):
        decode_as(JobInfo, data)


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (404, "no_such_job", NoSuchJob),
        (404, "no_such_template", NotFound),
        (400, "bad_parameter", BadRequest),
        (415, "unsupported_media_type", BadRequest),
        (421, "wrong_cluster", WrongCluster),
        (422, "invalid_spec", InvalidSpec),
        (503, "kubernetes_unreachable", Unavailable),
        (504, "timeout", ServerError),
        (418, "teapot", ApiError),
        (None, "kubernetes_error", ApiError),
    ],
)
def test_error_classes(status: int | None, code: str, cls: type[ApiError]) -> None:
    assert error_class(status, code) is cls


def test_arguments_are_checked_before_anything_is_sent() -> None:
    with pytest.raises(InvalidArgument, match="url"):
        Client("127.0.0.1:8080")
    with pytest.raises(InvalidArgument, match="timeout"):
        Client("http://127.0.0.1:8080", timeout=0)
    client = Client("http://127.0.0.1:9")
    with pytest.raises(InvalidArgument, match="execution id"):
        client.status("sim/job/default")
    with pytest.raises(InvalidArgument, match="known_job_ids"):
        client.sweep("one-job-id")
