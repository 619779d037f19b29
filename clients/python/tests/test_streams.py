"""Event streams that outlive their replica: `kubeferry serve` is killed (SIGKILL, as a pod
dies) in the middle of a `wait` and a `watch`, and another starts on the same port; the
client reconnects, re-subscribes and reads the job's end from the new replica, and a job
deleted while no replica ran comes as gone."""

from __future__ import annotations

import dataclasses
import itertools
import queue
import subprocess
import threading
import time

import pytest
from conftest import DEADLINE, Gate, Replica, SimCluster

from kubeferry_client import (
    GoneEvent,
    JobInfo,
    JobState,
    KubeferryError,
    ListedEvent,
    TransportError,
)

TIMEOUT = 30.0


def gated(name: str, gate: Gate, labels: dict[str, str]) -> dict[str, object]:
    script = f"{gate.wait()}; echo after the restart"
    return {
        "name": name,
        "image": "busybox:1.36",
        "command": ["sh", "-c", script],
        "labels": labels,
    }


def test_wait_and_watch_survive_a_replica_restart(sim: SimCluster, gate: Gate, job_id: str) -> None:
    first = Replica(sim, "restart-first")
    second: Replica | None = None
    try:
        client = first.client(reconnect_timeout=DEADLINE)
        labels = {"suite": job_id}
        submitted = client.submit(job_id, gated("restarted", gate, labels))
        deleted = client.submit(job_id + "-deleted", gated("deleted", gate, labels))

        # A wait in one thread and a watch of the jobs' selector in another, both mid-stream
        # once the jobs have started.
        seen: list[JobInfo] = []
        started = threading.Event()
        outcome: list[JobInfo | KubeferryError] = []

        def wait() -> None:
            try:
                for info in client.events(submitted, timeout=TIMEOUT):
                    seen.append(info)
                    if info.state is JobState.STARTED:
                        started.set()
                outcome.append(seen[-1])
            except KubeferryError as error:
                outcome.append(error)
                started.set()

        watched: queue.Queue[object] = queue.Queue()

        def watch() -> None:
            try:
                for event in client.watch(f"suite={job_id}", namespace="default"):
                    watched.put(event)
            except KubeferryError as error:
                watched.put(error)

        waiter = threading.Thread(target=wait)
        waiter.start()
        threading.Thread(target=watch, daemon=True).start()
        running: dict[str, JobInfo] = {}
        listed = False
        while len(running) < 2 or not listed:
            event = watched.get(timeout=TIMEOUT)
            assert isinstance(event, (JobInfo, ListedEvent)), event
            listed = listed or isinstance(event, ListedEvent)
            if isinstance(event, JobInfo) and event.state is JobState.STARTED:
                running[event.id] = event
        assert started.wait(TIMEOUT), outcome

        first.kill()
        # While no replica runs, someone deletes one of the jobs. kubeferry's finalizer holds
        # it until a replica records it: `kubectl delete` would wait for that, so it does not.
        name = deleted.id.rsplit("/", 1)[1]
        subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(sim.kubeconfig),
                "delete",
                "job",
                name,
                "-n",
                "default",
                "--wait=false",
            ],
            check=True,
            capture_output=True,
        )
        second = Replica(sim, "restart-second", port=first.port)
        # Once both streams are subscribed again (and have been sent the current, unchanged
        # status first), the job may end: its end comes through the new replica.
        deadline = time.monotonic() + TIMEOUT
        while client.reconnects < 2:
            assert time.monotonic() < deadline, "the streams did not reconnect"
            time.sleep(0.01)
        gate.open()

        waiter.join(TIMEOUT)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], JobInfo), outcome
        final = outcome[0]
        assert final.state is JobState.SUCCEEDED, seen
        assert final.exit_code == 0
        # The status the new replica sent first was not repeated when unchanged.
        assert all(a != b for a, b in itertools.pairwise(seen)), seen

        # The watch goes on: the job's end, and the deleted job as gone; the statuses it had
        # already sent are not sent again.
        # The watch's statuses say the job id, which a wait's answer does not.
        after: list[object] = []
        ended: list[JobInfo] = []
        while not (final in ended and any(isinstance(e, GoneEvent) for e in after)):
            event = watched.get(timeout=TIMEOUT)
            assert not isinstance(event, Exception), (event, after)
            after.append(event)
            if isinstance(event, JobInfo):
                assert event.job_id is not None, event
                ended.append(dataclasses.replace(event, job_id=None))
        assert GoneEvent(deleted.id, "no such job after the event stream reconnected") in after
        assert not set(running.values()) & {e for e in after if isinstance(e, JobInfo)}, after
        # The namespace was listed once; listing it again after the reconnect says nothing new.
        assert not any(isinstance(e, ListedEvent) for e in after), after
        assert client.reconnects >= 2
        assert client.logs(submitted).log == "after the restart\n"
    finally:
        gate.open()
        first.kill()
        if second is not None:
            second.stop()


def test_a_stream_whose_replica_stays_down_fails_after_the_reconnect_time(
    sim: SimCluster, gate: Gate, job_id: str
) -> None:
    replica = Replica(sim, "stays-down")
    try:
        client = replica.client(reconnect_timeout=0.5)
        submitted = client.submit(job_id, gated("abandoned", gate, {"suite": job_id}))
        events = client.events(submitted, timeout=TIMEOUT)
        first = next(events)
        assert not first.is_final
        replica.kill()
        with pytest.raises(TransportError):
            for _ in events:
                pass
    finally:
        gate.open()
        replica.kill()


def test_a_wait_outlives_a_replica_that_shuts_down_gracefully(
    sim: SimCluster, gate: Gate, job_id: str
) -> None:
    """A replica stopped with SIGTERM ends its event streams cleanly, before the job's end:
    the client takes that for a drop, not for the end of the job."""
    first = Replica(sim, "graceful-first")
    second: Replica | None = None
    try:
        client = first.client()
        submitted = client.submit(job_id, gated("graceful", gate, {"suite": job_id}))
        events = client.events(submitted, timeout=TIMEOUT)
        for info in events:
            if info.state is JobState.STARTED:
                break
        first.stop()
        assert first.process.returncode == 0
        second = Replica(sim, "graceful-second", port=first.port)
        gate.open()
        rest = list(events)
        assert rest[-1].state is JobState.SUCCEEDED, rest
        assert info not in rest, (info, rest)
        assert client.reconnects == 1
    finally:
        gate.open()
        first.kill()
        if second is not None:
            second.stop()
