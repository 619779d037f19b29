"""The client: one method per operation of the service, Server-Sent Events streams that
reconnect after a dropped connection, and errors raised as exceptions."""

from __future__ import annotations

import builtins
import functools
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Generator, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from ._errors import (
    ApiError,
    InvalidArgument,
    JobGone,
    NoSuchJob,
    ProtocolError,
    TransportError,
    Unavailable,
    WaitTimeout,
    error_class,
)
from ._models import (
    SCHEMAS,
    CancelResult,
    DryRunMode,
    ErrorBody,
    GoneEvent,
    Health,
    JobInfo,
    JobList,
    JobListItem,
    JobState,
    ListedEvent,
    LogTail,
    Readiness,
    Stats,
    Submitted,
    SweepResult,
    TemplateList,
    Timeline,
    WhoAmI,
    decode_as,
)
from ._operations import OPERATIONS, STREAM_EVENTS, Operation
from ._sse import SseReader

#: A job as the methods take it: its execution id, or an answer that carries one.
JobRef = str | Submitted | JobInfo

#: What `watch` yields.
WatchEvent = JobInfo | GoneEvent | ListedEvent

#: A template parameter's value.
ParamValue = str | int | float | bool

T = TypeVar("T")

# Connection failures worth trying again: nothing was answered, and every operation of the
# service is idempotent (a submission under the same job id creates nothing new).
_RETRYABLE = (ConnectionError, http.client.RemoteDisconnected, socket.gaierror)


class _Dropped(Exception):
    """A stream's connection ended or broke before the stream was done."""


class _Deadline(Exception):
    """The caller's deadline passed while reading a stream."""


