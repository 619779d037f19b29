"""The dashboard (`/ui` of `kubeferry serve`) in real browsers: headless Chromium and Firefox
driven through WebDriver (Debian's `chromium`, `chromium-driver` and `firefox-esr`, and
geckodriver built from crates.io), against a replica on the simulated cluster. In Chromium each
test also checks that the browser's console has no errors (geckodriver cannot read Firefox's).

With KUBEFERRY_SCREENSHOTS=1 the screenshots go to docs/images (the README shows them);
otherwise to the test's temporary directory."""

from __future__ import annotations

import os
import pathlib
import shutil
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import pytest
from conftest import ADMIN_TOKEN, REPO, TEAM_TOKEN, Gate, Replica
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.firefox.service import Service as FirefoxService
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from kubeferry_client import Client

T = TypeVar("T")
#: The longest a condition in the page is waited for.
WAIT = 20.0
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FIREFOX = shutil.which("firefox-esr") or shutil.which("firefox") or "/usr/bin/firefox-esr"
#: Built by `cargo install geckodriver` (Debian ships none).
GECKODRIVER = shutil.which("geckodriver") or str(
    pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    / "bin"
    / "geckodriver"
)


def run_js(driver: WebDriver, code: str) -> Any:
    """Runs `code` in the page; its `return` value."""
    return driver.execute_script(code)  # type: ignore[no-untyped-call]


def console(driver: WebDriver) -> list[dict[str, Any]]:
    """The browser console's entries since the last call (Chromium's; none read in Firefox)."""
    if driver.capabilities.get("browserName") == "firefox":
        return []
    return cast(list[dict[str, Any]], driver.get_log("browser"))  # type: ignore[no-untyped-call]


@pytest.fixture(scope="module", params=["chromium", "firefox"])
def browser(request: pytest.FixtureRequest) -> Iterator[WebDriver]:
    driver: WebDriver
    if request.param == "chromium":
        if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
            pytest.fail("the dashboard tests need Debian's chromium and chromium-driver (apt)")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,900",
        ):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    else:
        if not (os.path.exists(FIREFOX) and os.path.exists(GECKODRIVER)):
            pytest.fail(
                "the dashboard tests need Debian's firefox-esr (apt) and geckodriver "
                "(cargo install geckodriver)"
            )
        firefox = webdriver.FirefoxOptions()
        firefox.binary_location = FIREFOX
        for argument in ("-headless", "--width=1280", "--height=900"):
            firefox.add_argument(argument)
        driver = webdriver.Firefox(service=FirefoxService(GECKODRIVER), options=firefox)
    yield driver
    driver.quit()


@pytest.fixture
def page(
    browser: WebDriver, replica: Replica, request: pytest.FixtureRequest
) -> Iterator[WebDriver]:
    """The browser on a blank tab of the service's origin, signed out; after the test, its
    console must hold no errors (but the refused calls of a test marked `refused_calls`, which
    the browser itself reports)."""
    # A plain page of the origin (Firefox shows JSON in a viewer of its own, whose storage is
    # not the page's).
    browser.get(f"{replica.url}/ui/app.css")
    run_js(browser, "sessionStorage.clear()")
    console(browser)
    yield browser
    refused = request.node.get_closest_marker("refused_calls") is not None
    errors = [
        e
        for e in console(browser)
        if e["level"] == "SEVERE" and not (refused and "401 (Unauthorized)" in e["message"])
    ]
    assert errors == [], errors


def until(driver: WebDriver, what: str, check: Callable[[WebDriver], T]) -> T:
    """Waits for `check` to give something true; elements re-rendered meanwhile are read
    again."""

    def attempt(d: WebDriver) -> T | bool:
        try:
            return check(d)
        except StaleElementReferenceException:
            return False

    return cast(T, WebDriverWait(driver, WAIT, poll_frequency=0.05).until(attempt, what))


def sign_in(
    driver: WebDriver, replica: Replica, token: str = ADMIN_TOKEN, path: str = "/ui"
) -> None:
    driver.get(f"{replica.url}{path}")
    field = until(driver, "the sign-in", lambda d: d.find_element(By.ID, "token"))
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#sign-in button").click()


def rows(driver: WebDriver) -> dict[str, dict[str, str]]:
    """The table as it is at one moment (it is redrawn as events come): each row's state and
    job id, by execution id."""
    return cast(
        dict[str, dict[str, str]],
        run_js(
            driver,
            """return Object.fromEntries([...document.querySelectorAll('#jobs tbody tr')].map(
                (r) => [r.dataset.id, {state: r.dataset.state,
                                       jobId: r.querySelector('.job-id').textContent}]))""",
        ),
    )


