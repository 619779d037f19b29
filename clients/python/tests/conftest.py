"""Fixtures: a simulated Kubernetes cluster (`kubeferry sim serve`) and `kubeferry serve`
replicas on it, all from the built `kubeferry` binary ($KUBEFERRY_BIN, else the cargo target
directory's debug build), on 127.0.0.1 with free ports, stopped at the end."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from kubeferry_client import Client, TransportError

ADMIN_TOKEN = "admin-token-0123456789abcdef"
#: May use the `sweep` namespace only.
TEAM_TOKEN = "team-token-0123456789abcdef"
CLUSTER = "sim"
#: The longest any process start or condition is waited for.
DEADLINE = 30.0

REPO = pathlib.Path(__file__).resolve().parents[3]


def kubeferry_binary() -> pathlib.Path:
    """The `kubeferry` binary the tests run."""
    explicit = os.environ.get("KUBEFERRY_BIN")
    if explicit:
        path = pathlib.Path(explicit)
    else:
        target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
        path = target / "debug" / "kubeferry"
    if not path.is_file():
        pytest.fail(
            f"no kubeferry binary at {path}: build it (cargo build -p kubeferry-cli) "
            "or set KUBEFERRY_BIN"
        )
    return path


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1 (free when asked)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class SimCluster:
    """`kubeferry sim serve`, with its kubeconfig, tokens and templates in `dir`."""

    def __init__(self, binary: pathlib.Path, dir: pathlib.Path) -> None:
        self.binary = binary
        self.dir = dir
        self.kubeconfig = dir / "kubeconfig"
        written = threading.Event()
        self.process = subprocess.Popen(
            [
                str(binary),
                "sim",
                "serve",
                "--kubeconfig",
                str(self.kubeconfig),
                "--kubeconfig-context",
                CLUSTER,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []

        def read_stderr() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                self.stderr.append(line)
                if "kubeconfig written to" in line:
                    written.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        if not written.wait(DEADLINE):
            self.stop()
            pytest.fail("the simulated cluster did not start:\n" + "".join(self.stderr))
        subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "create", "namespace", "sweep"],
            check=True,
            capture_output=True,
        )
        (dir / "tokens.yaml").write_text(
            "tokens:\n"
            f"  - name: admin\n    token: {ADMIN_TOKEN}\n    namespaces: ['*']\n"
            f"  - name: team\n    token: {TEAM_TOKEN}\n    namespaces: [sweep]\n"
        )
        templates = dir / "templates"
        templates.mkdir()
        (templates / "greet.yaml").write_text(
            "name: greet\nimage: busybox:1.36\ncommand: [sh, -c]\nargs: ['echo hello, {{who}}']\n"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Replica:
    """One `kubeferry serve` process on the cluster, on 127.0.0.1:`port`."""

    def __init__(self, sim: SimCluster, name: str, port: int | None = None) -> None:
        self.port = port if port is not None else free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = sim.dir / f"{name}.yaml"
        config.write_text(
            f"""
listen: 127.0.0.1:{self.port}
auth:
  tokensFile: {sim.dir / "tokens.yaml"}
clusters:
  - name: {CLUSTER}
    kubeconfig: {sim.kubeconfig}
    context: {CLUSTER}
namespaces: [default, sweep]
templatesDir: {sim.dir / "templates"}
timeouts:
  sync: 5s
  recheck: 50ms
  retryDeadline: 2s
  unreachableWindow: 1s
  keepAlive: 1s
  followReopen: 50ms
  shutdown: 5s
  stateSample: 200ms
"""
        )
        self.log = sim.dir / f"{name}.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [str(sim.binary), "serve", "--config", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "RUST_LOG": "info"},
            )
        probe = Client(self.url, reconnect_timeout=DEADLINE)
        deadline = time.monotonic() + DEADLINE
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"kubeferry serve exited:\n{self.log.read_text()}")
            try:
                if probe.ready().ready:
                    break
            except TransportError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"kubeferry serve was not ready in time:\n{self.log.read_text()}")
            time.sleep(0.02)

    def client(self, token: str | None = ADMIN_TOKEN, reconnect_timeout: float = 30.0) -> Client:
        return Client(self.url, token, reconnect_timeout=reconnect_timeout)

    def kill(self) -> None:
        """Ends the process with SIGKILL, as a pod dies: connections cut off mid-way."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class Gate:
    """A file whose creation lets the jobs that wait for it go on (the simulated kubelet runs
    their commands on this machine)."""

    def __init__(self, dir: pathlib.Path, name: str) -> None:
        self.path = dir / f"gate-{name}"

    def wait(self) -> str:
        return f"while [ ! -e '{self.path}' ]; do sleep 0.02; done"

    def open(self) -> None:
        self.path.write_text("")


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    cluster = SimCluster(kubeferry_binary(), tmp_path_factory.mktemp("sim"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def replica(sim: SimCluster) -> Iterator[Replica]:
    service = Replica(sim, "replica")
    yield service
    service.stop()


@pytest.fixture
def client(replica: Replica) -> Client:
    return replica.client()


@pytest.fixture
def gate(sim: SimCluster, request: pytest.FixtureRequest) -> Gate:
    return Gate(sim.dir, request.node.name)


@pytest.fixture
def job_id(request: pytest.FixtureRequest) -> str:
    """A job id no other test uses (job ids are kept for the session's cluster)."""
    name = request.node.name.removeprefix("test_").replace("_", "-")
    return f"{name[:40].strip('-')}-{time.monotonic_ns() % 1_000_000}"