class Client:
    """A client of one kubeferry service (any replica: they all answer for every job).

    ``Client("http://127.0.0.1:8080", token)``; ``https://`` URLs verify the service's
    certificate with the system's CAs, or with ``ca_file`` or ``ssl_context``. Every call opens
    its own connection, so one client may be used from several threads at once (e.g. ``wait``
    in one and ``cancel`` in another).

    ``timeout`` bounds each request (connecting and each read). A refused or dropped connection
    is tried again for up to ``reconnect_timeout`` seconds (every operation is idempotent), and
    so is an event stream whose connection drops, e.g. when a replica restarts: it re-subscribes
    and the service sends the current status first. ``stream_idle_timeout`` is how long a stream
    may stay silent (the service sends a keep-alive comment every ``timeouts.keepAlive``, 15 s
    by default) before it is taken for dropped."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        reconnect_timeout: float = 30.0,
        stream_idle_timeout: float = 60.0,
        ca_file: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InvalidArgument(f"url: {url!r} is not an http:// or https:// URL")
        if parsed.query or parsed.fragment:
            raise InvalidArgument(
                f"url: {url!r} has a query or fragment; give the service's base URL"
            )
        for name, value in (
            ("timeout", timeout),
            ("reconnect_timeout", reconnect_timeout),
            ("stream_idle_timeout", stream_idle_timeout),
        ):
            if not value > 0:
                raise InvalidArgument(f"{name}: {value!r} is not a positive number of seconds")
        self.url = url.rstrip("/")
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port
        self._base_path = parsed.path.rstrip("/")
        self._token = token
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self.stream_idle_timeout = stream_idle_timeout
        if self._https and ssl_context is None:
            ssl_context = ssl.create_default_context(cafile=ca_file)
        self._ssl_context = ssl_context
        self._reconnects = 0
        self._lock = threading.Lock()

    @property
    def reconnects(self) -> int:
        """How many times event streams of this client were re-established after a drop."""
        with self._lock:
            return self._reconnects

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # Jobs.

    def submit(
        self,
        job_id: str,
        spec: Mapping[str, Any] | str | None = None,
        *,
        template: str | None = None,
        params: Mapping[str, ParamValue] | None = None,
        namespace: str | None = None,
        cluster: str | None = None,
        dry_run: DryRunMode | str | None = None,
    ) -> Submitted:
        """Submits a job: a spec (a dict, or the text of a YAML or JSON job file) or the name of
        a template, rendered with ``params``, under the caller's own ``job_id``. Submitting the
        same job id again returns the same execution id and creates nothing (``existing`` is
        then True). Without ``namespace`` (here or in the spec), the job goes to the service's
        default namespace when the token may use it, else to the first one it may use. Raises
        InvalidSpec (422) with every problem for an invalid spec; nothing is created then.
        With ``dry_run`` (``client`` or ``server``) nothing is created either: ``objects`` are
        what would have been, and the server's refusal is the error."""
        body: dict[str, Any] = {"jobId": job_id}
        if spec is not None:
            body["spec"] = spec
        if template is not None:
            body["template"] = template
        if params is not None:
            body["params"] = dict(params)
        if namespace is not None:
            body["namespace"] = namespace
        if cluster is not None:
            body["cluster"] = cluster
        if dry_run is not None:
            body["dryRun"] = str(DryRunMode(dry_run))
        return self._json("submitJob", Submitted, body=body)

    def status(self, job: JobRef) -> JobInfo:
        """A job's execution info, from the service's watch cache."""
        return self._json("getJob", JobInfo, path=_id_params(job))

    def describe(self, job: JobRef) -> Timeline:
        """A job's story: what happened to it in time order (its events, each attempt's end, a
        cancel, the outcome), where its time went and what to do about how it ended. Told
        from its objects while they last, then from its outcome record."""
        return self._json("getJobTimeline", Timeline, path=_id_params(job))

    def cancel(self, job: JobRef) -> CancelResult:
        """Cancels a job and returns at once: the job goes CANCELLING, then CANCELLED. Harmless
        to repeat; a job that already ended keeps its outcome (``already_ended``)."""
        return self._json("cancelJob", CancelResult, path=_id_params(job))

    def logs(
        self,
        job: JobRef,
        lines: int | None = None,
        bytes: int | None = None,
        *,
        previous: bool = False,
        index: int | None = None,
        replica: str | None = None,
    ) -> LogTail:
        """The end of the newest attempt's log: at most ``lines`` lines and ``bytes`` bytes
        (``previous``: the attempt before it; ``index``: of that index of an indexed job, or of
        that Job of a JobSet's replicated job; ``replica``: of that replicated job of a JobSet,
        the first one by default). Never silently empty: without a log, ``warning`` says why;
        once the job's pods are gone, ``log`` is the last words kept with its outcome and
        ``warning`` says so. A log that cannot be read is an empty ``log`` with a ``warning``,
        never an error; an index or replicated job the job does not have raises
        ``BadRequest``."""
        query: dict[str, Any] = {
            "lines": lines,
            "bytes": bytes,
            "index": index,
            "replica": replica,
        }
        if previous:
            query["previous"] = True
        return self._json("getJobLogs", LogTail, path=_id_params(job), query=query)

    def follow(
        self,
        job: JobRef,
        lines: int | None = None,
        *,
        index: int | None = None,
        replica: str | None = None,
    ) -> Generator[str, None, None]:
        """The job's log as it is written, line by line (without the line ends), until its
        container ends; starting with the last ``lines`` lines if given, else from the start
        (``index``: only that index's pods of an indexed job, or that Job of a JobSet's
        replicated job; ``replica``: that replicated job of a JobSet). A connection that drops
        mid-way raises TransportError (a log cannot be resumed where it broke off without
        repeating lines)."""
        path = _id_params(job)
        query = {"follow": True, "lines": lines, "index": index, "replica": replica}
        response = self._open("getJobLogs", path=path, query=query)
        return self._log_lines(response)

    def _log_lines(self, response: http.client.HTTPResponse) -> Generator[str, None, None]:
        try:
            while True:
                try:
                    raw = response.readline()
                except (OSError, http.client.HTTPException) as error:
                    raise TransportError(f"the followed log broke off: {error}") from None
                if not raw:
                    return
                yield raw.decode("utf-8", errors="replace").rstrip("\r\n")
        finally:
            response.close()

    def events(
        self, job: JobRef, *, timeout: float | None = None
    ) -> Generator[JobInfo, None, None]:
        """A job's status now and at each change, ending after its final state, over the job's
        event stream (no polling). A dropped connection is re-established and the current
        status, which the service sends first, is not repeated when it did not change. Raises
        JobGone when the job disappears with its end unknown, WaitTimeout after ``timeout``
        seconds."""
        path = _id_params(job)
        job_id = "/".join(path.values())
        deadline = None if timeout is None else time.monotonic() + timeout
        last: JobInfo | None = None
        events = self._stream("watchJob", path=path, deadline=deadline, gone_id=job_id)
        try:
            for name, value in events:
                if name == "status":
                    if value != last:
                        last = value
                        yield value
                    if value.is_final:
                        return
                elif name == "gone":
                    raise JobGone(value)
                elif name == "error":
                    raise _api_error(None, value)
                # "end": the stream ended without the final state (a replica shut down or
                # the connection dropped); the stream subscribes again.
        except _Deadline:
            raise WaitTimeout(f"{job_id} did not end within {timeout} s", last) from None
        finally:
            events.close()

    def wait(self, job: JobRef, timeout: float | None = None) -> JobInfo:
        """Waits until the job ends and returns its final status, over the job's event stream
        (no polling); survives a replica restart by reconnecting. Raises WaitTimeout (a
        TimeoutError) after ``timeout`` seconds, JobGone when the job disappears with its end
        unknown."""
        last: JobInfo | None = None
        for info in self.events(job, timeout=timeout):
            last = info
        if last is None:
            raise ProtocolError("the job's event stream ended without a status")
        return last

    def list(
        self,
        *,
        namespace: str | None = None,
        cluster: str | None = None,
        selector: str | None = None,
        job_id: str | None = None,
        status: Iterable[JobState | str] | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> JobList:
        """One page of jobs, oldest first, filtered by a label selector and by state; pass the
        page's ``continue_`` for the next (``iter_jobs`` walks every page). With ``job_id``:
        the job(s) submitted under that job id (in ``namespace``, else in every namespace the
        token may use), of any kind, found even once the job's object is gone."""
        states = None if status is None else ",".join(str(state) for state in status)
        query = {
            "namespace": namespace,
            "cluster": cluster,
            "selector": selector,
            "jobId": job_id,
            "status": states,
            "limit": limit,
            "continue": continue_,
        }
        return self._json("listJobs", JobList, query=query)

    def iter_jobs(
        self,
        *,
        namespace: str | None = None,
        cluster: str | None = None,
        selector: str | None = None,
        job_id: str | None = None,
        status: Iterable[JobState | str] | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobListItem]:
        """Every job of ``list``'s pages, one page at a time."""
        states = None if status is None else [str(state) for state in status]
        continue_: str | None = None
        while True:
            page = self.list(
                namespace=namespace,
                cluster=cluster,
                selector=selector,
                job_id=job_id,
                status=states,
                limit=page_size,
                continue_=continue_,
            )
            yield from page.items
            if not page.continue_:
                return
            continue_ = page.continue_

    def watch(
        self,
        selector: str | None = None,
        *,
        namespace: str | None = None,
        cluster: str | None = None,
    ) -> Generator[WatchEvent, None, None]:
        """Every job matching a label selector: a JobInfo for each at first and at each change
        (new jobs included), a ListedEvent once a namespace's jobs have all been sent, a
        GoneEvent for a job that disappears with its end unknown. Runs until the caller stops
        iterating. A dropped connection is re-established: statuses that did not change meanwhile
        are not repeated, and a job followed before that is no longer there once its namespace is
        listed again comes as a GoneEvent."""
        query = {"selector": selector, "namespace": namespace, "cluster": cluster}
        last: dict[str, JobInfo] = {}
        listed: set[tuple[str, str]] = set()
        # Jobs not yet seen again since the stream was re-established.
        unconfirmed: set[str] = set()
        events = self._stream("watchJobs", query=query)
        try:
            for name, value in events:
                if name == "status":
                    unconfirmed.discard(value.id)
                    if last.get(value.id) != value:
                        last[value.id] = value
                        yield value
                elif name == "gone":
                    unconfirmed.discard(value.id)
                    if last.pop(value.id, None) is not None:
                        yield value
                elif name == "listed":
                    for job_id in sorted(unconfirmed):
                        cluster_name, _, namespace_name, _ = job_id.split("/", 3)
                        if (cluster_name, namespace_name) == (value.cluster, value.namespace):
                            unconfirmed.discard(job_id)
                            if not last.pop(job_id).is_final:
                                yield GoneEvent(
                                    job_id, "no such job after the event stream reconnected"
                                )
                    if (value.cluster, value.namespace) not in listed:
                        listed.add((value.cluster, value.namespace))
                        yield value
                elif name == "end":
                    unconfirmed = set(last)
        finally:
            events.close()

    def sweep(
        self,
        known_job_ids: Iterable[str],
        *,
        delete: bool = False,
        namespace: str | None = None,
        cluster: str | None = None,
    ) -> SweepResult:
        """Finds the managed jobs whose job ids are not in ``known_job_ids`` (orphans), in the
        caller's namespaces (or one), and deletes them with their pods when ``delete``."""
        if isinstance(known_job_ids, str):
            raise InvalidArgument("known_job_ids: give a list of job ids, not one string")
        body: dict[str, Any] = {"knownJobIds": list(known_job_ids), "delete": delete}
        if namespace is not None:
            body["namespace"] = namespace
        if cluster is not None:
            body["cluster"] = cluster
        return self._json("sweepOrphans", SweepResult, body=body)

    def templates(self) -> builtins.list[str]:
        """The names of the templates a submission may name."""
        answer = self._json("listTemplates", TemplateList)
        return answer.templates

    def whoami(self) -> WhoAmI:
        """The token's name and the namespaces it may use."""
        return self._json("whoAmI", WhoAmI)

    def stats(self, namespace: str | None = None) -> Stats:
        """How many jobs stood in each state over the last hour, as the replica sampled them
        (of ``namespace``, else of every namespace the token may use)."""
        return self._json("jobStats", Stats, query={"namespace": namespace})

    # Operations.

    def health(self) -> Health:
        """Whether the replica's process is up."""
        return self._json("health", Health)

    def ready(self) -> Readiness:
        """Whether the replica can serve (its answer when it cannot too, with the reason)."""
        return self._json("ready", Readiness)

    def metrics(self) -> str:
        """The replica's metrics in the Prometheus text format."""
        response = self._open("metrics")
        with response:
            return self._read(response).decode("utf-8")

    # Requests.

    def _json(
        self,
        operation_id: str,
        answer: type[T],
        *,
        path: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> T:
        operation = OPERATIONS[operation_id]
        # The answer's class is the one the operations table names (which the OpenAPI agreement
        # test compares with the document).
        if operation.answer is None or SCHEMAS[operation.answer] is not answer:
            raise TypeError(f"{operation_id} answers {operation.answer}, not {answer.__name__}")
        response = self._open(operation_id, path=path, query=query, body=body)
        with response:
            data = _parse_json(self._read(response))
        return decode_as(answer, data)

    def _read(self, response: http.client.HTTPResponse) -> bytes:
        try:
            return response.read()
        except (OSError, http.client.HTTPException) as error:
            raise TransportError(f"{self.url}: the answer broke off: {error}") from None

    def _request_target(
        self,
        operation: Operation,
        path: Mapping[str, str] | None,
        query: Mapping[str, Any] | None,
    ) -> str:
        target = operation.path
        for name, value in (path or {}).items():
            target = target.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
        pairs = []
        for name, value in (query or {}).items():
            if name not in operation.query:
                raise InvalidArgument(f"{name}: not a parameter of {operation.path}")
            if value is None:
                continue
            if isinstance(value, bool):
                value = "true" if value else "false"
            pairs.append((name, str(value)))
        if pairs:
            target += "?" + urllib.parse.urlencode(pairs)
        return self._base_path + target

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=self._ssl_context
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _open(
        self,
        operation_id: str,
        *,
        path: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        retry_until: float | None = None,
        retry_unavailable: bool = False,
    ) -> http.client.HTTPResponse:
        """Sends a request and returns the response of a success; raises the error answer as
        an ApiError. Refused or dropped connections and 503 `shutting_down` (any 503 with
        `retry_unavailable`) are tried again until `retry_until` (default: `reconnect_timeout`
        from now)."""
        operation = OPERATIONS[operation_id]
        target = self._request_target(operation, path, query)
        payload = None
        send_headers = {"Accept": _ACCEPT[operation.kind], "User-Agent": _USER_AGENT}
        if body is not None:
            unknown = set(body) - operation.body_properties
            if unknown:
                raise InvalidArgument(f"{sorted(unknown)}: not in the body of {operation.path}")
            payload = json.dumps(body).encode("utf-8")
            send_headers["Content-Type"] = "application/json"
        elif operation.method == "POST":
            payload = b""
        if self._token is not None and operation.authenticated:
            send_headers["Authorization"] = "Bearer " + self._token
        send_headers.update(headers or {})
        if retry_until is None:
            retry_until = time.monotonic() + self.reconnect_timeout
        delay = 0.05
        while True:
            connection = self._connection(self.timeout)
            try:
                connection.request(operation.method, target, body=payload, headers=send_headers)
                response = connection.getresponse()
            except _RETRYABLE as error:
                connection.close()
                failure: Exception = TransportError(f"{self.url}: {error}")
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                raise TransportError(f"{self.url}: {error}") from None
            else:
                if response.status in operation.success:
                    return response
                try:
                    error_answer = _error_from(response, self._read(response))
                finally:
                    response.close()
                    connection.close()
                retryable = isinstance(error_answer, Unavailable) and (
                    retry_unavailable or error_answer.code == "shutting_down"
                )
                if not retryable:
                    raise error_answer
                failure = error_answer
            if time.monotonic() + delay > retry_until:
                raise failure
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _stream(
        self,
        operation_id: str,
        *,
        path: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        deadline: float | None = None,
        gone_id: str | None = None,
    ) -> Generator[tuple[str, Any], None, None]:
        """(event name, decoded event) of a Server-Sent Events operation. When the connection
        ends or breaks it yields ("end", None) and subscribes again (for up to
        `reconnect_timeout`) unless the caller stops there. Reading past `deadline` raises
        _Deadline."""
        schemas = STREAM_EVENTS[operation_id]
        reconnecting_since: float | None = None
        reader: SseReader | None = None
        retry_delay: float | None = None
        while True:
            headers = {}
            if reader is not None and reader.last_event_id is not None:
                headers["Last-Event-ID"] = reader.last_event_id
            retry_until = time.monotonic() + self.reconnect_timeout
            if reconnecting_since is not None:
                retry_until = reconnecting_since + self.reconnect_timeout
                if retry_delay:
                    time.sleep(min(retry_delay, max(0.0, retry_until - time.monotonic())))
            if deadline is not None:
                retry_until = min(retry_until, deadline)
            try:
                response = self._open(
                    operation_id,
                    path=path,
                    query=query,
                    headers=headers,
                    retry_until=retry_until,
                    # A replica coming back may not reach Kubernetes at once.
                    retry_unavailable=reconnecting_since is not None,
                )
            except NoSuchJob as error:
                if reconnecting_since is None or gone_id is None:
                    raise
                # Gone while the stream was down: what the stream would have said.
                yield "gone", GoneEvent(gone_id, error.message)
                return
            except (TransportError, Unavailable):
                if deadline is not None and time.monotonic() >= deadline:
                    raise _Deadline() from None
                raise
            if reconnecting_since is not None:
                with self._lock:
                    self._reconnects += 1
            reconnecting_since = None
            previous_id = None if reader is None else reader.last_event_id
            reader = SseReader(functools.partial(self._readline, response, deadline))
            reader.last_event_id = previous_id
            try:
                for event in reader:
                    schema = schemas.get(event.event)
                    if schema is None:
                        continue
                    yield event.event, decode_as(SCHEMAS[schema], _parse_json(event.data.encode()))
            except _Dropped:
                pass
            finally:
                response.close()
            if reader.retry_ms is not None:
                retry_delay = reader.retry_ms / 1000
            reconnecting_since = time.monotonic()
            yield "end", None

    def _readline(self, response: http.client.HTTPResponse, deadline: float | None) -> bytes:
        wait = self.stream_idle_timeout
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                raise _Deadline()
        sock = getattr(response.fp, "raw", None)
        sock = getattr(sock, "_sock", None)
        if sock is not None:
            sock.settimeout(wait)
        try:
            line = response.readline()
        except TimeoutError:
            if deadline is not None and time.monotonic() >= deadline:
                raise _Deadline() from None
            raise _Dropped() from None
        except (OSError, http.client.HTTPException):
            raise _Dropped() from None
        return line


_ACCEPT = {"json": "application/json", "sse": "text/event-stream", "text": "text/plain"}
_USER_AGENT = "kubeferry-client-python/0.1.0"


def _id_params(job: JobRef) -> dict[str, str]:
    job_id = job if isinstance(job, str) else getattr(job, "id", None)
    if not isinstance(job_id, str):
        raise InvalidArgument(f"job: {job!r} is neither an execution id nor a job's answer")
    parts = job_id.split("/")
    if len(parts) != 4 or not all(parts):
        raise InvalidArgument(
            f"job: {job_id!r} is not an execution id <cluster>/<kind>/<namespace>/<name>"
        )
    return dict(zip(("cluster", "kind", "namespace", "name"), parts, strict=True))


def _parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as error:
        raise ProtocolError(f"the answer is not JSON: {error}: {data[:200]!r}") from None


def _api_error(status: int | None, body: ErrorBody) -> ApiError:
    cls = error_class(status, body.code)
    return cls(
        status,
        body.code,
        _caller_message(body),
        field=body.field,
        line=body.line,
        column=body.column,
        problems=body.problems,
        request_id=body.request_id,
    )


def _caller_message(body: ErrorBody) -> str:
    """The error's message as the caller can follow it: the problems of a spec given as a dict
    point at its fields (`spec.resources.memory: ...`), not at lines and columns of the JSON
    body this client built from it (`body:1:38: ...`). Problems of a spec given as text keep
    their place in that text (`spec:3:10: ...`)."""
    if not body.problems or all(problem.file != "body" for problem in body.problems):
        return body.message
    lines = []
    for problem in body.problems:
        if problem.file == "body":
            lines.append(
                f"{problem.field}: {problem.message}" if problem.field else problem.message
            )
        else:
            place = ":".join(
                str(part) for part in (problem.file, problem.line, problem.column) if part
            )
            field = f"{problem.field}: " if problem.field else ""
            lines.append(f"{place}: {field}{problem.message}")
    return "\n".join(lines)


def _error_from(response: http.client.HTTPResponse, data: bytes) -> ApiError:
    try:
        body = decode_as(ErrorBody, json.loads(data))
    except (ValueError, ProtocolError):
        text = data.decode("utf-8", errors="replace").strip()
        body = ErrorBody(code="http_" + str(response.status), message=text or str(response.reason))
    return _api_error(response.status, body)
