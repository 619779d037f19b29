"""The guide's Python examples run as written against the test service: the Metaflow-style step
runner and the Airflow-style operator (with stand-ins for Airflow's own classes), wherever
README.md or docs/ shows them, and the quick example of clients/python/README.md."""

from __future__ import annotations

import re
import threading
import types
from typing import Any

import pytest
from conftest import ADMIN_TOKEN, REPO, Gate, Replica

from kubeferry_client import JobState


def python_blocks(path: str, after: str) -> list[str]:
    text = (REPO / path).read_text()
    section = text[text.index(after) :]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def example_defining(name: str) -> str:
    """The Python block of README.md or a page under docs/ that defines `name`."""
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        blocks: list[str] = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
        for block in blocks:
            if re.search(rf"^(def|class) {name}\b", block, flags=re.M):
                return block
    raise AssertionError(f"no page of README.md or docs/ shows the example that defines {name}")


def run(code: str, replica: Replica, **names: Any) -> dict[str, Any]:
    """Runs an example with the service's URL and token put in for the example's."""
    code = code.replace("http://kubeferry:8080", replica.url)
    code = code.replace("http://127.0.0.1:8080", replica.url)
    code = code.replace('"my-token-0123456789abcdef"', "token")
    scope: dict[str, Any] = {"token": ADMIN_TOKEN, **names}
    exec(compile(code, "README example", "exec"), scope)
    return scope


class StepFailed(Exception):
    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def test_the_metaflow_style_example(replica: Replica, job_id: str) -> None:
    metaflow = example_defining("run_step")
    scope = run(metaflow, replica, StepFailed=StepFailed)
    run_step = scope["run_step"]
    run_step("flow", job_id, "start", "1", 0, "busybox", ["sh", "-c", "echo step ran"])
    with pytest.raises(StepFailed) as failed:
        run_step("flow", job_id, "end", "2", 0, "busybox", ["sh", "-c", "exit 3"])
    assert "FAILED (Error)" in str(failed.value)
    assert failed.value.retryable is False


class BaseOperator:
    """What the example uses of Airflow's BaseOperator."""

    def __init__(self, **kwargs: Any) -> None:
        self.lines: list[str] = []
        self.log = types.SimpleNamespace(info=lambda fmt, line: self.lines.append(fmt % line))


class AirflowException(Exception):
    pass


def test_the_airflow_style_example(replica: Replica, job_id: str, gate: Gate) -> None:
    airflow = example_defining("KubeferryOperator")
    scope = run(
        airflow,
        replica,
        BaseOperator=BaseOperator,
        AirflowException=AirflowException,
        JobState=JobState,
        Client=__import__("kubeferry_client").Client,
    )
    operator_class = scope["KubeferryOperator"]
    ti = types.SimpleNamespace(dag_id="dag", task_id="task", run_id=job_id, try_number=1)

    spec = {"name": "task", "image": "busybox", "command": ["sh", "-c", "echo one; echo two"]}
    operator = operator_class(spec)
    result = operator.execute({"ti": ti})
    assert result is None
    assert operator.lines == ["one", "two"]

    # on_kill, from another thread while execute waits, cancels the job: the task fails.
    ti.try_number = 2
    spec = {
        "name": "task",
        "image": "busybox",
        "command": ["sh", "-c", f"echo started; {gate.wait()}"],
    }
    killed = operator_class(spec)
    outcome: list[BaseException] = []

    def execute() -> None:
        try:
            killed.execute({"ti": ti})
        except BaseException as error:  # the thread reports what it raised
            outcome.append(error)

    thread = threading.Thread(target=execute)
    thread.start()
    client = replica.client()
    while killed.job is None and thread.is_alive():
        thread.join(0.01)
    for info in client.events(killed.job, timeout=30):
        if info.state is JobState.STARTED:
            break
    killed.on_kill()
    thread.join(30)
    gate.open()
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], AirflowException), outcome
    assert "CANCELLED" in str(outcome[0])


def test_the_client_readme_example(replica: Replica, capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = python_blocks("clients/python/README.md", "pip install")
    run(example.replace('"nightly-42"', '"readme-nightly-42"'), replica)
    assert capsys.readouterr().out == "SUCCEEDED Completed 0 hi from python\n\n"
