"""The client against a real `kubeferry serve` on the simulated cluster: submit, wait, logs,
follow, cancel, list, watch, sweep, templates, and the errors of each kind."""

from __future__ import annotations

import dataclasses
import itertools
import threading

import pytest
from conftest import TEAM_TOKEN, Gate, Replica, free_port

from kubeferry_client import (
    BadRequest,
    Client,
    Conflict,
    DryRunMode,
    FailureClass,
    Forbidden,
    InvalidArgument,
    InvalidSpec,
    JobInfo,
    JobState,
    KubeferryError,
    ListedEvent,
    NoSuchJob,
    NotFound,
    Reason,
    TransportError,
    Unauthorized,
    WaitTimeout,
    WrongCluster,
)

TIMEOUT = 30.0


def shell(name: str, script: str, **more: object) -> dict[str, object]:
    """A job spec running `script` in busybox's shell."""
    return {"name": name, "image": "busybox:1.36", "command": ["sh", "-c", script], **more}


def test_indexed_job_summary_and_logs_by_index(client: Client, job_id: str) -> None:
    submitted = client.submit(
        job_id,
        shell(
            "shards",
            "echo shard $JOB_COMPLETION_INDEX",
            indexed=True,
            completions=3,
            parallelism=3,
        ),
    )
    info = client.wait(submitted, timeout=TIMEOUT)
    assert info.state is JobState.SUCCEEDED, info
    assert info.message == "3 of 3 indexes succeeded"
    assert info.indexes is not None
    assert (info.indexes.completions, info.indexes.succeeded) == (3, 3)
    assert info.indexes.completed_indexes == "0-2"
    assert client.logs(submitted, index=1).log == "shard 1\n"
    assert list(client.follow(submitted, index=2)) == ["shard 2"]
    with pytest.raises(BadRequest):
        client.logs(submitted, index=-1)
    with pytest.raises(BadRequest) as raised:
        client.logs(submitted, index=9)
    assert raised.value.field == "index"
    assert "has no index 9: its indexes are 0 to 2" in str(raised.value)


def test_submit_wait_and_logs(client: Client, job_id: str) -> None:
    submitted = client.submit(
        job_id,
        shell("greeting", "echo hello from {{who}}; echo second; echo bye"),
        params={"who": "python", "unused": 1},
    )
    assert submitted.id.startswith(f"sim/job/default/{job_id}-")
    assert (submitted.job_id, submitted.cluster, submitted.namespace) == (job_id, "sim", "default")
    assert any("unused" in warning for warning in submitted.warnings), submitted.warnings

    info = client.wait(submitted, timeout=TIMEOUT)
    assert info.state is JobState.SUCCEEDED, info
    assert info.reason is Reason.COMPLETED
    assert info.exit_code == 0
    assert info.is_final
    assert info.started_at is not None and info.finished_at is not None
    assert info.started_at <= info.finished_at
    assert client.status(submitted.id) == info

    assert client.logs(submitted).log == "hello from python\nsecond\nbye\n"
    assert client.logs(submitted, lines=1).log == "bye\n"
    assert client.logs(submitted, bytes=7).log == "nd\nbye\n"
    # The same job id again is the same job: nothing new runs.
    again = client.submit(
        job_id,
        shell("greeting", "echo hello from {{who}}; echo second; echo bye"),
        params={"who": "python", "unused": 1},
    )
    assert again.id == submitted.id


def test_a_failure_maps_to_failed_with_its_exit_code_and_class(client: Client, job_id: str) -> None:
    submitted = client.submit(job_id, shell("failing", "echo oops >&2; exit 3"))
    info = client.wait(submitted.id, timeout=TIMEOUT)
    assert info.state is JobState.FAILED
    assert info.reason is Reason.ERROR
    assert info.exit_code == 3
    assert info.failure_class is FailureClass.USER
    assert info.last_words == "oops\n"
    assert "oops" in client.logs(submitted).log
    assert client.logs(submitted).warning is None


