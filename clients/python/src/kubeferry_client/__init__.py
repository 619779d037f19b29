"""A typed client for the kubeferry HTTP service (``kubeferry serve``): submit batch jobs to
Kubernetes, wait for them over Server-Sent Events, cancel them, read and follow their logs,
list and watch them, sweep orphans.

    from kubeferry_client import Client, JobState

    client = Client("http://127.0.0.1:8080", token)
    job = client.submit("nightly-42", {"name": "hello", "image": "busybox",
                                        "command": ["sh", "-c", "echo hi"]})
    info = client.wait(job, timeout=600)
    assert info.state is JobState.SUCCEEDED, info.message
"""

from ._client import Client, JobRef, ParamValue, WatchEvent
from ._errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    InvalidArgument,
    InvalidSpec,
    JobGone,
    KubeferryError,
    NoSuchJob,
    NotFound,
    ProtocolError,
    ServerError,
    TransportError,
    Unauthorized,
    Unavailable,
    WaitTimeout,
    WrongCluster,
)
from ._models import (
    CancelResult,
    ClusterReadiness,
    FailureClass,
    GoneEvent,
    Health,
    JobInfo,
    JobList,
    JobListItem,
    JobState,
    ListedEvent,
    LogTail,
    NamespaceReadiness,
    OrphanItem,
    Readiness,
    Reason,
    SpecProblem,
    Submitted,
    SweepResult,
    WatchReadiness,
)

__all__ = [
    "ApiError",
    "BadRequest",
    "CancelResult",
    "Client",
    "ClusterReadiness",
    "Conflict",
    "FailureClass",
    "Forbidden",
    "GoneEvent",
    "Health",
    "InvalidArgument",
    "InvalidSpec",
    "JobGone",
    "JobInfo",
    "JobList",
    "JobListItem",
    "JobRef",
    "JobState",
    "KubeferryError",
    "ListedEvent",
    "LogTail",
    "NamespaceReadiness",
    "NoSuchJob",
    "NotFound",
    "OrphanItem",
    "ParamValue",
    "ProtocolError",
    "Readiness",
    "Reason",
    "ServerError",
    "SpecProblem",
    "Submitted",
    "SweepResult",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "WaitTimeout",
    "WatchEvent",
    "WatchReadiness",
    "WrongCluster",
]
