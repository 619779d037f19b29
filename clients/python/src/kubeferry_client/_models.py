"""The service's answers as dataclasses, decoded from its JSON by the wire names each field
carries (which the OpenAPI agreement test compares with the document's schemas)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ._errors import ProtocolError


class JobState(str, enum.Enum):
    """Where a job stands. QUEUED and STARTED go on; SUCCEEDED, FAILED and CANCELLED are final
    and never change; CANCELLING is a cancel in progress."""

    QUEUED = "QUEUED"
    STARTED = "STARTED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"

    @property
    def is_final(self) -> bool:
        """Whether the state never changes any more."""
        return self in _FINAL_STATES

    def __str__(self) -> str:
        return self.value


_FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class _OpenStrEnum(str, enum.Enum):
    """A string enum that keeps a value a newer service sends and this client does not know
    (as a member outside the listed ones) instead of failing to read the whole answer."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member

    def __str__(self) -> str:
        return str(self.value)


class Reason(_OpenStrEnum):
    """Why a job is in its state (docs/statuses.md describes each)."""

    PENDING = "Pending"
    SUSPENDED = "Suspended"
    UNSCHEDULABLE = "Unschedulable"
    CONTAINER_CREATING = "ContainerCreating"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    RUNNING = "Running"
    COMPLETED = "Completed"
    ERROR = "Error"
    OOM_KILLED = "OomKilled"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    POD_FAILURE_POLICY = "PodFailurePolicy"
    SPARK_FAILED = "SparkFailed"
    IMAGE_PULL_FAILED = "ImagePullFailed"
    INVALID_IMAGE_NAME = "InvalidImageName"
    CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
    CREATE_CONTAINER_ERROR = "CreateContainerError"
    UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
    NO_STATUS_TIMEOUT = "NoStatusTimeout"
    DRIVER_START_TIMED_OUT = "DriverStartTimedOut"
    EXECUTORS_START_TIMED_OUT = "ExecutorsStartTimedOut"
    SCHEDULING_FAILURE = "SchedulingFailure"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    NODE_LOST = "NodeLost"
    DISRUPTED = "Disrupted"
    DELETED_EXTERNALLY = "DeletedExternally"
    CANCEL_REQUESTED = "CancelRequested"
    CANCELLED = "Cancelled"
    UNRECOGNIZED_STATUS = "UnrecognizedStatus"


class FailureClass(_OpenStrEnum):
    """Whose fault a failure was: ``user`` (the job's own), ``infrastructure`` (the cluster's: a
    retry may succeed) or ``configuration`` (the spec or the cluster's setup: no retry helps
    until it is fixed)."""

    USER = "user"
    INFRASTRUCTURE = "infrastructure"
    CONFIGURATION = "configuration"


class DryRunMode(_OpenStrEnum):
    """How a dry run tries a submission: ``client`` (the objects as kubeferry builds them) or
    ``server`` (as the API server would store them, judged by its admission and quotas)."""

    CLIENT = "client"
    SERVER = "server"


def _wire(name: str, decode: Callable[[Any], Any] | None = None, **kwargs: Any) -> Any:
    """A dataclass field read from the JSON property `name`, converted by `decode`."""
    return dataclasses.field(metadata={"wire": name, "decode": decode}, **kwargs)


def _timestamp(value: Any) -> datetime.datetime:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp")
    # fromisoformat reads a trailing Z from Python 3.11 on; earlier ones need +00:00.
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(value)