def test_a_bare_pod_runs_once_and_is_cancelled_like_any_job(client: Client, job_id: str) -> None:
    done = client.submit(job_id, shell("pod", "echo from a pod; exit 4", kind="Pod"))
    assert done.id.startswith(f"sim/pod/default/{job_id}-"), done.id
    info = client.wait(done, timeout=TIMEOUT)
    assert (info.state, info.reason, info.exit_code) == (JobState.FAILED, Reason.ERROR, 4), info
    assert client.logs(done).log == "from a pod\n"
    assert client.status(done.id) == info

    running = client.submit(job_id + "-long", shell("pod", "sleep 120", kind="Pod"))
    for event in client.events(running, timeout=TIMEOUT):
        if event.state is JobState.STARTED:
            break
    assert client.cancel(running).job.state in (JobState.CANCELLING, JobState.CANCELLED)
    assert client.wait(running, timeout=TIMEOUT).state is JobState.CANCELLED

    with pytest.raises(InvalidSpec) as raised:
        client.submit(job_id + "-retried", shell("pod", "true", kind="Pod", retries=2))
    assert "retries: is not for kind: Pod" in str(raised.value)


def test_a_template_with_params_as_text_spec(client: Client, job_id: str) -> None:
    assert "greet" in client.templates()
    submitted = client.submit(job_id, template="greet", params={"who": "template"})
    assert client.wait(submitted, timeout=TIMEOUT).state is JobState.SUCCEEDED
    assert client.logs(submitted).log == "hello, template\n"

    text = "name: from-text\nimage: busybox:1.36\ncommand: [sh, -c, 'echo {{n}}']\n"
    from_text = client.submit(job_id + "-text", text, params={"n": 7})
    assert client.wait(from_text, timeout=TIMEOUT).state is JobState.SUCCEEDED
    assert client.logs(from_text).log == "7\n"


def test_follow_streams_lines_as_they_are_written(client: Client, job_id: str, gate: Gate) -> None:
    submitted = client.submit(
        job_id, shell("follow", f"echo first; {gate.wait()}; echo second; echo third")
    )
    lines = client.follow(submitted)
    # The first line arrives while the job still waits at the gate: it is streamed.
    assert next(lines) == "first"
    gate.open()
    assert list(lines) == ["second", "third"]
    assert client.wait(submitted, timeout=TIMEOUT).state is JobState.SUCCEEDED
    assert list(client.follow(submitted, lines=1)) == ["third"]


def test_cancel_a_running_job(client: Client, job_id: str) -> None:
    submitted = client.submit(job_id, shell("sleeper", "sleep 120"))
    states = []
    for info in client.events(submitted, timeout=TIMEOUT):
        states.append(info.state)
        if info.state is JobState.STARTED:
            break
    assert states[-1] is JobState.STARTED, states

    result = client.cancel(submitted)
    assert not result.already_ended
    assert result.job.state in (JobState.CANCELLING, JobState.CANCELLED), result
    final = client.wait(submitted, timeout=TIMEOUT)
    assert final.state is JobState.CANCELLED, final
    # A list by state shows it, its object deleted or not (once gone, from its outcome record).
    cancelled = client.list(status=[JobState.CANCELLED])
    assert [item.job.id for item in cancelled.items if item.job_id == job_id] == [submitted.id]
    # Cancelling again is harmless: the outcome stands (or the deleted job is gone).
    try:
        again = client.cancel(submitted)
    except NoSuchJob:
        pass
    else:
        assert again.job.state is JobState.CANCELLED, again


def test_cancel_from_another_thread_ends_a_wait(client: Client, job_id: str) -> None:
    """What an Airflow operator's on_kill does while execute waits."""
    submitted = client.submit(job_id, shell("sleeper", "sleep 120"))
    outcome: list[JobInfo | Exception] = []

    def execute() -> None:
        try:
            outcome.append(client.wait(submitted, timeout=TIMEOUT))
        except KubeferryError as error:
            outcome.append(error)

    waiter = threading.Thread(target=execute)
    waiter.start()
    for info in client.events(submitted, timeout=TIMEOUT):
        if info.state is JobState.STARTED:
            break
    client.cancel(submitted)
    waiter.join(TIMEOUT)
    assert not waiter.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], JobInfo), outcome
    assert outcome[0].state is JobState.CANCELLED