def row_state(driver: WebDriver, job: str) -> str | None:
    return rows(driver).get(job, {}).get("state")


def click(driver: WebDriver, what: str, css: str) -> None:
    """Clicks the element `css` finds, found again if it was redrawn meanwhile."""

    def clicked(d: WebDriver) -> bool:
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    until(driver, what, clicked)


def text(driver: WebDriver, css: str) -> str:
    """The text of the element `css` finds now (empty when there is none)."""
    return cast(str, run_js(driver, f"return document.querySelector({css!r})?.innerText ?? ''"))


def screenshot(driver: WebDriver, name: str, tmp_path: pathlib.Path) -> None:
    """Chromium's screenshots are the README's."""
    chromium = driver.capabilities.get("browserName") != "firefox"
    keep = os.environ.get("KUBEFERRY_SCREENSHOTS") and chromium
    directory = REPO / "docs" / "images" if keep else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(directory / name))


def script(lines: str) -> dict[str, Any]:
    return {"name": "ui", "image": "busybox:1.36", "command": ["sh", "-c", lines]}


def test_the_table_shows_jobs_and_their_state_changes_without_a_reload(
    page: WebDriver,
    replica: Replica,
    client: Client,
    job_id: str,
    gate: Gate,
    tmp_path: pathlib.Path,
) -> None:
    sign_in(page, replica)
    until(page, "the table", lambda d: d.find_element(By.ID, "jobs"))
    run_js(page, "window.kubeferryTestMarker = 'same page'")
    job = client.submit(job_id, script(f"echo working; {gate.wait()}")).id
    until(page, "the job started", lambda d: row_state(d, job) == "STARTED")
    gate.open()
    until(page, "the job succeeded", lambda d: row_state(d, job) == "SUCCEEDED")
    assert run_js(page, "return window.kubeferryTestMarker") == "same page"
    assert int(text(page, '#counts [data-state="SUCCEEDED"] .number')) >= 1
    screenshot(page, "dashboard-jobs.png", tmp_path)


def test_a_state_filter_narrows_the_table_and_survives_a_reload(
    page: WebDriver, replica: Replica, client: Client, job_id: str
) -> None:
    failed = client.submit(f"{job_id}-f", script("exit 3")).id
    succeeded = client.submit(f"{job_id}-s", script("true")).id
    client.wait(failed)
    client.wait(succeeded)
    sign_in(page, replica)
    until(page, "both jobs", lambda d: {failed, succeeded} <= rows(d).keys())
    Select(page.find_element(By.ID, "filter-state")).select_by_value("FAILED")
    until(page, "only failures", lambda d: succeeded not in rows(d) and failed in rows(d))
    assert urllib.parse.parse_qs(urllib.parse.urlparse(page.current_url).query)["state"] == [
        "FAILED"
    ]
    assert {r["state"] for r in rows(page).values()} == {"FAILED"}
    page.refresh()
    until(page, "the failure again", lambda d: failed in rows(d))
    assert succeeded not in rows(page)
    assert Select(page.find_element(By.ID, "filter-state")).first_selected_option.text == "FAILED"


def test_a_failed_jobs_page_shows_its_exit_code_timeline_and_log(
    page: WebDriver, replica: Replica, client: Client, job_id: str, tmp_path: pathlib.Path
) -> None:
    job = client.submit(job_id, script("echo about to fail; exit 3")).id
    client.wait(job)
    sign_in(page, replica, path=f"/ui?job={urllib.parse.quote(job)}")
    until(
        page,
        "the exit code",
        lambda d: text(d, '[data-field="Exit code"]') == "3",
    )
    until(page, "the failed state", lambda d: text(d, "#job-status .state") == "FAILED")
    steps: list[str] = until(
        page,
        "the timeline",
        lambda d: run_js(
            d,
            "return [...document.querySelectorAll('#job-timeline .what')].map((s) => s.innerText)",
        ),
    )
    assert steps[0] == "Submitted" and "FAILED" in steps, steps
    until(page, "the log", lambda d: "about to fail" in text(d, "#job-log"))
    until(page, "what to do", lambda d: "read its log" in text(d, "#what-to-do"))
    screenshot(page, "dashboard-job.png", tmp_path)


