"""The exceptions: one hierarchy under KubeferryError. An error answer of the service is an
ApiError (or one of its subclasses, chosen by HTTP status and code) carrying the service's
stable `code`, its `message` and the field at fault."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._models import GoneEvent, SpecProblem


class KubeferryError(Exception):
    """Every error this client raises."""


class InvalidArgument(KubeferryError, ValueError):
    """A call's argument is wrong before anything is sent (e.g. a malformed execution id)."""


class TransportError(KubeferryError):
    """The service could not be reached, or a connection broke and could not be re-established
    within the client's reconnect time."""


class ProtocolError(KubeferryError):
    """The service answered something this client cannot read."""


class WaitTimeout(KubeferryError, TimeoutError):
    """`wait` gave up before the job ended; `last` is the last status seen (None if none)."""

    def __init__(self, message: str, last: Any = None) -> None:
        super().__init__(message)
        self.last = last


class JobGone(KubeferryError):
    """The job disappeared while it was followed and its end is unknown (deleted by someone
    else, or removed after it ended). A caller that was cancelling it may settle it as
    cancelled."""

    def __init__(self, event: GoneEvent) -> None:
        super().__init__(f"{event.id}: {event.message}")
        self.id = event.id
        self.message = event.message


class ApiError(KubeferryError):
    """An error answer of the service (or an `event: error` in a stream, with `status` None).

    Branch on `code`, the service's stable error code (`invalid_spec`, `no_such_job`,
    `wrong_cluster`, ...); `message` names the field at fault, `field` is that field when there
    is one, and `problems` lists every problem of an invalid spec."""

    def __init__(
        self,
        status: int | None,
        code: str,
        message: str,
        *,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
        problems: Sequence[SpecProblem] = (),
        request_id: str | None = None,
    ) -> None:
        prefix = f"{status} " if status is not None else ""
        super().__init__(f"{prefix}{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.line = line
        self.column = column
        self.problems = list(problems)
        self.request_id = request_id


class BadRequest(ApiError):
    """400, 413, 415: a malformed body, a wrong field or parameter, a malformed execution id."""


class Unauthorized(ApiError):
    """401: no bearer token, or not a valid one."""


class Forbidden(ApiError):
    """403: a namespace the service does not serve, or the token may not use."""


class NotFound(ApiError):
    """404: no such job, template or endpoint."""


class NoSuchJob(NotFound):
    """404 `no_such_job`: never created on this cluster, or removed (cancelled and deleted,
    TTL)."""


class Conflict(ApiError):
    """409: the job id was used for a different spec (`name_taken`), or the object kept
    changing while the service acted on it (`kubernetes_rejected`: ask again)."""


class WrongCluster(ApiError):
    """421: the id names a cluster the service is not configured for."""


class InvalidSpec(ApiError):
    """422: the spec or template is invalid (`invalid_spec`, every problem in `problems`), no
    Spark operator can run it (`spark_unavailable`), the cluster does not serve JobSets
    (`jobset_unavailable`), or Kubernetes refused it."""


class Unavailable(ApiError):
    """503: Kubernetes is unreachable or kept failing, or the replica is shutting down."""


class ServerError(ApiError):
    """500, 502, 504: the service failed, its Kubernetes permissions fall short, or it timed
    out."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: BadRequest,
    415: BadRequest,
    421: WrongCluster,
    422: InvalidSpec,
    500: ServerError,
    502: ServerError,
    503: Unavailable,
    504: ServerError,
}


def error_class(status: int | None, code: str) -> type[ApiError]:
    """The exception class for an error answer."""
    if code == "no_such_job":
        return NoSuchJob
    if status is None:
        return ApiError
    return _BY_STATUS.get(status, ApiError)