def test_an_invalid_spec_is_a_422_naming_the_field(client: Client, job_id: str) -> None:
    spec = shell("bad", "true", resources={"memory": "64m"})
    with pytest.raises(InvalidSpec) as raised:
        client.submit(job_id, spec)
    error = raised.value
    assert error.status == 422
    assert error.code == "invalid_spec"
    fields = {problem.field for problem in error.problems}
    assert fields == {"spec.resources.memory"}, error.problems
    assert "spec.resources.memory" in error.message
    memory = next(p for p in error.problems if p.field == "spec.resources.memory")
    assert memory.file == "body" and memory.line is not None and memory.column is not None
    assert error.request_id
    # Nothing was created.
    with pytest.raises(NoSuchJob):
        client.wait(f"sim/job/default/{job_id}-00000000", timeout=TIMEOUT)
    assert all(item.job_id != job_id for item in client.iter_jobs())

    with pytest.raises(InvalidSpec) as misspelt:
        client.submit(job_id, shell("bad", "true", imge="busybox"))
    assert "did you mean `image`" in misspelt.value.message


def test_errors_carry_the_service_code_and_field(
    client: Client, replica: Replica, job_id: str
) -> None:
    unknown = "sim/job/default/no-such-job-12345678"
    for call in (client.status, client.cancel, client.logs, client.wait, client.follow):
        with pytest.raises(NoSuchJob) as raised:
            result = call(unknown)
            if call is client.follow:
                next(iter(result))  # type: ignore[arg-type]
        assert (raised.value.status, raised.value.code) == (404, "no_such_job")
        assert isinstance(raised.value, NotFound)

    with pytest.raises(WrongCluster) as wrong:
        client.status("elsewhere/job/default/x")
    assert (wrong.value.status, wrong.value.code) == (421, "wrong_cluster")

    with pytest.raises(NotFound) as no_template:
        client.submit(job_id, template="nonexistent")
    assert no_template.value.code == "no_such_template"

    with pytest.raises(BadRequest) as both:
        client.submit(job_id, shell("x", "true"), template="greet")
    assert both.value.code == "bad_request"

    with pytest.raises(BadRequest) as selector:
        client.list(selector="a in (")
    assert (selector.value.code, selector.value.field) == ("bad_parameter", "selector")

    with pytest.raises(BadRequest) as states:
        client.list(status=["RUNNING"])
    assert (states.value.code, states.value.field) == ("bad_parameter", "status")

    submitted = client.submit(job_id, shell("one", "true"))
    with pytest.raises(Conflict) as taken:
        client.submit(job_id, shell("another", "true"))
    assert taken.value.code == "name_taken"
    client.wait(submitted, timeout=TIMEOUT)

    with pytest.raises(Unauthorized) as unauthorized:
        replica.client("not-a-token").status(submitted)
    assert (unauthorized.value.status, unauthorized.value.code) == (401, "unauthorized")
    assert unauthorized.value.field == "Authorization"

    with pytest.raises(Forbidden) as forbidden:
        replica.client(TEAM_TOKEN).status(submitted)
    assert forbidden.value.code == "forbidden"

    with pytest.raises(InvalidArgument):
        client.status("not/an-id")

    nobody = Client(f"http://127.0.0.1:{free_port()}", "t", reconnect_timeout=0.2)
    with pytest.raises(TransportError):
        nobody.status(submitted)


def test_wait_times_out_with_the_last_status(client: Client, job_id: str, gate: Gate) -> None:
    submitted = client.submit(job_id, shell("gated", gate.wait()))
    with pytest.raises(WaitTimeout) as raised:
        client.wait(submitted, timeout=0.5)
    assert isinstance(raised.value, TimeoutError)
    assert raised.value.last is None or not raised.value.last.is_final
    gate.open()
    assert client.wait(submitted, timeout=TIMEOUT).state is JobState.SUCCEEDED


