"""A console process and a headless chromium for the console's browser tests."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from cluster_support import wait_for

from headwater.admin.local import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Root needs --no-sandbox; the rest keeps chromium from reaching for a network this machine lacks.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1500,1100"]


class ConsoleProcess:
    """``headwater console`` on a free loopback port, stopped by its PID."""

    def __init__(self, bootstrap: str, log_path: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "headwater", "console", "--bootstrap-server", bootstrap,
             "--listen", f"127.0.0.1:{self.port}", "--kafka-timeout", "3", *extra],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.get_json("/healthz")["version"] > 0:  # the first snapshot is in
                    break
            except (OSError, urllib.error.URLError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the console did not start: {log_path.read_text()[-3000:]}")
            time.sleep(0.2)

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return json.loads(resp.read())

    def post(self, path: str, body: object, token: str | None, timeout_s: float = 30) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["X-CSRF-Token"] = token
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def token(self) -> str:
        """The CSRF token, read from a page as the page's own script reads it."""
        with urllib.request.urlopen(self.url + "/reassignments", timeout=10) as resp:
            page = str(resp.read().decode())
        marker = '<meta name="csrf-token" content="'
        start = page.index(marker) + len(marker)
        return page[start:page.index('"', start)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        with contextlib.suppress(OSError):
            self._log.close()


def chromium(user_data_dir: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={user_data_dir}")  # fresh: no profile left by another run
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def screenshot(driver: Any, workdir: Path, name: str, capsys: Any) -> None:
    path = workdir / f"console-{name}.png"
    driver.save_screenshot(str(path))
    with capsys.disabled():
        print(f"\nscreenshot: {path}")


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def wait_css(driver: Any, selector: str, timeout_s: float = 30) -> Any:
    return wait_for(lambda: (css(driver, selector) or [None])[0], timeout_s, f"{selector} on the page")


def click(driver: Any, selector: str) -> None:
    """Click the element ``selector`` finds. The pages rebuild their tables from every snapshot, so an
    element found a moment ago may be gone: find it again then (a click on it did nothing)."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(5):
        try:
            wait_css(driver, selector).click()
            return
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"{selector} was replaced under every click")


def prop(driver: Any, selector: str, name: str) -> Any:
    """A DOM property (``checked``, ``disabled``, ``textContent`` ...) of the element ``selector``
    finds, read in one script: no element reference to go stale between finding and reading."""
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e[arguments[1]] : null;",
                                 selector, name)


def text(driver: Any, selector: str) -> str:
    """The rendered text of the element ``selector`` finds ("" if none), read in one script: the pages
    rebuild their tables from every snapshot, so a found element may be gone when its text is read."""
    return str(prop(driver, selector, "innerText") or "")


def texts_by_id(driver: Any, selector: str) -> dict[str, str]:
    """The rendered text of every element ``selector`` finds, by its id, read in one script."""
    pairs = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => [e.id, e.innerText]);", selector)
    return {str(i): str(t) for i, t in pairs}


def attr(driver: Any, selector: str, name: str) -> str | None:
    """An attribute of the element ``selector`` finds (None: no such element or attribute), read in one script."""
    value = driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
                                  selector, name)
    return None if value is None else str(value)


def attrs(driver: Any, selector: str, *names: str) -> list[dict[str, str | None]]:
    """The attributes ``names`` of every element ``selector`` finds, in document order, read in one
    script: the pages rebuild their tables from every snapshot, so an element found by one call may be
    gone by the next."""
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(e => arguments[1].map(n => e.getAttribute(n)));", selector, list(names))
    return [{n: (None if v is None else str(v)) for n, v in zip(names, row, strict=True)} for row in rows]


def taken_at(driver: Any) -> float:
    """When the cluster was read for the snapshot the page shows now (the header keeps it)."""
    return float(attr(driver, "#status", "data-taken-at") or 0)


def wait_new_snapshot(driver: Any, timeout_s: float = 30) -> float:
    """Wait until the page renders a snapshot newer than the one it shows now; return its time."""
    seen = taken_at(driver)
    return float(wait_for(lambda: (lambda t: t if t > seen else None)(taken_at(driver)), timeout_s,
                          "a newer snapshot on the page"))


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (children, theirs, ...) by PID, with its command line."""
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue  # ended meanwhile
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            for child in children:
                try:
                    found[child] = (Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode())
                except OSError:
                    continue
                todo.append(child)
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its parent counts as ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"