def _optional(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else decode(value)


def _list_of(cls: type[Any]) -> Callable[[Any], Any]:
    def decode(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise ValueError(f"{value!r} is not a list")
        return [decode_as(cls, item) for item in value]

    return decode


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{value!r} is not a list of strings")
    return list(value)


T = TypeVar("T")


def wire_fields(cls: type[Any]) -> dict[str, dataclasses.Field[Any]]:
    """A response dataclass's fields by their JSON property names."""
    return {field.metadata["wire"]: field for field in dataclasses.fields(cls)}


def decode_as(cls: type[T], data: Any) -> T:
    """Reads a JSON object as `cls`; a missing required property or a value of the wrong kind
    raises ProtocolError naming the property. Properties the client does not know are ignored
    (a newer service may add some)."""
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{cls.__name__}: expected a JSON object, got {data!r}")
    values: dict[str, Any] = {}
    for wire, field in wire_fields(cls).items():
        if wire not in data:
            if (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            ):
                raise ProtocolError(f"{cls.__name__}.{wire}: missing from the answer")
            continue
        decode = field.metadata["decode"]
        try:
            values[field.name] = data[wire] if decode is None else decode(data[wire])
        except (ValueError, TypeError, ProtocolError) as error:
            raise ProtocolError(f"{cls.__name__}.{wire}: {error}") from None
    return cls(**values)


def _as(cls: type[Any]) -> Callable[[Any], Any]:
    return lambda value: decode_as(cls, value)


@dataclasses.dataclass(frozen=True)
class IndexFailureInfo:
    """Why one index of an indexed job failed."""

    index: int = _wire("index")
    """The index."""
    reason: Reason = _wire("reason", Reason)
    """Why its last attempt failed."""
    exit_code: int | None = _wire("exitCode", default=None)
    """Its last attempt's exit code."""
    message: str = _wire("message", default="")
    """Why, for humans."""


@dataclasses.dataclass(frozen=True)
class Indexes:
    """Where the indexes of an indexed job stand."""

    completions: int = _wire("completions")
    """How many indexes the job has."""
    succeeded: int = _wire("succeeded")
    """Indexes that succeeded."""
    failed: int = _wire("failed")
    """Indexes that failed for good."""
    running: int = _wire("running")
    """Indexes whose pod runs."""
    pending: int = _wire("pending")
    """Indexes not yet running, succeeded or failed (or never run because the job ended
    first)."""
    completed_indexes: str = _wire("completedIndexes", default="")
    """The succeeded indexes as the Job reports them (e.g. ``0-2,4``)."""
    failed_indexes: str = _wire("failedIndexes", default="")
    """The failed indexes as the Job reports them."""
    failures: list[IndexFailureInfo] = _wire(
        "failures", _list_of(IndexFailureInfo), default_factory=list
    )
    """Why failed indexes failed, lowest index first (at most 20)."""


@dataclasses.dataclass(frozen=True)
class ReplicatedJobCounts:
    """How the Jobs of one replicated job of a JobSet stand."""

    name: str = _wire("name")
    """The replicated job's name."""
    replicas: int = _wire("replicas")
    """How many Jobs it has."""
    ready: int = _wire("ready")
    """Jobs whose pods are all ready (or succeeded)."""
    succeeded: int = _wire("succeeded")
    """Jobs that succeeded."""
    failed: int = _wire("failed")
    """Jobs that failed."""
    active: int = _wire("active")
    """Jobs with a pod still running or pending."""
    suspended: int = _wire("suspended")
    """Jobs that are suspended."""


@dataclasses.dataclass(frozen=True)
class Replicas:
    """Where a JobSet stands: its restarts, its terminal state and each replicated job's
    Jobs."""

    restarts: int = _wire("restarts")
    """How many times the whole set was restarted."""
    replicated_jobs: list[ReplicatedJobCounts] = _wire(
        "replicatedJobs", _list_of(ReplicatedJobCounts)
    )
    """Each replicated job, in the spec's order."""
    terminal_state: str | None = _wire("terminalState", default=None)
    """The JobSet's terminal state (``Completed``, ``Failed``) once it has ended."""


@dataclasses.dataclass(frozen=True)
class JobInfo:
    """A job's execution info."""

    id: str = _wire("id")
    """The execution id `<cluster>/<kind>/<namespace>/<name>`."""
    state: JobState = _wire("state", JobState)
    """Where the job stands."""
    reason: Reason = _wire("reason", Reason)
    """Why, machine-readable."""
    message: str = _wire("message", default="")
    """Why, for humans (the scheduler's message, the container's termination message, ...)."""
    exit_code: int | None = _wire("exitCode", default=None)
    """The main container's exit code, once it has one."""
    last_words: str | None = _wire("lastWords", default=None)
    """The main container's last words, kept with its outcome once its pod is gone: its
    termination message as the kubelet kept it (for a failed container, the last lines of its
    log: at most 80 lines, 2,048 bytes)."""
    failure_class: FailureClass | None = _wire(
        "failureClass", _optional(FailureClass), default=None
    )
    """For a failure, whose fault it was."""
    started_at: datetime.datetime | None = _wire("startedAt", _optional(_timestamp), default=None)
    """When the main container started; once set, every later answer keeps it."""
    finished_at: datetime.datetime | None = _wire("finishedAt", _optional(_timestamp), default=None)
    """When the job reached its final state."""
    indexes: Indexes | None = _wire("indexes", _optional(_as(Indexes)), default=None)
    """For an indexed job: where its indexes stand (``None`` for every other job)."""
    replicas: Replicas | None = _wire("replicas", _optional(_as(Replicas)), default=None)
    """For a JobSet: its restarts and where each replicated job's Jobs stand (``None`` for
    every other job)."""
    job_id: str | None = _wire("jobId", default=None)
    """The caller's job id, when the answer knows it (a list, a lookup by job id)."""

    @property
    def is_final(self) -> bool:
        """Whether the job has ended (SUCCEEDED, FAILED or CANCELLED)."""
        return self.state.is_final


@dataclasses.dataclass(frozen=True)
class Submitted:
    """A submitted job."""

    id: str = _wire("id")
    """The execution id."""
    job_id: str = _wire("jobId")
    """The caller's job id."""
    cluster: str = _wire("cluster")
    """The cluster."""
    namespace: str = _wire("namespace")
    """The namespace."""
    existing: bool = _wire("existing", default=False)
    """True when the job id already named a job (running, or ended): nothing was created and
    the execution id is that job's. False when this submission created the job."""
    warnings: list[str] = _wire("warnings", _strings, default_factory=list)
    """Things worth knowing that did not stop the submission (e.g. unused parameters)."""
    dry_run: DryRunMode | None = _wire("dryRun", _optional(DryRunMode), default=None)
    """A dry run's mode: then nothing was created, and ``objects`` are what would have been."""
    objects: list[dict[str, Any]] | None = _wire("objects", default=None)
    """A dry run's objects (Kubernetes objects, ready for ``kubectl apply``)."""


@dataclasses.dataclass(frozen=True)
class CancelResult:
    """What a cancel did."""

    already_ended: bool = _wire("alreadyEnded")
    """The job had already ended; its outcome stands and nothing was changed."""
    job: JobInfo = _wire("job", _as(JobInfo))
    """The job's status after the cancel (CANCELLING or CANCELLED, or its final state)."""


@dataclasses.dataclass(frozen=True)
class LogTail:
    """The end of a job's log."""

    log: str = _wire("log")
    """The text: the end of the log; once the job's pods are gone, the last words kept with
    its outcome. Empty when there is no log (the warning says why)."""
    warning: str | None = _wire("warning", default=None)
    """Why the log is empty, or where it comes from when not from a container (the last words
    of a job whose pods are gone); or why it could not be read."""


@dataclasses.dataclass(frozen=True)
class TimelineStep:
    """One thing that happened to a job."""

    what: str = _wire("what")
    """What: ``Submitted``, an event's reason (``Scheduled``, ``FailedScheduling``, ...),
    ``Started``, ``Ended``, ``CancelRequested``, or the final state."""
    detail: str = _wire("detail")
    """The details: an event's message, an attempt's exit code, who cancelled."""
    at: datetime.datetime | None = _wire("at", _optional(_timestamp), default=None)
    """When (to the second)."""
    object: str | None = _wire("object", default=None)
    """The object it happened to, when not the job's own (a pod, a JobSet's Job, a driver)."""
    warning: bool = _wire("warning", default=False)
    """Whether it went wrong."""


@dataclasses.dataclass(frozen=True)
class TimeSpent:
    """Where a job's time went, in seconds; a part not reached is None."""

    waiting: int | None = _wire("waiting", default=None)
    """From the submission until a node was found."""
    starting: int | None = _wire("starting", default=None)
    """From then until the main container started."""
    running: int | None = _wire("running", default=None)
    """From then until the end (or now)."""


@dataclasses.dataclass(frozen=True)
class Timeline:
    """A job's story: its status, what happened in time order, where its time went, and what
    to do about how it ended."""

    job: JobInfo = _wire("job", _as(JobInfo))
    """The job's status."""
    steps: list[TimelineStep] = _wire("steps", _list_of(TimelineStep))
    """What happened, oldest first."""
    spent: TimeSpent = _wire("spent", _as(TimeSpent))
    """Where the time went."""
    what_to_do: str | None = _wire("whatToDo", default=None)
    """What to do about how the job ended, where kubeferry knows."""


@dataclasses.dataclass(frozen=True)
class JobListItem:
    """One job in a list."""

    job: JobInfo = _wire("job", _as(JobInfo))
    """The job's status."""
    job_id: str | None = _wire("jobId", default=None)
    """The caller's job id."""
    created_at: datetime.datetime | None = _wire("createdAt", _optional(_timestamp), default=None)
    """When the job was created."""
    pod: str | None = _wire("pod", default=None)
    """The newest attempt's pod, if one exists."""
    node: str | None = _wire("node", default=None)
    """The node that pod was scheduled to, once it was."""
    attempts: int = _wire("attempts", default=0)
    """How many attempts' pods still exist."""


@dataclasses.dataclass(frozen=True)
class JobList:
    """A page of jobs, oldest first."""

    items: list[JobListItem] = _wire("items", _list_of(JobListItem))
    """The jobs."""
    continue_: str | None = _wire("continue", default=None)
    """Pass as `continue_` for the next page; None on the last page."""


@dataclasses.dataclass(frozen=True)
class OrphanItem:
    """A managed job whose job id the caller does not know."""

    id: str = _wire("id")
    """The execution id."""
    deleted: bool = _wire("deleted")
    """Whether it was deleted."""
    job_id: str | None = _wire("jobId", default=None)
    """The job id it carries."""
    created_at: datetime.datetime | None = _wire("createdAt", _optional(_timestamp), default=None)
    """When it was created."""


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """The result of a sweep."""

    orphans: list[OrphanItem] = _wire("orphans", _list_of(OrphanItem))
    """The orphans found."""


@dataclasses.dataclass(frozen=True)
class TemplateList:
    """The templates a submission may name."""

    templates: list[str] = _wire("templates", _strings)
    """Their names."""


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, dict) or not all(
        isinstance(key, str) and isinstance(count, int) for key, count in value.items()
    ):
        raise ValueError(f"{value!r} is not a mapping of names to counts")
    return dict(value)


@dataclasses.dataclass(frozen=True)
class WhoAmI:
    """Who a token names, and where it may act."""

    name: str = _wire("name")
    """The token's name (`anonymous` without authentication)."""
    namespaces: list[str] = _wire("namespaces", _strings)
    """The served namespaces it may use, the default first."""


@dataclasses.dataclass(frozen=True)
class StateSample:
    """How many jobs stood in each state at one moment."""

    at: datetime.datetime = _wire("at", _timestamp)
    """When it was taken."""
    counts: dict[str, int] = _wire("counts", _counts)
    """Jobs by state (states with none are left out)."""


@dataclasses.dataclass(frozen=True)
class Stats:
    """How many jobs stood in each state over the last hour, as one replica sampled them."""

    minutes: list[StateSample] = _wire("minutes", _list_of(StateSample))
    """The samples, oldest first."""


@dataclasses.dataclass(frozen=True)
class GoneEvent:
    """A job that is gone and whose end is unknown: deleted by someone else, or removed after it
    ended. A caller that was cancelling it may settle it as cancelled."""

    id: str = _wire("id")
    """The execution id."""
    message: str = _wire("message")
    """What is known."""


@dataclasses.dataclass(frozen=True)
class ListedEvent:
    """A namespace's matching jobs have all been sent once (in a watch)."""

    cluster: str = _wire("cluster")
    """The cluster."""
    namespace: str = _wire("namespace")
    """The namespace."""


@dataclasses.dataclass(frozen=True)
class Health:
    """The process is up."""

    status: str = _wire("status")
    """Always `ok`."""


@dataclasses.dataclass(frozen=True)
class WatchReadiness:
    """One watch."""

    resource: str = _wire("resource")
    """The resource watched."""
    synced: bool = _wire("synced")
    """It has listed and is current."""
    restarts: int = _wire("restarts")
    """How often it failed and was re-established."""


@dataclasses.dataclass(frozen=True)
class NamespaceReadiness:
    """One namespace's watches."""

    name: str = _wire("name")
    """The namespace."""
    synced: bool = _wire("synced")
    """Every watch has started, listed and is current."""
    watch_restarts: int = _wire("watchRestarts")
    """How often the watches failed and were re-established."""
    watches: list[WatchReadiness] = _wire("watches", _list_of(WatchReadiness), default_factory=list)
    """Each watch."""
    failing: str | None = _wire("failing", default=None)
    """The last watch failure, while a watch is failing."""


@dataclasses.dataclass(frozen=True)
class ClusterReadiness:
    """One cluster's readiness."""

    name: str = _wire("name")
    """The cluster's name."""
    reachable: bool = _wire("reachable")
    """Whether the API server answered lately."""
    namespaces: list[NamespaceReadiness] = _wire("namespaces", _list_of(NamespaceReadiness))
    """Each namespace's watches."""


@dataclasses.dataclass(frozen=True)
class Readiness:
    """Whether a replica can answer from synced caches."""

    ready: bool = _wire("ready")
    """Ready to serve."""
    clusters: list[ClusterReadiness] = _wire("clusters", _list_of(ClusterReadiness))
    """Each cluster's state."""
    reason: str | None = _wire("reason", default=None)
    """Why not, when not."""


@dataclasses.dataclass(frozen=True)
class SpecProblem:
    """One problem of a job spec."""

    file: str = _wire("file")
    """`spec` (a spec given as text), `body` (a spec given as a JSON object) or the template's
    file name."""
    field: str = _wire("field")
    """The field, e.g. `spec.resources.memory`; empty for problems of the whole text."""
    message: str = _wire("message")
    """What is wrong."""
    line: int | None = _wire("line", default=None)
    """The line, from 1."""
    column: int | None = _wire("column", default=None)
    """The column in characters, from 1."""


@dataclasses.dataclass(frozen=True)
class ErrorBody:
    """An error answer (raised as an ApiError, which carries these fields)."""

    code: str = _wire("code")
    """A stable code to branch on (`invalid_spec`, `no_such_job`, ...)."""
    message: str = _wire("message")
    """What is wrong, for humans; names the field."""
    field: str | None = _wire("field", default=None)
    """The request field, parameter or header at fault."""
    line: int | None = _wire("line", default=None)
    """Where a JSON body stopped parsing."""
    column: int | None = _wire("column", default=None)
    """Where a JSON body stopped parsing (in characters, from 1)."""
    problems: list[SpecProblem] = _wire("problems", _list_of(SpecProblem), default_factory=list)
    """Every problem of a job spec (`invalid_spec`)."""
    request_id: str | None = _wire("requestId", default=None)
    """The request's id, for finding it in the service's logs."""


#: The response dataclasses by the name of the OpenAPI schema each one reads.
SCHEMAS: dict[str, type[Any]] = {
    "JobInfo": JobInfo,
    "Indexes": Indexes,
    "IndexFailureInfo": IndexFailureInfo,
    "Replicas": Replicas,
    "ReplicatedJobCounts": ReplicatedJobCounts,
    "Submitted": Submitted,
    "CancelResult": CancelResult,
    "LogTail": LogTail,
    "Timeline": Timeline,
    "TimelineStep": TimelineStep,
    "TimeSpent": TimeSpent,
    "JobListItem": JobListItem,
    "JobList": JobList,
    "OrphanItem": OrphanItem,
    "SweepResult": SweepResult,
    "TemplateList": TemplateList,
    "WhoAmI": WhoAmI,
    "Stats": Stats,
    "StateSample": StateSample,
    "GoneEvent": GoneEvent,
    "ListedEvent": ListedEvent,
    "Health": Health,
    "WatchReadiness": WatchReadiness,
    "NamespaceReadiness": NamespaceReadiness,
    "ClusterReadiness": ClusterReadiness,
    "Readiness": Readiness,
    "SpecProblem": SpecProblem,
    "ErrorBody": ErrorBody,
}

#: The enums by the name of the OpenAPI schema whose values they list.
ENUMS: dict[str, type[enum.Enum]] = {
    "JobState": JobState,
    "Reason": Reason,
    "FailureClass": FailureClass,
    "DryRunMode": DryRunMode,
}