def test_following_a_running_jobs_log_shows_lines_as_they_are_printed(
    page: WebDriver, replica: Replica, client: Client, job_id: str, gate: Gate
) -> None:
    second = Gate(gate.path.parent, f"{gate.path.name}-second")
    lines = f"echo first; {gate.wait()}; echo second; {second.wait()}; echo third"
    job = client.submit(job_id, script(lines)).id
    sign_in(page, replica, path=f"/ui?job={urllib.parse.quote(job)}")
    until(
        page,
        "the job running",
        lambda d: text(d, "#job-status .state") == "STARTED",
    )
    page.find_element(By.ID, "follow").click()
    until(page, "the first line", lambda d: "first" in text(d, "#job-log"))
    assert "second" not in text(page, "#job-log")
    gate.open()
    until(page, "the second line", lambda d: "second" in text(d, "#job-log"))
    second.open()
    until(page, "the third line", lambda d: "third" in text(d, "#job-log"))
    assert text(page, "#job-log").splitlines() == ["first", "second", "third"]


def test_cancel_ends_the_job_cancelled_and_its_row_follows(
    page: WebDriver, replica: Replica, client: Client, job_id: str, gate: Gate
) -> None:
    job = client.submit(job_id, script(gate.wait())).id
    sign_in(page, replica)
    until(page, "the job running", lambda d: row_state(d, job) == "STARTED")
    click(page, "the job's link", f'#jobs tr[data-id="{job}"] a')
    click(page, "the cancel button", "#cancel")
    click(page, "the confirmation", "#cancel-confirm")
    until(
        page,
        "the job cancelled",
        lambda d: text(d, "#job-status .state") == "CANCELLED",
    )
    page.back()
    until(page, "its row cancelled", lambda d: row_state(d, job) == "CANCELLED")
    assert client.status(job).state.value == "CANCELLED"


@pytest.mark.refused_calls
def test_a_wrong_or_expired_token_brings_the_sign_in_back(
    page: WebDriver, replica: Replica
) -> None:
    sign_in(page, replica, token="not-a-token")
    until(page, "the wrong token refused", lambda d: "refused" in text(d, "#sign-in-error"))
    # A token that stops working while the page is open: the next call brings the sign-in back.
    sign_in(page, replica)
    # Once the list is read the page calls nothing by itself; a call still to come would meet
    # the expired token first, and its sign-in would forget the token before the reload.
    until(page, "the list read", lambda d: run_js(d, "return document.body.dataset.listed"))
    run_js(page, f"sessionStorage.setItem({'kubeferry.token'!r}, 'expired')")
    # Its next call (here the reload's first) is refused.
    page.refresh()
    until(page, "the expired token refused", lambda d: "refused" in text(d, "#sign-in-error"))


def test_a_token_scoped_to_one_namespace_sees_no_other(
    page: WebDriver, replica: Replica, client: Client, job_id: str
) -> None:
    elsewhere = client.submit(f"{job_id}-d", script("true"), namespace="default").id
    mine = client.submit(f"{job_id}-s", script("true"), namespace="sweep").id
    client.wait(elsewhere)
    client.wait(mine)
    sign_in(page, replica, token=TEAM_TOKEN)
    until(page, "its own job", lambda d: mine in rows(d))
    namespaces = [
        o.get_attribute("value")
        for o in Select(page.find_element(By.ID, "filter-namespace")).options
    ]
    assert namespaces == ["", "sweep"]
    ids = set(rows(page))
    assert elsewhere not in ids
    assert all((i or "").split("/")[2] == "sweep" for i in ids), ids
    assert text(page, "#who") == "team · sweep"


def test_a_jobs_strings_are_shown_as_text_and_never_run(
    page: WebDriver, replica: Replica, client: Client
) -> None:
    hostile = (
        '<script>window.kubeferryPwned=1</script><img src=x onerror="window.kubeferryPwned=2">'
    )
    line = '<img src=x onerror="window.kubeferryPwned=3"><script>window.kubeferryPwned=4</script>'
    job = client.submit(hostile, script(f"echo '{line}'; exit 3")).id
    client.wait(job)
    sign_in(page, replica)
    # Its job id comes with the list, once the event stream has sent what it holds.
    until(page, "its row and job id", lambda d: rows(d).get(job, {}).get("jobId") == hostile)
    click(page, "the job's link", f'#jobs tr[data-id="{job}"] a')
    until(page, "its log", lambda d: line in text(d, "#job-log"))
    assert page.find_elements(By.CSS_SELECTOR, "#main img, #main script") == []
    assert run_js(page, "return window.kubeferryPwned") is None
