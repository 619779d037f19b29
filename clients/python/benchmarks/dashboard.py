"""The dashboard's figures, printed side by side: the page's own weight, the time to its first
rows with N jobs in the namespace (headless Chromium), and how long a job's state change takes
to show in the open table, from the moment its container may end.

Usage, with the release binary, selenium and Debian's chromium and chromium-driver (which
.ci/run installs):

    cargo build --release -p kubeferry-cli
    export KUBEFERRY_BIN=target/release/kubeferry
    python clients/python/benchmarks/dashboard.py --jobs 10000
"""

from __future__ import annotations

import argparse
import concurrent.futures
import pathlib
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

from conftest import ADMIN_TOKEN, Gate, Replica, SimCluster, kubeferry_binary
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--pause", type=float, default=5.0, help="seconds before each load")
    args = parser.parse_args()

    directory = pathlib.Path(tempfile.mkdtemp(prefix="kubeferry-dashboard-bench-"))
    sim = SimCluster(kubeferry_binary(), directory)
    replica = Replica(sim, "replica")
    client = replica.client()
    weight = 0
    for path in ("/ui", "/ui/app.js", "/ui/app.css"):
        with urllib.request.urlopen(f"{replica.url}{path}") as answer:
            weight += len(answer.read())

    # Jobs that end at once: an image without an entrypoint and no command runs nothing.
    spec = {"name": "bench", "image": "registry.example/noop:1"}
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda n: client.submit(f"bench-{n}", spec), range(args.jobs)))
    submitted = time.monotonic() - started

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.get(f"{replica.url}/healthz")
    driver.execute_script(f"sessionStorage.setItem('kubeferry.token', '{ADMIN_TOKEN}')")
    first_rows: list[float] = []
    for _ in range(args.loads):
        # Each load on an idle service: a page left behind still costs it the list it asked for.
        time.sleep(args.pause)
        driver.get(f"{replica.url}/ui")
        deadline = time.monotonic() + 60
        while not driver.execute_script("return document.body.dataset.firstRows"):
            if time.monotonic() > deadline:
                raise SystemExit("no rows within 60 s")
            time.sleep(0.01)
        first_rows.append(float(driver.execute_script("return document.body.dataset.firstRows")))
    shown = driver.execute_script("return document.querySelectorAll('#jobs tbody tr').length")
    # The changes are timed on a page that has listed every job (its list, ten pages of a list
    # of every job for the service, comes after the first rows).
    deadline = time.monotonic() + 120
    while not driver.execute_script("return document.body.dataset.listed"):
        if time.monotonic() > deadline:
            raise SystemExit("the list did not end within 120 s")
        time.sleep(0.05)
    listed = float(driver.execute_script("return document.body.dataset.listed"))

    # Each change: a job waits for its gate; once it runs, the gate opens and the time until its
    # row says SUCCEEDED is counted (the container's end, the Job controller, the watch, the
    # event stream and the page).
    latencies: list[float] = []
    row_state = "return document.querySelector('#jobs tr[data-id=\"%s\"]')?.dataset.state"
    for n in range(args.changes):
        gate = Gate(directory, f"change-{n}")
        job = client.submit(
            f"change-{n}", {**spec, "image": "busybox:1.36", "command": ["sh", "-c", gate.wait()]}
        ).id
        deadline = time.monotonic() + 60
        while driver.execute_script(row_state % job) != "STARTED":
            if time.monotonic() > deadline:
                raise SystemExit(f"{job} never showed STARTED")
            time.sleep(0.005)
        gate.open()
        opened = time.monotonic()
        while driver.execute_script(row_state % job) != "SUCCEEDED":
            if time.monotonic() > opened + 60:
                raise SystemExit(f"{job} never showed SUCCEEDED")
            time.sleep(0.005)
        latencies.append((time.monotonic() - opened) * 1000)
    driver.quit()
    replica.stop()
    sim.stop()

    rows = [
        ("page weight (HTML + JS + CSS, uncompressed)", f"{weight / 1024:.1f} KiB", "< 300 KiB"),
        (
            f"time to the first rows, {args.jobs:,} jobs in the namespace ({args.loads} loads)",
            f"median {statistics.median(first_rows):.0f} ms, max {max(first_rows):.0f} ms"
            f" ({shown} rows shown; each load: {', '.join(f'{t:.0f}' for t in first_rows)} ms)",
            "< 1 s",
        ),
        (
            "every job listed (the last load)",
            f"{listed:.0f} ms",
            "",
        ),
        (
            f"a state change until it shows ({args.changes} changes)",
            f"p50 {percentile(latencies, 50):.0f} ms, p99 {percentile(latencies, 99):.0f} ms,"
            f" max {max(latencies):.0f} ms",
            "p99 < 500 ms",
        ),
        (f"submitting the {args.jobs:,} jobs (32 threads)", f"{submitted:.1f} s", ""),
    ]
    print(f"\nDashboard, {args.jobs:,} jobs on the simulated cluster, headless Chromium")
    for what, figure, goal in rows:
        print(f"  {what:<68} {figure:<48} {goal}")


if __name__ == "__main__":
    main()