def test_list_pages_and_filters(client: Client, job_id: str) -> None:
    labels = {"suite": job_id}
    ids = []
    for i in range(3):
        script = "true" if i < 2 else "exit 1"
        ids.append(client.submit(f"{job_id}-{i}", shell(f"listed-{i}", script, labels=labels)).id)
    for id in ids:
        client.wait(id, timeout=TIMEOUT)
    page = client.list(selector=f"suite={job_id}", limit=2)
    assert [item.job.id for item in page.items] == ids[:2]
    assert page.continue_
    rest = client.list(selector=f"suite={job_id}", limit=2, continue_=page.continue_)
    assert [item.job.id for item in rest.items] == ids[2:]
    assert rest.continue_ is None
    every = list(client.iter_jobs(selector=f"suite={job_id}", page_size=1))
    assert [item.job.id for item in every] == ids
    assert [item.job_id for item in every] == [f"{job_id}-{i}" for i in range(3)]
    assert all(item.created_at is not None for item in every)
    failed = client.list(selector=f"suite={job_id}", status=[JobState.FAILED, "CANCELLED"])
    assert [item.job.id for item in failed.items] == ids[2:]


def test_watch_yields_status_events_for_a_selector(client: Client, job_id: str, gate: Gate) -> None:
    labels = {"suite": job_id}
    first = client.submit(f"{job_id}-a", shell("watched", "true", labels=labels))
    client.wait(first, timeout=TIMEOUT)
    events = client.watch(f"suite={job_id}", namespace="default")
    # The current status of every matching job first, with its job id, then the namespace is
    # listed.
    current = next(events)
    assert isinstance(current, JobInfo) and current.job_id == f"{job_id}-a", current
    assert dataclasses.replace(current, job_id=None) == client.status(first)
    assert next(events) == ListedEvent("sim", "default")
    second = client.submit(f"{job_id}-b", shell("watched", gate.wait(), labels=labels))
    infos: list[JobInfo] = []
    for event in events:
        assert isinstance(event, JobInfo) and event.id == second.id, event
        infos.append(event)
        if event.state is JobState.STARTED:
            gate.open()
        if event.is_final:
            break
    events.close()
    seen = [info.state for info in infos]
    assert seen[-1] is JobState.SUCCEEDED, seen
    assert JobState.STARTED in seen
    # Each event is a change: the same status never comes twice in a row.
    assert all(a != b for a, b in itertools.pairwise(infos)), infos


def test_sweep_reports_and_deletes_orphans(client: Client, job_id: str) -> None:
    kept = client.submit(f"{job_id}-kept", shell("kept", "true"), namespace="sweep")
    orphan = client.submit(f"{job_id}-orphan", shell("orphan", "true"), namespace="sweep")
    for submitted in (kept, orphan):
        client.wait(submitted, timeout=TIMEOUT)
    known = [kept.job_id]
    report = client.sweep(known, namespace="sweep")
    assert [(o.id, o.job_id, o.deleted) for o in report.orphans] == [
        (orphan.id, orphan.job_id, False)
    ]
    assert client.status(orphan).state is JobState.SUCCEEDED
    deleted = client.sweep(known, namespace="sweep", delete=True)
    assert [(o.id, o.deleted) for o in deleted.orphans] == [(orphan.id, True)]
    assert client.sweep(known, namespace="sweep").orphans == []
    assert client.status(kept).state is JobState.SUCCEEDED


def test_operations_endpoints(client: Client) -> None:
    assert client.health().status == "ok"
    readiness = client.ready()
    assert readiness.ready and readiness.reason is None
    assert [c.name for c in readiness.clusters] == ["sim"]
    assert {n.name for n in readiness.clusters[0].namespaces} == {"default", "sweep"}
    assert "kubeferry" in client.metrics()


