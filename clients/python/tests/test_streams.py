"""Event streams that outlive their replica: `kubeferry serve` is killed (SIGKILL, as a pod
dies) in the middle of a `wait` and a `watch`, and another starts on the same port; the
client reconnects, re-subscribes and reads the job's end from the new replica."""

from __future__ import annotations

import threading

import pytest
from conftest import DEADLINE, Gate, Replica, SimCluster

from kubeferry_client import JobInfo, JobState, KubeferryError, TransportError

TIMEOUT = 30.0


def gated(name: str, gate: Gate, labels: dict[str, str]) -> dict[str, object]:
    script = f"{gate.wait()}; echo after the restart"
    return {"name": name, "image": "busybox:1.36", "command": ["sh", "-c", script], "labels": labels}


def test_wait_and_watch_survive_a_replica_restart(
    sim: SimCluster, gate: Gate, job_id: str
) -> None:
    first = Replica(sim, "restart-first")
    second: Replica | None = None
    try:
        client = first.client(reconnect_timeout=DEADLINE)
        submitted = client.submit(job_id, gated("restarted", gate, {"suite": job_id}))

        # A wait in another thread, blocked mid-stream on a started job.
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

        waiter = threading.Thread(target=wait)
        waiter.start()
        # A watch of the job's selector, read up to the job's start.
        watch = client.watch(f"suite={job_id}", namespace="default")
        watched: list[object] = []
        for event in watch:
            watched.append(event)
            if isinstance(event, JobInfo) and event.state is JobState.STARTED:
                break
        assert started.wait(TIMEOUT), outcome

        first.kill()
        second = Replica(sim, "restart-second", port=first.port)
        # Only now can the job end: its end comes through the new replica.
        gate.open()

        waiter.join(TIMEOUT)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], JobInfo), outcome
        final = outcome[0]
        assert final.state is JobState.SUCCEEDED, seen
        assert final.exit_code == 0
        # The status the new replica sent first was not repeated when unchanged.
        assert all(a != b for a, b in zip(seen, seen[1:])), seen

        after: list[object] = []
        for event in watch:
            after.append(event)
            if isinstance(event, JobInfo) and event.is_final:
                break
        watch.close()
        assert after[-1] == final, after
        assert watched[-1] not in after, (watched, after)
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