def test_a_job_id_submitted_again_creates_nothing_and_says_so(client: Client, job_id: str) -> None:
    first = client.submit(job_id, shell("again", "echo once"))
    assert first.existing is False
    client.wait(first, timeout=TIMEOUT)
    again = client.submit(job_id, shell("again", "echo once"))
    assert again.existing is True
    assert again.id == first.id


def test_a_job_is_found_by_its_job_id(client: Client, job_id: str) -> None:
    submitted = client.submit(job_id, shell("found", "echo here"))
    client.wait(submitted, timeout=TIMEOUT)
    found = client.list(job_id=job_id, namespace="default").items
    assert [item.job.id for item in found] == [submitted.id]
    assert found[0].job_id == job_id and found[0].job.job_id == job_id
    assert found[0].job.state is JobState.SUCCEEDED
    assert list(client.iter_jobs(job_id=job_id)) == found
    assert client.list(job_id=f"{job_id}-never-submitted").items == []


def test_an_invalid_spec_dict_is_reported_at_its_fields(client: Client, job_id: str) -> None:
    spec = shell("bad", "true", resources={"memory": "64m"}, workingDir="relative")
    with pytest.raises(InvalidSpec) as raised:
        client.submit(job_id, spec)
    error = raised.value
    lines = error.message.splitlines()
    assert [line.split(":")[0] for line in lines] == ["spec.resources.memory", "spec.workingDir"]
    assert "body:" not in str(error), str(error)
    # A spec given as text keeps its place in that text.
    with pytest.raises(InvalidSpec) as text:
        client.submit(job_id, "name: x\nimage: busybox\ntimeout: soon\n")
    assert text.value.message.startswith("spec:3:10: timeout: "), text.value.message


def test_a_scoped_token_submits_into_its_namespace(replica: Replica, job_id: str) -> None:
    team = replica.client(TEAM_TOKEN)
    submitted = team.submit(job_id, shell("scoped", "echo mine"))
    assert submitted.namespace == "sweep", submitted
    assert submitted.id.split("/")[2] == "sweep"
    assert [item.job.id for item in team.list(job_id=job_id).items] == [submitted.id]


def test_a_dry_run_creates_nothing(client: Client, job_id: str) -> None:
    for mode in (DryRunMode.CLIENT, "server"):
        answer = client.submit(job_id, shell("dry", "echo never"), dry_run=mode)
        assert answer.dry_run is DryRunMode(mode), answer
        assert answer.objects is not None and [o["kind"] for o in answer.objects] == ["Job"]
        assert answer.objects[0]["metadata"]["labels"]["kubeferry.dev/job-id"] == job_id
    assert client.list(job_id=job_id).items == []


def test_describe_tells_a_failed_jobs_story(client: Client, job_id: str) -> None:
    submitted = client.submit(job_id, shell("told", "echo bye; exit 3"))
    assert client.wait(submitted, timeout=TIMEOUT).state is JobState.FAILED
    story = client.describe(submitted)
    assert story.job.exit_code == 3
    whats = [step.what for step in story.steps]
    assert whats[0] == "Submitted" and whats[-1] == "FAILED", whats
    ended = next(step for step in story.steps if step.what == "Ended")
    assert (ended.detail, ended.warning) == ("exit code 3 (Error)", True)
    assert ended.at is not None and ended.object is not None
    assert story.spent.running is not None
    assert story.what_to_do is not None and story.what_to_do.startswith("read its log")


def test_whoami_and_stats_name_the_tokens_namespaces_only(replica: Replica) -> None:
    admin = replica.client()
    assert admin.whoami().namespaces == ["default", "sweep"]
    team = replica.client(TEAM_TOKEN)
    assert team.whoami().name == "team"
    assert team.whoami().namespaces == ["sweep"]
    stats = team.stats()
    assert stats.minutes, "the replica samples at its start"
    assert all(set(m.counts) <= set(JobState) for m in stats.minutes)
    with pytest.raises(Forbidden):
        team.stats(namespace="default")
