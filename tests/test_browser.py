"""A real browser: JupyterLab on localhost, Debian's Chromium driven by Playwright for Python.

Opens lesson 1 (a copy), runs all cells, checks that every widget rendered, moves the GPU-count
slider and picks a ZeRO stage, and asserts that the text shown is what distlab computes. The pictures
drawn in the browser (issue 20: the memory wall, the ring animation, the bubble grid, the ZeRO bars, the
3D assignment grid, the training lab's bars) answer a key on their own slider with new pixels and distlab's text,
with the kernel running and after it is shut down, and in each lesson exported to HTML with its widget state, opened
with no kernel (lesson 8b's triage ladder, a picture of one position, shows its saved ladder and no slider) (the widget front end that page loads from CDNs is served from npm packages, packed with npm: .ci/run
has it).
Playwright's browser download is never used: it drives /usr/bin/chromium (`apt-get install
chromium`; .ci/run does that). A screenshot is saved in test-artifacts/.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import re
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
LESSON = ROOT / "notebooks" / "01_memory_wall.ipynb"
VOILA_APP = ROOT / "notebooks" / "07_training_lab.ipynb"  # the README's Voila link
VOILA_CONFIG = ROOT / "voila.json"  # read by Voila (and Binder's Voila server extension) from the folder it starts in
SETTINGS = ROOT / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "distlab.json"
# Flags seen to work here for headless Chromium on a machine with no network and no screen
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-sandbox",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Debian's chromium is not installed (/usr/bin/chromium); apt-get install chromium (.ci/run does)",
    ),
]


class _Pages:
    """What a test drives: new_page(viewport=..., device_scale_factor=...) opens a page in the module's persistent
    browser context of that scale (_context); lab_page(...) gives the module's JupyterLab page of that scale
    (_lab_page: JupyterLab loaded once, each test's notebook opened in it as a student opens another file);
    close() closes the pages it opened and closes the lab page's notebooks and shuts down their kernels. The pages
    share that context's cookies, storage and HTTP cache as a student's tabs do; no test sees another's tabs."""

    def __init__(self, sync_api) -> None:
        self._sync_api, self._pages, self._lab = sync_api, [], []

    def new_page(self, viewport: dict, device_scale_factor: int = 1):
        page = _context(self._sync_api, device_scale_factor).new_page()
        self._pages.append(page)
        page.set_viewport_size(viewport)
        return page

    def lab_page(self, viewport: dict, device_scale_factor: int = 1):
        page = _lab_page(self._sync_api, device_scale_factor)
        self._lab.append(device_scale_factor)
        page.set_viewport_size(viewport)
        return page

    def close(self) -> None:
        while self._pages:
            page = self._pages.pop()
            if not page.is_closed():
                page.close()
        while self._lab:
            _reset_lab_page(self._lab.pop())


#: The module's one Playwright driver and its persistent Chromium contexts, one per device scale factor (started by
#: the first test that needs them, stopped with the module by _stop_chromium). A persistent context keeps its HTTP
#: and V8 code caches on disk: loading JupyterLab again in it took about 2.6 s of Chromium's CPU instead of about
#: 3.9 s in a fresh context each time (benchmarks/RESULTS.md, session 17). Each start took seconds of CPU, once per
#: test before they were shared.
_SHARED: dict = {}


def _context(sync_api, device_scale_factor: int):
    """The persistent context of `device_scale_factor` (Debian's Chromium, headless, launched by Playwright, never
    Playwright's own download), launched on first use into a profile folder removed with the module."""
    contexts = _SHARED.setdefault("contexts", {})
    if device_scale_factor not in contexts:
        if "playwright" not in _SHARED:
            _SHARED["playwright"] = sync_api.sync_playwright().start()
            _SHARED["profiles"] = tempfile.mkdtemp(prefix="distlab-chromium-")
        profile = Path(_SHARED["profiles"]) / f"scale-{device_scale_factor}"
        context = _SHARED["playwright"].chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            device_scale_factor=device_scale_factor,
        )
        context.on("close", lambda _context: contexts.pop(device_scale_factor, None))
        contexts[device_scale_factor] = context
    return contexts[device_scale_factor]


def _lab_page(sync_api, device_scale_factor: int):
    """The module's JupyterLab page of `device_scale_factor`: a page of the shared context (_context), kept between
    tests (_open_and_run_all loads JupyterLab in it on first use and opens later notebooks from File > Open from Path).
    Loading JupyterLab took about 5 s of CPU per test (its page, then the kernel); opening a notebook in the loaded
    page about 1.7 s (benchmarks/RESULTS.md, session 25)."""
    pages = _SHARED.setdefault("lab_pages", {})
    page = pages.get(device_scale_factor)
    if page is None or page.is_closed():
        page = pages[device_scale_factor] = _context(sync_api, device_scale_factor).new_page()
    return page


def _reset_lab_page(device_scale_factor: int) -> None:
    """After a test: close the lab page's notebooks (discarding their changes) and shut down every kernel of the
    module's JupyterLab, so that the next test meets a page with no notebook open and no other test's kernel busy
    beside it. A page that cannot be brought back (a dialog or menu a failed test left, a timeout) is closed, and
    the next test loads JupyterLab afresh."""
    page = _SHARED.get("lab_pages", {}).get(device_scale_factor)
    if page is None or page.is_closed():
        return
    try:
        for _ in range(3):
            page.keyboard.press("Escape")  # a menu or dialog a test left open
        if page.locator(".jp-NotebookPanel").count():
            page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
            page.get_by_role("menuitem", name="Close All Tabs", exact=True).click()
            deadline = time.monotonic() + 20
            while page.locator(".jp-NotebookPanel").count():
                discard = page.locator(".jp-Dialog button", has_text=re.compile(r"^\s*Discard\s*$"))
                if discard.count():
                    discard.first.click()
                if time.monotonic() > deadline:
                    raise TimeoutError("the lab page's notebooks did not close")
                page.wait_for_timeout(50)
        base, token = _SHARED["lab_server"]
        for session in _get(f"{base}/api/sessions?token={token}"):
            request = urllib.request.Request(f"{base}/api/sessions/{session['id']}?token={token}", method="DELETE")
            with urllib.request.urlopen(request, timeout=15):  # noqa: S310 - localhost only
                pass
    except Exception:
        page.close()


@contextlib.contextmanager
def _chromium(sync_api):
    """The block gets _Pages on the module's shared Chromium, whose pages are closed when it leaves (the caller may
    close them first)."""
    pages = _Pages(sync_api)
    try:
        yield pages
    finally:
        pages.close()


def _stop_shared_chromium() -> None:
    _SHARED.pop("lab_pages", None)
    _SHARED.pop("lab_server", None)
    contexts, playwright = _SHARED.pop("contexts", {}), _SHARED.pop("playwright", None)
    try:
        for context in list(contexts.values()):
            context.close()
    finally:
        if playwright is not None:
            playwright.stop()
        profiles = _SHARED.pop("profiles", None)
        if profiles:
            shutil.rmtree(profiles, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _stop_chromium():
    yield
    _stop_shared_chromium()


#: A notebook of the apps whose live pictures are drawn in the browser, built as their lessons build them.
PICTURES = "browser_pictures.ipynb"
PICTURE_CELLS = [
    "from distlab.widgets.collectives import RingAllReduceApp\n"
    'ring = RingAllReduceApp(gpus=4, size="4 GB", link="nvlink4")\nring',
    'from distlab.widgets.pipeline import BubbleGridApp\ngrid = BubbleGridApp(kind="1f1b", stages=8, microbatches=16)\ngrid',
    "from distlab.widgets.data_parallel_zero import ZeroMemoryApp\n"
    'zero = ZeroMemoryApp(model="llama2-7b", gpu="h100-sxm", gpus=8, fabric="ib-ndr")\nzero',
    "from distlab.widgets.parallelism_3d import MeshApp\n"
    "mesh = MeshApp(dp=2, tp=2, pp=4, gpus_per_node=8, picked=5)\nmesh",
    "from distlab.widgets.training_lab import TrainingLabApp\nlab = TrainingLabApp()\nlab",
]


def _write_pictures_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in PICTURE_CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(server: subprocess.Popen) -> None:
    try:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its kernels
        server.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait(timeout=5)


def _wait_until_up(server: subprocess.Popen, url: str, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):  # noqa: S310 - localhost only
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{server.args[2]} did not start:\n" + log.read_text(errors="replace")[-3000:])
            time.sleep(0.5)


def _get(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - localhost only
        return json.loads(response.read().decode())


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 with a random port and token, serving a copy of lesson 1."""
    tmp_path = tmp_path_factory.mktemp("jupyterlab")
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(LESSON, root / LESSON.name)
    _write_pictures_notebook(root / PICTURES)
    # the settings distlab installs into an environment (what Binder and a regular install see)
    app_settings = tmp_path / "app-settings" / "overrides.d"
    app_settings.mkdir(parents=True)
    shutil.copy(SETTINGS, app_settings / SETTINGS.name)
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    log = open(tmp_path / "jupyterlab.log", "wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--allow-root",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            f"--LabApp.app_settings_dir={app_settings.parent}",
            f"--LabApp.user_settings_dir={tmp_path / 'user-settings'}",
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(server, f"{base}/api/status?token={token}", tmp_path / "jupyterlab.log")
        yield base, token
    finally:
        _stop(server)
        log.close()


_WORKSPACES = itertools.count()


def _upload_notebook(base: str, token: str, name: str, nb) -> None:
    """Save notebook `nb` as `name` in the running JupyterLab through its contents API (a python3 kernel)."""
    import nbformat

    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    request = urllib.request.Request(
        f"{base}/api/contents/{name}?token={token}",
        data=json.dumps({"type": "notebook", "content": json.loads(nbformat.writes(nb))}).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - localhost only
        pass


def _open_and_run_all(page, url: str) -> None:
    """Open a notebook in JupyterLab and, once its kernel is idle, Run > Run All Cells, as a student would. In a lab
    page (_lab_page) that already shows JupyterLab, the notebook is opened from File > Open from Path."""
    base, rest = url.split("/lab/tree/", 1)
    path, token = rest.split("?token=", 1)
    if page.url.startswith(f"{base}/lab/workspaces/"):
        page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
        page.get_by_role("menuitem", name="Open from Path…", exact=True).click()
        page.locator(".jp-Dialog input").fill(urllib.parse.unquote(path))
        page.locator(".jp-Dialog .jp-mod-accept").click()
    else:
        # a workspace of its own: JupyterLab would otherwise restore the tabs an earlier test opened, and Run All
        # Cells could then run a notebook in a hidden tab
        _SHARED["lab_server"] = (base, token)
        workspace = f"/lab/workspaces/test-{next(_WORKSPACES)}/tree/"
        page.goto(url.replace("/lab/tree/", workspace, 1))
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").first.wait_for()
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)
    prompt = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt").first
    for attempt in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        # the first code cell's prompt leaves "[ ]:" once the kernel takes the cells ("[*]:", then "[1]:"); on a
        # loaded machine JupyterLab can report Idle before the kernel's session is ready and drop the request
        try:
            page.wait_for_function(
                "el => !/^\\s*\\[ \\]:\\s*$/.test(el.textContent)", arg=prompt.element_handle(), timeout=20_000
            )
            return
        except Exception:
            if attempt == 2:
                raise
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)


@contextlib.contextmanager
def _notebook_page(jupyterlab, sync_api, notebook: str, cells: list, shot: str, height: int = 1000, width: int = 1400):
    """A notebook of the code `cells`, uploaded to the module's JupyterLab as `notebook`, opened in the module's lab
    page (_lab_page) and run as a student runs it (Run > Run All Cells); the block gets the page, and its screenshot is saved as
    test-artifacts/`shot` when the block ends, passed or failed."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(cell) for cell in cells]
    base, token = jupyterlab
    _upload_notebook(base, token, notebook, nb)
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": width, "height": height})
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/{notebook}?token={token}")
            yield page
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / shot), full_page=False)
            browser.close()


def _wait_filled(page, holder, n) -> None:
    """Wait until the picture `holder` (a locator) says the browser holds at least `n` prefetched states."""
    page.wait_for_function(
        "([el, n]) => Number(el.getAttribute('data-prefetched')) >= n",
        arg=[holder.element_handle(), n],
        timeout=90_000,
    )


def _wait_for_text(page, element, want: str, timeout: int) -> None:
    """Wait (up to `timeout` ms) until `element`'s text, its whitespace squashed (_squash), reads `want`."""
    page.wait_for_function(
        "([el, want]) => el.textContent.split(/\\s+/).join(' ').trim() === want",
        arg=[element.element_handle(), want],
        timeout=timeout,
    )


def _choose(page, label: str, option: str, toggles: bool) -> None:
    """Click `option` of the toggle buttons, or select it in the dropdown, whose label reads exactly `label`."""
    named = page.locator(".widget-label", has_text=re.compile(f"^{label}$"))
    if toggles:
        page.locator(".widget-toggle-buttons", has=named).get_by_role("button", name=option, exact=True).click()
    else:
        page.locator(".widget-dropdown", has=named).locator("select").select_option(label=option)


def _shut_down_kernel(page) -> None:
    """Kernel > Shut Down Kernel, as a student would, and wait until JupyterLab says no kernel runs."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
    page.get_by_role("menuitem", name=re.compile(r"^Shut Down Kernel")).first.click()
    page.wait_for_selector("#jp-main-statusbar >> text=/No Kernel|Unknown/", timeout=30_000)


def test_shipped_settings_are_what_jupyterlab_uses(jupyterlab):
    base, token = jupyterlab
    tracker = _get(f"{base}/lab/api/settings/@jupyterlab/notebook-extension:tracker?token={token}")
    assert tracker["schema"]["properties"]["windowingMode"]["default"] == "defer"
    # no "Would you like to get notified about official Jupyter news?" over a lesson (it covered the corner of every
    # JupyterLab screenshot), and no request to a website from a classroom's JupyterLab
    news = _get(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}")
    assert news["schema"]["properties"]["fetchNews"]["default"] == "false"
    assert news["schema"]["properties"]["checkForUpdates"]["default"] is False


def test_lesson_runs_renders_widgets_and_the_slider_updates_the_result(jupyterlab):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab import memory
    from distlab.units import format_bytes
    from distlab.widgets.common import GPU_COUNTS
    from distlab.widgets.memory_wall import MemoryWallApp

    base, token = jupyterlab
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "browser-01_memory_wall.png"
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/{LESSON.name}?token={token}")

            # the text under the app's picture: "8 GPUs, ZeRO-3: 13.5 GB per GPU (...)"
            status = page.locator(
                ".distlab-summary", has_text=re.compile(r"GPUs?, (plain DP|ZeRO-\d): .* per GPU")
            ).first
            status.wait_for(timeout=60_000)
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)
            app = page.locator(".widget-vbox", has=page.locator(".widget-toggle-buttons")).filter(has=status).last
            app.scroll_into_view_if_needed()
            picture = app.locator(".distlab-picture").first
            canvas = picture.locator("canvas").first
            canvas.wait_for(state="attached")
            assert page.get_by_text("Error displaying widget").count() == 0

            def dropdown(label: str) -> str:
                box = app.locator(".widget-dropdown", has=page.locator(".widget-label", has_text=label)).first
                return box.locator("select").evaluate("s => s.options[s.selectedIndex].text")

            model, precision, gpu = dropdown("model"), dropdown("precision"), dropdown("GPU")
            slider = picture.locator("input.distlab-slider")
            readout = picture.locator(".distlab-readout")
            start = int(readout.inner_text())
            before = " ".join(status.inner_text().split())
            pixels = canvas.evaluate("c => c.toDataURL()")

            # move the GPU slider with the keyboard (one step right: the next count it offers), then pick ZeRO-2
            slider.focus()
            page.keyboard.press("ArrowRight")
            gpus = GPU_COUNTS[GPU_COUNTS.index(start) + 1]
            page.wait_for_function(
                "([el, want]) => el.textContent.trim() === want", arg=[readout.element_handle(), str(gpus)]
            )
            app.locator(".widget-toggle-buttons button", has_text="ZeRO-2").click()

            want = MemoryWallApp(model=model, precision=precision, gpu=gpu, gpus=gpus, zero=2)
            expected = " ".join(want.summary().split())
            # the same number straight from distlab.memory
            total = memory.training_memory(
                model, precision=precision, gpu=gpu, zero=2, dp=gpus, count_activations=False, in_flight_microbatches=1
            ).total_bytes
            assert f"{format_bytes(total)} per GPU" in expected
            page.wait_for_function(
                "([el, want]) => el.innerText.split(/\\s+/).join(' ').trim() === want",
                arg=[status.element_handle(), expected],
                timeout=20_000,
            )
            after = " ".join(status.inner_text().split())
            assert after == expected and after != before
            assert canvas.evaluate("c => c.toDataURL()") != pixels, "the bars did not change"
            assert page.get_by_text("Error displaying widget").count() == 0
            chart = canvas.evaluate("d => [d.offsetWidth, d.offsetHeight]")
        finally:
            page.screenshot(path=str(shot), full_page=False)
            browser.close()
    print(f"screenshot: {shot}")
    # The chart must have real size (an ipympl canvas once rendered 0x0 here; the bars are a browser picture now).
    assert chart[0] >= 100 and chart[1] >= 100, f"the app's chart rendered {chart[0]}x{chart[1]} px"


@pytest.mark.skipif(not VOILA_APP.exists(), reason="the Voila app's notebook is not in this checkout")
@pytest.mark.parametrize("name", [VOILA_APP.name, PICTURES])
def test_voila_serves_the_training_lab_as_an_app(tmp_path, name):
    """The README's Voila link: the notebook as a standalone page, its widgets rendered, no code shown; and the
    pictures drawn in the browser (issue 20) render and answer their slider under Voila too."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    if shutil.which("voila", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("voila (the lessons extra) is not installed")
    if name == PICTURES:
        _write_pictures_notebook(tmp_path / name)
    else:
        shutil.copy(VOILA_APP, tmp_path / name)
    # the configuration the README's command reads from the folder Voila starts in (progressive rendering)
    shutil.copy(VOILA_CONFIG, tmp_path / VOILA_CONFIG.name)
    port, token = _free_port(), secrets.token_hex(16)
    log_path = tmp_path / "voila.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "voila",
                name,
                "--no-browser",
                "--Voila.ip=127.0.0.1",
                f"--port={port}",
                f"--token={token}",
                "--Voila.port_retries=0",
            ],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={
                **os.environ,
                "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
                "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
            },
        )
        try:
            _wait_until_up(server, f"http://127.0.0.1:{port}/?token={token}", log_path)
            ARTIFACTS.mkdir(exist_ok=True)
            with _chromium(sync_api) as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                try:
                    page.goto(f"http://127.0.0.1:{port}/?token={token}", timeout=90_000)
                    wanted = ".distlab-picture canvas" if name == PICTURES else ".widget-slider, .widget-dropdown"
                    control = page.locator(wanted).first
                    control.wait_for(timeout=90_000)
                    page.wait_for_timeout(1000)
                    control.scroll_into_view_if_needed()
                    assert page.get_by_text("Error displaying widget").count() == 0
                    # an app, not code: Voila shows no code cells
                    assert page.locator(".jp-InputArea-editor >> visible=true").count() == 0
                    assert "Traceback" not in page.content()
                    if name == VOILA_APP.name:  # the kernel answers a control (Voila's preheated kernel is live)
                        from distlab.widgets.training_lab import TrainingLabApp

                        lab = TrainingLabApp()
                        lab.seq_len.value = 4096
                        want = _squash(lab.summary())
                        summary = page.locator(".distlab-picture .distlab-summary").first
                        sequence = page.locator(
                            ".widget-dropdown", has=page.locator(".widget-label", has_text=re.compile(r"^sequence$"))
                        ).locator("select")
                        sequence.select_option(label="4096")
                        _wait_for_text(page, summary, want, 90_000)
                    if name == PICTURES:  # the ring's step slider answers in the page
                        picture = page.locator(".distlab-picture").first
                        summary = picture.locator(".distlab-summary")
                        before = summary.text_content()
                        picture.locator("input.distlab-slider").focus()
                        page.keyboard.press("ArrowRight")
                        page.wait_for_function(
                            "([el, old]) => el.textContent !== old", arg=[summary.element_handle(), before]
                        )
                        assert summary.text_content().startswith("Step 1 of 6")
                finally:
                    page.screenshot(path=str(ARTIFACTS / f"voila-{Path(name).stem}.png"))
                    browser.close()
        finally:
            _stop(server)


def _squash(text: str) -> str:
    return " ".join(text.split())


def test_browser_pictures_answer_a_key_press_with_distlabs_numbers(jupyterlab):
    """The ring animation, the bubble grid, the ZeRO bars, the 3D assignment grid and the training lab's bars (issue 20):
    run as in their lessons, then, for each picture, one
    arrow key on its own slider changes the canvas's pixels and the text summary under it becomes what distlab
    computes for the new position; after the kernel is shut down the pictures still answer (no round trip)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab.widgets.collectives import RingAllReduceApp
    from distlab.widgets.common import GPU_COUNTS
    from distlab.widgets.data_parallel_zero import ZeroMemoryApp
    from distlab.widgets.pipeline import BubbleGridApp

    base, token = jupyterlab
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "browser-pictures.png"
    ring = RingAllReduceApp(gpus=4, size="4 GB", link="nvlink4")
    grid = BubbleGridApp(kind="1f1b", stages=8, microbatches=16)
    expected = {}
    for t in (1, 2):
        ring.step.value = t
        expected[("ring", t)] = _squash(ring.summary())
    for m in (17, 18):
        grid.microbatches.value = m
        expected[("grid", m)] = _squash(grid.summary())
    zero = ZeroMemoryApp(model="llama2-7b", gpu="h100-sxm", gpus=8, fabric="ib-ndr")
    for n in (9, 10):  # the slider runs over GPU_COUNTS: its positions are their indices
        zero.gpus.value = n
        expected[("zero", n)] = _squash(zero.summary())
    # the same numbers straight from distlab.memory: ZeRO-3 at 9 GPUs holds 16 bytes x params / 9
    from distlab import memory
    from distlab.units import format_bytes, format_seconds

    z3 = memory.training_memory("llama2-7b", zero=3, dp=9, gpu="h100-sxm", count_activations=False).total_bytes
    assert format_bytes(z3) in expected[("zero", 9)]
    position = {("zero", n): GPU_COUNTS.index(n) for n in (9, 10)}
    from distlab.widgets.parallelism_3d import MeshApp

    mesh = MeshApp(dp=2, tp=2, pp=4, gpus_per_node=8, picked=5)
    for r in (6, 7):
        mesh.pick.value = r
        expected[("mesh", r)] = _squash(mesh.summary())
    # by hand, tp-dp-pp with tp fastest: rank = tp + 2 dp + 4 pp, so GPU 6 = (tp 0, dp 1, pp 1)
    assert "GPU 6 on node 0: tp rank 0, dp rank 1, pipeline stage 1" in expected[("mesh", 6)]
    from distlab import training
    from distlab.widgets.training_lab import NODE_COUNTS, TrainingLabApp

    lab = TrainingLabApp()
    for nodes in (64, 128):  # the node slider: 32 -> 64 -> 128
        lab.nodes.value = nodes
        expected[("lab", nodes)] = _squash(lab.summary())
        position[("lab", nodes)] = NODE_COUNTS.index(nodes)
    # the same step time straight from distlab.training (the lab's defaults at 64 nodes, 512 GPUs)
    at_64 = training.estimate(
        "llama3.1-70b", "dgx-h100", nodes=64, fabric="ib-ndr", global_batch=256, seq_len=8192, tp=4, pp=4, zero=1,
        recompute="selective", sequence_parallel=True, memory_recipe="deepspeed",
    )  # fmt: skip
    assert f"step time {format_seconds(at_64.step_time_s)}: " in expected[("lab", 64)]
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": 1400, "height": 1000}, device_scale_factor=2)
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/{PICTURES}?token={token}")
            pictures = page.locator(".distlab-picture")
            pictures.nth(1).wait_for(timeout=90_000)
            page.locator(".jp-Notebook .jp-Cell").last.scroll_into_view_if_needed()  # a deferred cell renders in view
            pictures.nth(4).wait_for(timeout=90_000)
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)
            assert page.get_by_text("Error displaying widget").count() == 0

            def press(picture, key, name, value):
                slider = picture.locator("input.distlab-slider")
                canvas = picture.locator("canvas")
                before = canvas.evaluate("c => c.toDataURL()")
                slider.focus()
                page.keyboard.press(key)
                summary = picture.locator(".distlab-summary")
                try:
                    _wait_for_text(page, summary, expected[(name, value)], 20_000)
                except sync_api.TimeoutError:
                    shown = _squash(summary.text_content() or "")
                    pytest.fail(
                        f"{name} at {slider.input_value()}: shows {shown!r}, distlab: {expected[(name, value)]!r}"
                    )
                assert slider.input_value() == str(position.get((name, value), value))
                assert picture.locator(".distlab-readout").text_content() == str(value)
                assert canvas.evaluate("c => c.toDataURL()") != before, f"{name}: the picture did not change"
                # drawn at the device pixel ratio (2 here): the canvas has twice its CSS pixels
                w, css = canvas.evaluate("c => [c.width, c.getBoundingClientRect().width]")
                assert w == round(2 * css)

            ring_picture, grid_picture = pictures.nth(0), pictures.nth(1)
            ring_picture.scroll_into_view_if_needed()
            press(ring_picture, "ArrowRight", "ring", 1)
            grid_picture.scroll_into_view_if_needed()
            press(grid_picture, "ArrowRight", "grid", 17)
            grid_picture.screenshot(path=str(ARTIFACTS / "browser-pictures-grid.png"))
            zero_picture = pictures.nth(2)
            zero_picture.scroll_into_view_if_needed()
            press(zero_picture, "ArrowRight", "zero", 9)
            zero_picture.screenshot(path=str(ARTIFACTS / "browser-pictures-zero.png"))
            mesh_picture = pictures.nth(3)
            mesh_picture.scroll_into_view_if_needed()
            press(mesh_picture, "ArrowRight", "mesh", 6)
            # a click on GPU 13's cell picks it: the cell's centre in canvas pixels, computed here from the frames
            # (scale = the smaller of width and height over the grid's extent plus 3.2 cells of node labels)
            f = mesh.picture.frames
            w, h = mesh.picture.width, mesh.picture.height
            s = min((w - 8) / (f["width"] + 3.2), (h - 22 - 8) / f["height"])
            mesh_picture.locator("canvas").click(
                position={"x": 4 + (f["x"][13] + 3.2 + 0.5) * s, "y": 4 + (f["y"][13] + 0.5) * s}
            )
            page.wait_for_function(
                "el => el.textContent.trim() === '13'", arg=mesh_picture.locator(".distlab-readout").element_handle()
            )
            mesh.pick.value = 13
            assert _squash(mesh_picture.locator(".distlab-summary").text_content()) == _squash(mesh.summary())
            mesh_picture.locator("input.distlab-slider").fill("6")  # back where the key press below starts
            mesh_picture.screenshot(path=str(ARTIFACTS / "browser-pictures-mesh.png"))
            lab_picture = pictures.nth(4)
            lab_picture.scroll_into_view_if_needed()
            press(lab_picture, "ArrowRight", "lab", 64)
            lab_picture.screenshot(path=str(ARTIFACTS / "browser-pictures-lab.png"))

            # no kernel: the pictures still answer (every position is already in the browser)
            _shut_down_kernel(page)
            press(ring_picture, "ArrowRight", "ring", 2)
            press(grid_picture, "ArrowRight", "grid", 18)
            press(zero_picture, "ArrowRight", "zero", 10)
            press(mesh_picture, "ArrowRight", "mesh", 7)
            press(lab_picture, "ArrowRight", "lab", 128)
            # the play button is a native button: the keyboard starts it
            ring_picture.locator("button.distlab-play").focus()
            page.keyboard.press("Space")
            page.wait_for_function(
                "el => el.value === el.max", arg=ring_picture.locator("input.distlab-slider").element_handle()
            )
            assert page.get_by_text("Error displaying widget").count() == 0
        finally:
            page.screenshot(path=str(shot), full_page=False)
            browser.close()


def test_the_triage_ladder_answers_a_kernel_control_with_a_new_ladder(jupyterlab):
    """Lesson 8b's triage ladder (a picture of one position, no slider): a click on a control in JupyterLab sends the
    new ladder from the kernel in one message, and the picture redraws it with distlab's text."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab.widgets.production import TriageApp

    base, token = jupyterlab
    app = TriageApp()
    start = _squash(app.summary())
    app.zero.value = 1
    want = _squash(app.summary())
    # the text is oom_triage's: ZeRO-1 given, the ladder starts from it (a change the kernel had to price)
    assert want != start and "ZeRO-1" not in [s.change for s in app.result.ladder]
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from distlab.widgets.production import TriageApp\nTriageApp()")]
    _upload_notebook(base, token, "ladder.ipynb", nb)
    ARTIFACTS.mkdir(exist_ok=True)
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": 1400, "height": 1000}, device_scale_factor=2)
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/ladder.ipynb?token={token}")
            picture = page.locator(".distlab-picture")
            picture.wait_for(timeout=90_000)
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)
            summary, canvas = picture.locator(".distlab-summary"), picture.locator("canvas")
            assert _squash(summary.text_content()) == start
            assert not picture.locator("input.distlab-slider").is_visible()  # one position: no slider
            before = canvas.evaluate("c => c.toDataURL()")
            page.get_by_role("button", name="ZeRO-1", exact=True).click()
            try:
                _wait_for_text(page, summary, want, 20_000)
            except sync_api.TimeoutError:
                pytest.fail(f"after ZeRO-1 the ladder shows {_squash(summary.text_content())!r}, distlab: {want!r}")
            assert canvas.evaluate("c => c.toDataURL()") != before, "the ladder's picture did not change"
            assert page.get_by_text("Error displaying widget").count() == 0
            picture.screenshot(path=str(ARTIFACTS / "browser-triage-ladder.png"))
        finally:
            browser.close()


# --- A lesson exported to HTML with its widget state, opened with no kernel (issue 20) ---------------------------

#: The lessons whose picture is drawn in the browser, each app built as its lesson builds it and then set as its
#: later cells set it (the executed notebook, and so its export, shows it so); the slider is the app's `picture`.
EXPORTED_LESSONS = {
    "01_memory_wall.ipynb": (
        "from distlab.widgets.memory_wall import MemoryWallApp\n"
        'app = MemoryWallApp(model="llama2-7b", gpu="h100-sxm", gpus=8, zero=0)\napp.zero.value = 3'
    ),
    "02_collectives.ipynb": (
        "from distlab.widgets.collectives import RingAllReduceApp\n"
        'app = RingAllReduceApp(gpus=4, size="4 GB", link="nvlink4")\napp.gpus.value = 8\napp.step.value = 7'
    ),
    "03_data_parallel_zero.ipynb": (
        "from distlab.widgets.data_parallel_zero import ZeroMemoryApp\n"
        'app = ZeroMemoryApp(model="llama2-7b", gpu="h100-sxm", gpus=8, fabric="ib-ndr")\n'
        'app.model.value = "llama2-70b"\napp.gpus.value = 16'
    ),
    "04_pipeline.ipynb": (
        "from distlab.widgets.pipeline import BubbleGridApp\n"
        'app = BubbleGridApp(kind="1f1b", stages=8, microbatches=16)\napp.microbatches.value = 64'
    ),
    "06_3d_parallelism.ipynb": (
        "from distlab.widgets.parallelism_3d import MeshApp\n"
        'app = MeshApp(dp=4, tp=4, pp=4, gpus_per_node=8, colour_by="dp")\napp.pick.value = 21'
    ),
    "07_training_lab.ipynb": "from distlab.widgets.training_lab import TrainingLabApp\napp = TrainingLabApp()",
    # one position (no slider): its controls are the kernel's, so the export shows the saved ladder only
    "08b_failure_triage.ipynb": "from distlab.widgets.production import TriageApp\napp = TriageApp()",
}
#: Where nbconvert's HTML export loads the widget front end: require.js, then @jupyter-widgets/html-manager, which
#: loads every other widget module (anywidget's, ipympl's) from a CDN as <name>@<version in the state>/dist/<file>.
REQUIRE_JS = re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/require\.js/[^/]+/require(\.min)?\.js")
NPM_CDN = re.compile(r"https://(?:cdn\.jsdelivr\.net/npm|unpkg\.com)/(?P<name>(?:@[^/@]+/)?[^/@]+)@[^/]+/(?P<file>.+)")
#: The versions nbconvert 7's template names (require.js) or asks for as `@*` (html-manager: the one for ipywidgets 8)
FRONT_END = {"requirejs": "2.1.10", "@jupyter-widgets/html-manager": "1.0.15"}


def _saved_widget_state(notebook: Path) -> dict:
    state = json.loads(notebook.read_text(encoding="utf-8"))["metadata"]["widgets"]
    return state["application/vnd.jupyter.widget-state+json"]["state"]


@pytest.fixture(scope="module")
def widget_front_end(tmp_path_factory) -> dict:
    """The npm packages an exported lesson loads from CDNs, packed from the npm registry with npm into a folder this
    test run creates: {package name: its unpacked folder}. The widget modules are those the lessons' saved state
    names, at the versions it names (anywidget ~0.11.*, jupyter-matplotlib ^0.12, ...)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(
            "npm is not installed: the HTML export test serves the widget front end from npm packages "
            "(apt-get install npm; .ci/run does)"
        )
    wanted = dict(FRONT_END)
    for name in EXPORTED_LESSONS:
        for model in _saved_widget_state(ROOT / "notebooks" / name).values():
            if not model["model_module"].startswith("@jupyter-widgets/"):  # html-manager ships those
                wanted[model["model_module"]] = model["model_module_version"]
    folder = tmp_path_factory.mktemp("npm")
    specs = [f"{name}@{version}" for name, version in wanted.items()]
    try:
        packed = subprocess.run(
            [npm, "pack", *specs, "--json", "--pack-destination", str(folder)],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm pack {' '.join(specs)} did not finish in 300 s (no network to the npm registry?)")
    if packed.returncode != 0:
        said = [line for line in packed.stderr.splitlines() if line.startswith("npm error")] or [packed.stderr[-500:]]
        pytest.skip(f"npm pack {' '.join(specs)} failed (no network to the npm registry?): {' / '.join(said[:3])}")
    unpacked = {}
    for package in json.loads(packed.stdout):
        target = folder / package["filename"].removesuffix(".tgz")
        with tarfile.open(folder / package["filename"]) as tar:
            tar.extractall(target, filter="data")
        unpacked[package["name"]] = target / "package"
    return unpacked


def _serve_front_end(page, packages: dict, refused: list) -> None:
    """Route the exported page's CDN requests to the npm packages; refuse (and list) every other request off the
    page's own file, so the test shows the lesson needs nothing else from the network (MathJax is refused)."""

    def handle(route):
        url = route.request.url
        if url.startswith(("file:", "blob:", "data:")):
            return route.continue_()
        path = None
        if REQUIRE_JS.fullmatch(url):
            path = packages["requirejs"] / "require.js"
        elif (m := NPM_CDN.fullmatch(url)) and m["name"] in packages:
            path = packages[m["name"]] / m["file"]
        if path is None or not path.is_file():
            refused.append(url)
            return route.abort()
        kind = "text/javascript" if path.suffix == ".js" else None
        return route.fulfill(path=str(path), content_type=kind)

    page.route("**/*", handle)


@pytest.fixture(scope="module")
def exported_lessons(tmp_path_factory) -> Path:
    """The folder where one `jupyter nbconvert --to html` (README's command, given every lesson of EXPORTED_LESSONS
    at once: one start of Jupyter, not one per lesson) wrote each lesson's HTML page."""
    folder = tmp_path_factory.mktemp("exported")
    export = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(folder)]
        + [str(ROOT / "notebooks" / name) for name in sorted(EXPORTED_LESSONS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert export.returncode == 0, export.stderr[-3000:]
    return folder


@pytest.mark.parametrize("name", sorted(EXPORTED_LESSONS))
def test_a_lesson_exported_to_html_draws_its_picture_with_no_kernel(exported_lessons, widget_front_end, name):
    """`jupyter nbconvert --to html` of a committed lesson (its widget state embedded), opened in Chromium from
    the file with no kernel and no server: the picture renders, its text summary is what distlab computes, and
    its slider, reached with Tab, moves by arrow keys and Home/End to every position the picture can show, each
    time with new pixels and distlab's text for the new position (a picture of one position: no slider shown)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    assert "jupyter nbconvert --to html notebooks/" in (ROOT / "README.md").read_text(encoding="utf-8")  # as here
    page_file = exported_lessons / name.replace(".ipynb", ".html")
    assert "application/vnd.jupyter.widget-state+json" in page_file.read_text(encoding="utf-8")

    namespace: dict = {}
    exec(EXPORTED_LESSONS[name], namespace)  # noqa: S102 - the app as the lesson builds it (a constant above)
    app = namespace["app"]
    model = app.picture
    values = list(getattr(model, "options", None) or range(model.min, model.max + 1))

    def expected(value: int) -> str:
        # a position the layout cannot run at (the lab's 1 node under its tp 4 x pp 4) shows our message, as the
        # picture words it (common.js: "Cannot compute: " and the error)
        model.value = value
        return _squash(f"Cannot compute: {app.error}" if app.error else app.summary())

    refused: list = []
    errors: list = []
    ARTIFACTS.mkdir(exist_ok=True)
    with _chromium(sync_api) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, device_scale_factor=2)
        page.set_default_timeout(30_000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        _serve_front_end(page, widget_front_end, refused)
        try:
            page.goto(page_file.as_uri())
            picture = page.locator(".distlab-picture")
            canvas = picture.locator("canvas")
            try:
                canvas.wait_for(timeout=60_000)
            except sync_api.TimeoutError:
                pytest.fail(f"{name}: no picture in the exported page (requests refused: {refused}; errors: {errors})")
            assert picture.count() == 1
            picture.scroll_into_view_if_needed()
            summary, readout = picture.locator(".distlab-summary"), picture.locator(".distlab-readout")
            slider = picture.locator("input.distlab-slider")
            # drawn: a canvas at the device pixel ratio (2 here) with painted pixels
            width, css, painted = canvas.evaluate(
                """c => [c.width, c.getBoundingClientRect().width,
                         c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some((v, i) => i % 4 == 3 && v)]"""
            )
            assert css >= 100 and width == round(2 * css) and painted, f"{name}: the picture is not drawn"
            # every toggle button shows its whole text (ipywidgets cuts a longer one to "plain ...": issue 19's polish;
            # widgets.common.fit_labels sizes them)
            cut = page.evaluate(
                """() => [...document.querySelectorAll('.widget-toggle-button')]
                        .filter(b => b.scrollWidth > b.clientWidth + 1).map(b => b.textContent.trim())"""
            )
            buttons = page.locator(".widget-toggle-button").count()
            assert not cut, f"{name}: toggle buttons cut off: {cut} ({buttons} buttons)"
            assert summary.get_attribute("aria-live") == "polite" and summary.get_attribute("role") == "status"
            start = int(readout.text_content())
            assert _squash(summary.text_content()) == expected(start), f"{name}: the saved text is not distlab's"
            if len(values) == 1:  # a picture of one position (the triage ladder) shows no slider: nothing to move
                assert not slider.is_visible() and not picture.locator("button.distlab-play").is_visible()
                assert not errors, errors
                assert all("mathjax" in url for url in refused), refused  # as below: nothing else was fetched
                page.screenshot(path=str(ARTIFACTS / f"export-{Path(name).stem}.png"))
                return

            # the keyboard reaches the slider: Tab from the top of the page
            page.locator("body").focus()
            for _ in range(400):
                page.keyboard.press("Tab")
                if slider.evaluate("s => document.activeElement === s"):
                    break
            else:
                pytest.fail(f"{name}: Tab never reached the picture's slider")

            def press(key: str, value: int) -> None:
                before = canvas.evaluate("c => c.toDataURL()")
                page.keyboard.press(key)
                want = expected(value)
                try:
                    _wait_for_text(page, summary, want, 10_000)
                except sync_api.TimeoutError:
                    pytest.fail(
                        f"{name}, {key} to {value}: shows {_squash(summary.text_content())!r}, distlab: {want!r}"
                    )
                assert readout.text_content() == str(value)
                assert canvas.evaluate("c => c.toDataURL()") != before, f"{name}, {key}: the picture did not change"

            k = values.index(start)
            if k + 1 < len(values):
                press("ArrowRight", values[k + 1])
            else:
                press("ArrowLeft", values[k - 1])
            press("End", values[-1])  # the far ends: positions the kernel filled in after the first
            press("Home", values[0])
            assert not errors, errors
            page.screenshot(path=str(ARTIFACTS / f"export-{Path(name).stem}.png"))
        finally:
            browser.close()
    # nothing else was fetched: what the page asked for beyond the front end is MathJax (the lesson's formulas)
    assert all("mathjax" in url for url in refused), refused


def _ladder_variants(frames: dict) -> dict:
    """The triage app's ladder, and ladders its code never sends but a picture must survive: {name: frames}."""
    one = lambda key: frames[key][0]  # noqa: E731 - the one position's list
    n = len(one("bars"))
    long_names = [f"{k} a change with a long name that cannot fit under its bar ({k})" for k in range(12)]
    return {
        "the app's ladder": frames,
        "one bar": {
            **frames,
            **{k: [one(k)[:1]] for k in ("bars", "labels", "faded", "totals", "clipped")},
            "mark": [[[0, "fits"]]],
        },
        "twelve rungs with long names": {
            **frames,
            "bars": [[one("bars")[0]] * 12],
            "labels": long_names,
            "faded": [[k % 3 == 0 for k in range(12)]],
            "totals": [["9.99 TB"] * 12],
            "clipped": [[False] * 12],
            "mark": [[[11, "first fit"]]],
        },
        "a bar a million times the axis": {
            **frames,
            "bars": [[[1e6] + one("bars")[0][1:]] + one("bars")[1:]],
            "clipped": [[True] + one("clipped")[1:]],
        },
        "a mark past the last bar": {**frames, "mark": [[[n + 5, "first fit"]]]},
        "no optional lists, no capacity": {
            "bars": frames["bars"],
            "colours": frames["colours"],
            "unit": "GB",
            "top": 0,
            "capacity": 0,
        },
        "an empty ladder": {**frames, "bars": [[]], "labels": [], "mark": [[]]},
    }


def test_the_triage_ladder_draws_any_ladder_without_an_error():
    """ladder.js, run alone in Chromium on ladders the app never sends (one bar, twelve long names, a bar far over the
    axis, a mark past the last bar, no optional lists, none at all): no error (neither thrown nor caught by the
    picture's paint), and ink on the canvas wherever there is a bar."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab.widgets.browser import module_source
    from distlab.widgets.production import TriageApp

    picture = TriageApp().picture
    state = {name: getattr(picture, name) for name in (
        "description", "disabled", "alt", "playable", "interval_ms", "width", "height", "min", "max", "value",
        "summaries", "errors",
    )}  # fmt: skip
    page_script = """async ([source, state, variants]) => {
        const url = URL.createObjectURL(new Blob([source], {type: "text/javascript"}));
        const picture = (await import(url)).default;
        const drawn = {};
        for (const [name, frames] of Object.entries(variants)) {
            const values = {...state, frames};
            const model = {get: (k) => values[k], set: (k, v) => { values[k] = v; }, save_changes() {},
                           on() {}, off() {}};
            const el = document.createElement("div");
            document.body.appendChild(el);
            picture.render({model, el});
            const canvas = el.querySelector("canvas");
            const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
            let ink = 0;
            for (let k = 3; k < pixels.length; k += 4) if (pixels[k] > 0) ink += 1;
            drawn[name] = ink;
        }
        return drawn;
    }"""
    variants = _ladder_variants(picture.frames)
    messages: list = []
    with _chromium(sync_api) as browser:
        try:
            page = browser.new_page(viewport={"width": 900, "height": 600})
            page.on("pageerror", lambda exc: messages.append(f"thrown: {exc}"))
            page.on("console", lambda msg: messages.append(msg.text) if msg.type == "error" else None)
            page.set_content("<!doctype html><html><body></body></html>")
            drawn = page.evaluate(page_script, [module_source("prefetch.js", "ladder.js"), state, variants])
        finally:
            browser.close()
    assert not messages, messages
    assert set(drawn) == set(variants)
    for name, ink in drawn.items():
        # an empty ladder draws nothing; any other leaves its axis, bars and names on the canvas
        assert (ink == 0) if name == "an empty ladder" else (ink > 2000), (name, ink)


def test_a_picture_at_an_invalid_position_shows_our_message_once_and_no_canvas():
    """Issue 31 ("errors print twice above blank space"): common.js, run in Chromium on the memory wall's picture at a
    custom size of -1 B parameters, hides the canvas and writes our message once where the summary goes; at a valid
    position the canvas is shown again and the summary is the result's."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab.widgets.browser import module_source
    from distlab.widgets.memory_wall import MemoryWallApp

    app = MemoryWallApp(model="llama2-70b")
    valid = app.picture.summary
    app.model.value = "custom size"
    app.custom_params.value = -1.0
    assert app.error and app.shown_texts() == [f"Cannot compute: {app.error}"]

    def state():
        names = ("description", "disabled", "alt", "playable", "interval_ms", "width", "height", "min", "max", "value")
        return {
            **{name: getattr(app.picture, name) for name in names},
            **{name: getattr(app.picture, name) for name in ("options", "summaries", "errors", "frames")},
        }

    invalid_state = state()
    app.model.value = "llama2-70b"
    assert app.error is None and app.picture.summary == valid
    page_script = """async ([source, states]) => {
        const url = URL.createObjectURL(new Blob([source], {type: "text/javascript"}));
        const picture = (await import(url)).default;
        const seen = [];
        for (const values of states) {
            const model = {get: (k) => values[k], set: (k, v) => { values[k] = v; }, save_changes() {},
                           on() {}, off() {}};
            const el = document.createElement("div");
            document.body.appendChild(el);
            picture.render({model, el});
            const canvas = el.querySelector("canvas");
            seen.push({shown: getComputedStyle(canvas).display !== "none" && canvas.offsetHeight > 0,
                       text: el.querySelector(".distlab-summary").textContent, page: el.textContent});
        }
        return seen;
    }"""
    messages: list = []
    with _chromium(sync_api) as browser:
        try:
            page = browser.new_page(viewport={"width": 900, "height": 600})
            page.on("pageerror", lambda exc: messages.append(f"thrown: {exc}"))
            page.set_content("<!doctype html><html><body></body></html>")
            invalid, ok = page.evaluate(
                page_script, [module_source("prefetch.js", "bars.js"), [invalid_state, state()]]
            )
        finally:
            browser.close()
    assert not messages, messages
    message = f"Cannot compute: {invalid_state['errors'][invalid_state['options'].index(invalid_state['value'])]}"
    assert not invalid["shown"] and invalid["text"] == message and invalid["page"].count("Cannot compute") == 1
    # the summary keeps each number with its unit: a no-break space between them (common.js), a space in Python's text
    assert ok["shown"] and ok["text"].replace("\u00a0", " ") == valid and "Cannot compute" not in ok["page"]


def test_keyboard_steps_a_lesson_apps_dropdown_and_toggle_in_jupyterlab(jupyterlab):
    """Every control from the keyboard (issue 32): in JupyterLab, with the settings distlab ships, the training lab
    (lesson 7) is reached with Tab from its first control; ArrowDown and ArrowUp on its sequence dropdown step the
    sequence length (JupyterLab's command-mode shortcuts would take the keys and move the cell cursor instead: the settings
    keep them off controls inside an output), and Space on a TP toggle button picks it; each time the text under the
    picture becomes what distlab computes, and the notebook's cells stay as they were."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab.widgets.training_lab import SEQS, TrainingLabApp

    base, token = jupyterlab
    app = TrainingLabApp()
    start_seq = app.seq_len.value
    next_seq = SEQS[SEQS.index(start_seq) + 1]  # the dropdown lists SEQS in order
    want = {"start": _squash(app.summary())}
    app.seq_len.value = next_seq
    want["sequence"] = _squash(app.summary())
    app.seq_len.value = start_seq
    app.tp.value = 8
    want["tp"] = _squash(app.summary())
    assert len(set(want.values())) == 3, "the three states must read differently for the test to see a change"
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# keyboard"),
        nbformat.v4.new_code_cell("from distlab.widgets.training_lab import TrainingLabApp\nTrainingLabApp()"),
        nbformat.v4.new_markdown_cell("the end"),
    ]
    _upload_notebook(base, token, "keyboard.ipynb", nb)
    ARTIFACTS.mkdir(exist_ok=True)
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/keyboard.ipynb?token={token}")
            summary = page.locator(".distlab-picture .distlab-summary")
            summary.wait_for(timeout=90_000)
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)

            def shows(key: str) -> None:
                try:
                    _wait_for_text(page, summary, want[key], 30_000)
                except sync_api.TimeoutError:
                    pytest.fail(f"after {key}: shows {_squash(summary.text_content())!r}, distlab: {want[key]!r}")

            shows("start")
            cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
            active = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-mod-active"
            assert cells.count() == 3
            dropdowns = page.locator(".widget-dropdown select")
            model, sequence = (
                dropdowns.nth(0),
                page.locator(
                    ".widget-dropdown", has=page.locator(".widget-label", has_text=re.compile(r"^sequence$"))
                ).locator("select"),
            )
            # a click on the model dropdown's label focuses the dropdown (without opening it), then Tab moves on
            page.locator(".widget-dropdown .widget-label", has_text=re.compile(r"^model$")).click()
            assert model.evaluate("s => document.activeElement === s"), "the label did not focus the model dropdown"
            for _ in range(10):  # on to the sequence dropdown (model, node, fabric, batch, sequence)
                if sequence.evaluate("s => document.activeElement === s"):
                    break
                page.keyboard.press("Tab")
            else:
                pytest.fail("Tab never reached the sequence dropdown")
            cell_before = page.locator(active).evaluate("c => [...c.parentNode.children].indexOf(c)")
            page.keyboard.press("ArrowDown")
            shown = lambda: sequence.evaluate("s => s.options[s.selectedIndex].text")  # noqa: E731
            assert shown() == str(next_seq), f"ArrowDown left the sequence at {shown()}"
            shows("sequence")
            assert sequence.evaluate("s => document.activeElement === s"), "the dropdown lost the focus"
            page.keyboard.press("ArrowUp")
            assert shown() == str(start_seq)
            shows("start")
            # letters are the dropdown's too (it jumps to an option by its first letter): X would cut the cell, D D
            # delete it, A add one above; no option starts with them, so nothing changes
            for key in ("x", "d", "d", "a"):
                page.keyboard.press(key)
            assert shown() == str(start_seq)
            # the notebook did not move its cursor, add, cut or change a cell meanwhile
            assert page.locator(active).evaluate("c => [...c.parentNode.children].indexOf(c)") == cell_before
            assert cells.count() == 3
            # Tab on to the TP toggle's "8" and press it with Space
            eight = page.locator(
                ".widget-toggle-buttons", has=page.locator(".widget-label", has_text=re.compile(r"^TP$"))
            ).get_by_role("button", name="8", exact=True)
            for _ in range(20):
                if eight.evaluate("b => document.activeElement === b"):
                    break
                page.keyboard.press("Tab")
            else:
                pytest.fail("Tab never reached the TP toggle's 8")
            page.keyboard.press("Space")
            shows("tp")
            assert "mod-active" in (eight.get_attribute("class") or "")
            assert cells.count() == 3 and page.get_by_text("Error displaying widget").count() == 0
            # the notebook's own keys still work off the outputs: on the first cell, ArrowDown moves to the next
            cells.first.click()
            page.wait_for_function("c => c.classList.contains('jp-mod-active')", arg=cells.first.element_handle())
            page.keyboard.press("ArrowDown")
            page.wait_for_function("c => c.classList.contains('jp-mod-active')", arg=cells.nth(1).element_handle())
        finally:
            page.screenshot(path=str(ARTIFACTS / "browser-keyboard.png"), full_page=False)
            browser.close()


def test_keyboard_moves_an_ipywidgets_slider_of_a_lesson_app_in_jupyterlab(jupyterlab):
    """Sliders from the keyboard too (issue 32): lesson 2's ring app in JupyterLab, its GPU-count slider (ipywidgets'
    handle) focused; ArrowRight and ArrowUp each add one GPU, ArrowDown takes one off (ArrowUp/ArrowDown are also
    JupyterLab's command-mode keys), and the text under the picture is distlab's for each count."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab.widgets.collectives import RingAllReduceApp

    base, token = jupyterlab
    app = RingAllReduceApp(gpus=4, size="4 GB", link="nvlink4")
    want = {}
    for n in (4, 5, 6):
        app.gpus.value = n
        want[n] = _squash(app.summary())
    assert len(set(want.values())) == 3
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            'from distlab.widgets.collectives import RingAllReduceApp\nRingAllReduceApp(gpus=4, size="4 GB", '
            'link="nvlink4")'
        ),
        nbformat.v4.new_markdown_cell("the end"),
    ]
    _upload_notebook(base, token, "keyboard-slider.ipynb", nb)
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/keyboard-slider.ipynb?token={token}")
            summary = page.locator(".distlab-picture .distlab-summary")
            summary.wait_for(timeout=90_000)
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)
            cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
            assert cells.count() == 2
            slider = page.locator(".widget-slider", has=page.locator(".widget-label", has_text="GPUs (N)"))
            handle = slider.locator("[role=slider], .noUi-handle").first
            readout = slider.locator(".widget-readout")

            def shows(n: int) -> None:
                try:
                    _wait_for_text(page, summary, want[n], 30_000)
                except sync_api.TimeoutError:
                    pytest.fail(f"at {n} GPUs: shows {_squash(summary.text_content())!r}, distlab: {want[n]!r}")
                assert readout.text_content().strip() == str(n)

            shows(4)
            handle.focus()
            for key, n in (("ArrowRight", 5), ("ArrowUp", 6), ("ArrowDown", 5)):
                page.keyboard.press(key)
                shows(n)
                assert handle.evaluate("h => document.activeElement === h"), f"{key}: the slider lost the focus"
            assert cells.count() == 2 and page.get_by_text("Error displaying widget").count() == 0
        finally:
            page.screenshot(path=str(ARTIFACTS / "browser-keyboard-slider.png"), full_page=False)
            browser.close()


def test_a_prefetched_change_of_the_training_lab_redraws_with_no_kernel(jupyterlab):
    """Every control answered in the browser (issue 32): once the kernel has prefetched the training lab's states one
    control change away (the picture counts them in data-prefetched), the kernel is shut down; picking the next sequence
    length in its dropdown then redraws the canvas and writes the text distlab computes for it, from the browser's
    cache alone (no kernel to ask)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    import nbformat

    from distlab.widgets.training_lab import TrainingLabApp

    app = TrainingLabApp()
    neighbours = len(app.neighbour_jobs())
    before = _squash(app.summary())
    app.seq_len.value = 16384  # 8192's neighbour in SEQS
    want = _squash(app.summary())
    assert want != before
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from distlab.widgets.training_lab import TrainingLabApp\nTrainingLabApp()")]
    base, token = jupyterlab
    _upload_notebook(base, token, "prefetch.ipynb", nb)
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/prefetch.ipynb?token={token}")
            holder = page.locator("[data-prefetched]")
            holder.wait_for(timeout=90_000)
            _wait_filled(page, holder, neighbours)
            summary = page.locator(".distlab-picture .distlab-summary")
            assert _squash(summary.text_content() or "") == before
            canvas = page.locator(".distlab-picture canvas")
            pixels = canvas.evaluate("c => c.toDataURL()")
            _shut_down_kernel(page)
            page.locator(".widget-dropdown", has_text="sequence").locator("select").select_option("16384")
            _wait_for_text(page, summary, want, 10_000)
            assert holder.get_attribute("data-drawn-from") == "cache"
            assert canvas.evaluate("c => c.toDataURL()") != pixels
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "browser-prefetch.png"), full_page=False)
            browser.close()


#: The apps whose cached change is checked with no kernel (issue 32): (the cell that builds the app, the dropdown or
#: toggle changed: its description and the option picked); _app_for builds the same app here for distlab's text.
#: The ring's link changes its text, not its drawing (the canvas is checked for the others). Lesson 4's grid: from
#: interleaved its schedule toggle's neighbour ZB-H1 splits the backward into B and W, so the legend the picture
#: draws from the cached payload must then name W (it did not before), and its chunks slider (interleaved only) be
#: disabled by the browser (the payload carries the controls' disabled states; the kernel used to apply it).
SAME_CANVAS = ("ring",)
CACHED_CHANGES = {
    "memory wall": (
        'from distlab.widgets.memory_wall import MemoryWallApp\nMemoryWallApp(model="llama2-7b", gpus=8, zero=0)',
        ("precision", "fp32"),
    ),
    "triage ladder": ("from distlab.widgets.production import TriageApp\nTriageApp()", ("sequence", "16384")),
    "ring": (
        'from distlab.widgets.collectives import RingAllReduceApp\nRingAllReduceApp(gpus=8, size="4 GB", link="nvlink4")',
        ("link", "nvlink5"),
    ),
    "bubble grid": (
        'from distlab.widgets.pipeline import BubbleGridApp\nBubbleGridApp(kind="interleaved", stages=4, microbatches=8)',
        ("schedule", "zb-h1"),
    ),
}


def _app_for(name: str):
    """The app of CACHED_CHANGES[name], built as its cell builds it."""
    from distlab.widgets.collectives import RingAllReduceApp
    from distlab.widgets.memory_wall import MemoryWallApp
    from distlab.widgets.pipeline import BubbleGridApp
    from distlab.widgets.production import TriageApp

    if name == "bubble grid":
        return BubbleGridApp(kind="interleaved", stages=4, microbatches=8)
    if name == "ring":
        return RingAllReduceApp(gpus=8, size="4 GB", link="nvlink4")
    return MemoryWallApp(model="llama2-7b", gpus=8, zero=0) if name == "memory wall" else TriageApp()


@pytest.mark.parametrize("name", sorted(CACHED_CHANGES))
def test_a_prefetched_change_of_a_lesson_app_redraws_with_no_kernel(jupyterlab, name):
    """Every control answered in the browser (issue 32), for lesson 1's memory wall, lesson 2's ring, lesson 4's
    bubble grid and lesson 8b's triage ladder: once the kernel has prefetched the states one control change away (the picture counts them in
    data-prefetched), the kernel is shut down; picking a neighbouring option of a dropdown (a toggle) then redraws the picture
    (the canvas too where it changes: a new link changes only the ring's text) and writes the text distlab computes
    for it, from the browser's cache alone (no kernel to ask)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

    from distlab.widgets.common import neighbour_values

    cell, (label, option) = CACHED_CHANGES[name]
    app = _app_for(name)
    keyed = [getattr(app, c) for c in getattr(app, "prepared_controls", ())] or list(app.picture.controls)
    neighbours = sum(len(neighbour_values(w)) for w in keyed)
    before = _squash(app.summary())
    control = next(w for w in keyed if w.description == label)
    control.value = next(v for v in neighbour_values(control) if str(v) == option)
    want = _squash(app.summary())
    assert want != before
    notebook = f"prefetch-{name.replace(' ', '-')}.ipynb"
    with _notebook_page(
        jupyterlab, sync_api, notebook, [cell], f"browser-prefetch-{name.replace(' ', '-')}.png"
    ) as page:
        holder = page.locator("[data-prefetched]")
        holder.wait_for(timeout=90_000)
        _wait_filled(page, holder, neighbours)
        summary = page.locator(".distlab-picture .distlab-summary")
        assert _squash(summary.text_content() or "") == before
        canvas = page.locator(".distlab-picture canvas")
        pixels = canvas.evaluate("c => c.toDataURL()")
        chunks = page.locator(".widget-slider", has=page.locator(".widget-label", has_text=re.compile("^chunks v$")))
        if name == "bubble grid":  # interleaved: the chunks slider enabled
            assert chunks.locator("[disabled]").count() == 0
        _shut_down_kernel(page)
        _choose(page, label, option, toggles=type(control).__name__ == "ToggleButtons")
        _wait_for_text(page, summary, want, 10_000)
        assert holder.get_attribute("data-drawn-from") == "cache"
        assert (canvas.evaluate("c => c.toDataURL()") == pixels) == (name in SAME_CANVAS)
        if name == "bubble grid":  # the legend, drawn from the same cached payload, now names W
            assert "weight gradient (W)" in (page.locator(".distlab-legend").text_content() or "")
            # and the chunks slider (interleaved only) is disabled by the browser itself: the kernel is shut down
            page.wait_for_function("el => el.querySelector('[disabled]') !== null", arg=chunks.element_handle())


#: The matplotlib-drawn apps whose cached change is checked with no kernel (issue 32: distlab.widgets.framecache):
#: (the cell that builds the app, the control changed: its description and the option picked). Lesson 5's link from
#: InfiniBand NDR to PCIe 5 (inside a node of 8 GPUs) at tp = 32 moves the TP degree to 8 (tensor_parallel.tp_after):
#: the browser finds that change under the labels it shows before the kernel re-offers TP (still "32").
FRAME_CACHED_CHANGES = {
    "overlap": ("from distlab.widgets.data_parallel_zero import OverlapApp\nOverlapApp()", ("fabric", "ib-xdr")),
    "buckets": ("from distlab.widgets.production import BucketApp\nBucketApp()", ("all-reduce", "ring")),
    "tensor-parallel": (
        'from distlab.widgets.tensor_parallel import TensorParallelApp\nTensorParallelApp(tp=32, link="ib-ndr")',
        ("link", "pcie5"),
    ),
    # at a NARROW_WINDOW_PX window, where the output scales the figure down (framecache.FITS_CSS): the cached frame
    # must scale with it
    "buckets-narrow": ("from distlab.widgets.production import BucketApp\nBucketApp()", ("all-reduce", "ring")),
}


def _frame_app_for(name: str):
    """The app the cell of FRAME_CACHED_CHANGES[name] builds, here in the test's process."""
    namespace: dict = {}
    *lines, last = FRAME_CACHED_CHANGES[name][0].split("\n")
    exec("\n".join(lines), namespace)
    return eval(last, namespace)


def _text_content(html_text: str) -> str:
    """What the browser's textContent of this HTML reads (no text for a tag, <br> included), spaces squashed."""
    import html

    return _squash(html.unescape(re.sub(r"<[^>]+>", "", html_text)))


def _png_pixels(data: bytes):
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


@pytest.mark.parametrize("name", sorted(FRAME_CACHED_CHANGES))
def test_a_cached_change_of_a_matplotlib_app_redraws_with_no_kernel(jupyterlab, name):
    """Every control answered in the browser (issue 32), for the apps matplotlib draws: once the kernel has sent the
    pictures of the states one control change away (the frame cache counts them in data-prefetched), the kernel is
    shut down; picking a neighbouring option then shows, over the canvas, exactly the picture the kernel paints for
    that state (pixels compared with the payload computed here) and the status text distlab writes for it, from the
    browser's cache alone (no kernel to ask)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    import base64

    import numpy as np

    from distlab.widgets.filling import attempt
    from distlab.widgets.prefetch import neighbour_jobs

    cell, (label, option) = FRAME_CACHED_CHANGES[name]
    app = _frame_app_for(name)
    jobs = neighbour_jobs(app._frame_widgets(), app.frame_state(), neighbour=app.frame_neighbour)
    before = _text_content(app.status.value)
    (moved,) = [n for n in app.frame_controls() if getattr(app, n).description == label]
    state = app.frame_neighbour(app.frame_state(), moved, option)  # what the kernel reaches (TP moved, lesson 5)
    payload = app.frame_payload(state, attempt(app.compute_for, state))
    getattr(app, moved).value = option
    assert app.frame_state() == state
    want = _text_content(app.status.value)
    assert want == _text_content(payload["texts"][0])
    assert want != before and payload["shown"]
    notebook = f"framecache-{name}.ipynb"
    width = NARROW_WINDOW_PX if name.endswith("-narrow") else 1400
    with _notebook_page(jupyterlab, sync_api, notebook, [cell], f"browser-framecache-{name}.png", width=width) as page:
        holder = page.locator(".distlab-framecache")
        holder.wait_for(state="attached", timeout=90_000)
        _wait_filled(page, holder, len(jobs))
        source = re.search(r"\[[a-z_.]+\]", before).group(0)  # the function the status names
        status = page.locator(".widget-html-content").filter(has_text=source).last
        assert _squash(status.text_content() or "") == before
        _shut_down_kernel(page)
        _choose(page, label, option, toggles=type(getattr(app, moved)).__name__ == "ToggleButtons")
        _wait_for_text(page, status, want, 10_000)
        assert holder.get_attribute("data-drawn-from") == "cache"
        assert holder.get_attribute("data-cache-hits") == "1"
        frame = page.locator("canvas.distlab-frame")
        page.wait_for_function("c => c.width > 0 && c.style.display !== 'none'", arg=frame.element_handle())
        shown = frame.evaluate("c => c.toDataURL('image/png')").split(",", 1)[1]
        assert np.array_equal(_png_pixels(base64.b64decode(shown)), _png_pixels(payload["png"]))
        # and laid exactly over ipympl's canvas, at whatever size the output scales it to (framecache.FITS_CSS)
        boxes = frame.evaluate(
            """c => [c, c.parentElement.querySelector('canvas:not(.distlab-frame)')].map(e => {
              const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })"""
        )
        assert boxes[0] == pytest.approx(boxes[1], abs=1), boxes
        if name.endswith("-narrow"):  # the figure (7.6 inches at 100 dpi) was scaled down to the output
            assert boxes[1][2] < 700, boxes


def _wait_settled(page, holder, n: int) -> None:
    """Wait until the kernel has stopped starting new fills (data-fill unchanged for 1.5 s) and the browser holds at
    least `n` states of the current neighbourhood."""
    last = None
    for _ in range(60):
        fill = holder.get_attribute("data-fill")
        if fill == last and int(holder.get_attribute("data-prefetched") or 0) >= n:
            return
        last = fill
        page.wait_for_timeout(1500)
    raise AssertionError(f"the kernel kept refilling (fill {last})")


def test_a_keyboard_step_of_each_log_slider_is_answered_from_the_frame_cache(jupyterlab):
    """Lesson 11's checkpoint app (issue 32): its failure-rate and storage sliders are FloatLogSliders, whose values the
    browser's noUiSlider computes in its own float arithmetic (on display it already moves each to its nearest step,
    and the kernel follows); keyed by their step positions, an ArrowRight on each, once the kernel has refilled, is
    drawn from the frame cache (its hit counter grows, data-drawn-from says cache) with a new status text, the text the
    kernel then writes itself when it has drawn that state."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

    from distlab.widgets.prefetch import neighbour_jobs
    from distlab.widgets.training_at_scale import CheckpointApp

    app = CheckpointApp()
    jobs = neighbour_jobs(app._frame_widgets(), app.frame_state(), neighbour=app.frame_neighbour)
    source = re.search(r"\[[a-z_.]+\]", _text_content(app.status.value)).group(0)  # the function the status names
    cell = "from distlab.widgets.training_at_scale import CheckpointApp\nCheckpointApp()"
    with _notebook_page(jupyterlab, sync_api, "framecache-log.ipynb", [cell], "browser-framecache-log.png") as page:
        holder = page.locator(".distlab-framecache")
        holder.wait_for(state="attached", timeout=90_000)
        status = page.locator(".widget-html-content").filter(has_text=source).last
        for hits, description in enumerate(("fail/GPU-h", "storage TB/s"), start=1):
            _wait_settled(page, holder, len(jobs))  # 10 neighbours at every state this test visits
            before = _squash(status.text_content() or "")
            named = page.locator(".widget-label", has_text=re.compile(f"^{re.escape(description)}$"))
            page.locator(".widget-slider", has=named).locator(".noUi-handle").first.focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_function(
                "([el, n]) => Number(el.getAttribute('data-cache-hits')) >= n",
                arg=[holder.element_handle(), hits],
                timeout=10_000,
            )
            assert holder.get_attribute("data-drawn-from") == "cache"
            cached = _squash(status.text_content() or "")
            assert cached != before
            # the kernel's own text once it has drawn that state (the overlay then goes): the same
            page.wait_for_function("el => !el.hasAttribute('data-overlay')", arg=holder.element_handle())
            assert _squash(status.text_content() or "") == cached


#: The held key checked with the kernel paused (issue 32): (the cell that builds the app, the ipywidgets slider pressed):
#: lesson 2's ring (a browser picture: its GPU count N, 8 -> 9 -> 10 -> 11, each a new simulation) and lesson 3's
#: overlap (a frame-cached app: its bucket count, 4 -> 5 -> 6 -> 7).
HELD_KEYS = {
    "ring": (
        'from distlab.widgets.collectives import RingAllReduceApp\nRingAllReduceApp(gpus=8, size="4 GB", link="nvlink4")',
        "GPUs (N)",
    ),
    "overlap": ("from distlab.widgets.data_parallel_zero import OverlapApp\nOverlapApp()", "buckets"),
}


def _held_key_app(name: str):
    """(the app of HELD_KEYS[name] built here, the fill's jobs from its state, its slider, the text the page shows)."""
    from distlab.widgets.collectives import RING_CONTROLS, RingAllReduceApp, ring_neighbour
    from distlab.widgets.data_parallel_zero import OverlapApp
    from distlab.widgets.prefetch import neighbour_jobs

    if name == "ring":
        app = RingAllReduceApp(gpus=8, size="4 GB", link="nvlink4")
        controls = {n: getattr(app, n) for n in RING_CONTROLS}
        jobs = neighbour_jobs(controls, app.state(), neighbour=ring_neighbour)
        return app, jobs, app.gpus, lambda: _squash(app.summary())
    app = OverlapApp()
    jobs = neighbour_jobs(app._frame_widgets(), app.frame_state(), neighbour=app.frame_neighbour, marked=True)
    return app, jobs, app.buckets, lambda: _text_content(app.status.value)


def _paused_press_setup(page, holder, description):
    """(the kernel's process id, printed by the notebook's first cell; the cache-hit count of `holder` now), with the
    slider labelled `description` focused: what a test needs before it pauses the kernel and presses keys."""
    pid = int(page.locator(".jp-Cell").first.locator(".jp-OutputArea-output").text_content().strip())
    named = page.locator(".widget-label", has_text=re.compile(f"^{re.escape(description)}$"))
    page.locator(".widget-slider", has=named).locator(".noUi-handle").first.focus()
    return pid, int(holder.get_attribute("data-cache-hits") or 0)


def _wait_for_hits(page, holder, n):
    """Wait (5 s at most) until `holder` has drawn n changes from the browser's cache in all."""
    page.wait_for_function(
        "([el, n]) => Number(el.getAttribute('data-cache-hits')) >= n", arg=[holder.element_handle(), n], timeout=5_000
    )


@pytest.mark.parametrize("name", sorted(HELD_KEYS))
def test_three_presses_of_a_held_key_are_answered_from_the_cache_with_the_kernel_paused(jupyterlab, name):
    """A held arrow key (issue 32: a press every 30 ms, faster than the round trip, so the browser's map of the
    neighbourhood is behind): once the kernel has filled the neighbourhood of the state shown (three steps along each
    control: prefetch.REACH), the kernel's process is paused (SIGSTOP: no reply at all, the longest delay there is)
    and ArrowRight is pressed three times 30 ms apart on one of the app's sliders; all three are drawn from the
    browser's cache (its hit counter reads 3) and the text shown is the one distlab computes three steps on (here, by
    the app's own code moving the slider three times). Once the kernel runs again it draws that same state."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

    cell, description = HELD_KEYS[name]
    app, jobs, slider, text = _held_key_app(name)
    wants = []
    for _ in range(3):
        slider.value += slider.step
        wants.append(text())
    assert len(set(wants)) == 3, wants  # each press shows a new text
    cells = ["import os\nos.getpid()", cell]
    with _notebook_page(jupyterlab, sync_api, f"held-key-{name}.ipynb", cells, f"browser-held-key-{name}.png") as page:
        holder = page.locator(".distlab-framecache" if name == "overlap" else "[data-prefetched]").first
        holder.wait_for(state="attached", timeout=90_000)
        _wait_settled(page, holder, len(jobs))
        if name == "overlap":
            source = re.search(r"\[[a-z_.]+\]", wants[0]).group(0)  # the function the status names
            shown = page.locator(".widget-html-content").filter(has_text=source).last
        else:
            shown = page.locator(".distlab-picture .distlab-summary")
        pid, hits = _paused_press_setup(page, holder, description)
        os.kill(pid, signal.SIGSTOP)
        try:
            for _ in range(3):
                page.keyboard.press("ArrowRight")
                page.wait_for_timeout(30)
            _wait_for_hits(page, holder, hits + 3)
            _wait_for_text(page, shown, wants[-1], 5_000)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert holder.get_attribute("data-drawn-from") == "cache"
        # the kernel, running again, draws the same state (for the frame cache: its overlay then goes)
        if name == "overlap":
            page.wait_for_function(
                "el => !el.hasAttribute('data-overlay')", arg=holder.element_handle(), timeout=30_000
            )
        page.wait_for_timeout(1000)
        assert _squash(shown.text_content() or "") == wants[-1]
    app.close()


def test_a_turn_back_to_the_state_shown_is_answered_from_the_cache_with_the_kernel_paused(jupyterlab):
    """A second change during the refill (issue 32): a -> b -> a, faster than the kernel's next map. Once the kernel
    has filled the neighbourhood of the state shown, its process is paused (SIGSTOP) and lesson 3's buckets slider
    is pressed right, then left: both are drawn from the browser's cache (the turn back from the base's own payload,
    the step there moved no other control: prefetch.home_keys) and the text is the state's own again. Once the
    kernel runs again (it has the two changes to catch up with: each map names the count it has seen) it answers the
    press right before the press left, and that late answer's text is never shown (a page observer of the status
    panel), and a further press right is drawn from the cache too."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

    cell, description = HELD_KEYS["overlap"]
    app, jobs, slider, text = _held_key_app("overlap")
    start = text()
    slider.value += slider.step
    right = text()
    assert right != start  # the press right shows a new text
    cells = ["import os\nos.getpid()", cell]
    with _notebook_page(jupyterlab, sync_api, "turn-back.ipynb", cells, "browser-turn-back.png") as page:
        holder = page.locator(".distlab-framecache").first
        holder.wait_for(state="attached", timeout=90_000)
        _wait_settled(page, holder, len(jobs))
        source = re.search(r"\[[a-z_.]+\]", start).group(0)  # the function the status names
        shown = page.locator(".widget-html-content").filter(has_text=source).last
        pid, hits = _paused_press_setup(page, holder, description)
        os.kill(pid, signal.SIGSTOP)
        try:
            for key in ("ArrowRight", "ArrowLeft"):
                page.keyboard.press(key)
                page.wait_for_timeout(100)
            _wait_for_hits(page, holder, hits + 2)
            _wait_for_text(page, shown, start, 5_000)
            shown.evaluate(TEXT_LOG)
        finally:
            os.kill(pid, signal.SIGCONT)
        page.wait_for_function("el => !el.hasAttribute('data-overlay')", arg=holder.element_handle(), timeout=30_000)
        _wait_settled(page, holder, len(jobs))
        assert _squash(shown.text_content() or "") == start
        # the kernel's late answer for the state to the right is never shown over the turn back (a page observer of
        # every text of the status panel from the moment the turn back was drawn: framecache.js keeps the overlay's
        # texts until the overlay goes; before, the right-hand state's text came back for 100-200 ms)
        texts = page.evaluate("window.__texts")
        assert right not in texts, texts
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "([el, n]) => Number(el.getAttribute('data-cache-hits')) >= n",
            arg=[holder.element_handle(), hits + 3],
            timeout=5_000,
        )
    app.close()


def test_a_cached_change_of_the_grid_shows_the_warnings_of_its_new_layout(jupyterlab):
    """Issue 31 (screenshots of lesson 6's grid after a change drawn from the browser's cache, issue 32): the grid and
    its text followed the change at once, but the layout's warnings, written by the kernel under the picture, did not
    (with the kernel busy or gone, none at all). With tp=8 on nodes of 8 GPUs there is no warning; GPUs/node 4, a
    neighbouring option, puts each TP group of 8 across two nodes of 4: distlab's warning (mesh.RankLayout.warnings)
    must be shown with the new grid, with no kernel to ask."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    import nbformat

    from distlab import mesh
    from distlab.widgets.parallelism_3d import MESH_CONTROLS, MeshApp
    from distlab.widgets.common import neighbour_values

    app = MeshApp(dp=2, tp=8, pp=2, gpus_per_node=8)
    assert mesh.layout(dp=2, tp=8, pp=2, gpus_per_node=8).warnings() == []
    neighbours = sum(len(neighbour_values(getattr(app, n))) for n in MESH_CONTROLS)
    warning = mesh.layout(dp=2, tp=8, pp=2, gpus_per_node=4).warnings()[0]
    assert warning.startswith("TP leaves the node")
    app.gpus_per_node.value = 4
    want = _squash(app.picture.summary)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from distlab.widgets.parallelism_3d import MeshApp\nMeshApp(dp=2, tp=8, pp=2, gpus_per_node=8)"
        )
    ]
    base, token = jupyterlab
    _upload_notebook(base, token, "prefetch-grid-warning.ipynb", nb)
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        try:
            _open_and_run_all(page, f"{base}/lab/tree/prefetch-grid-warning.ipynb?token={token}")
            holder = page.locator("[data-prefetched]")
            holder.wait_for(timeout=90_000)
            _wait_filled(page, holder, neighbours)
            output = page.locator(".jp-OutputArea-output").first
            assert "TP leaves the node" not in output.inner_text()
            _shut_down_kernel(page)
            dropdown = page.locator(".widget-dropdown", has=page.locator(".widget-label", has_text="GPUs/node"))
            dropdown.locator("select").select_option(label="4")
            summary = page.locator(".distlab-picture .distlab-summary")
            _wait_for_text(page, summary, want, 10_000)
            assert holder.get_attribute("data-drawn-from") == "cache"
            page.wait_for_timeout(500)
            assert _squash("warning: " + warning) in _squash(output.inner_text())
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "browser-prefetch-grid-warning.png"), full_page=False)
            browser.close()


def test_the_triage_ladder_hides_its_legend_with_its_bars_at_our_message():
    """Issue 31 (screenshot of lesson 8b's triage at tp 8 x pp 8 on 4 nodes): the ladder's legend, an HTML widget
    outside the picture, stayed above "Cannot compute: ..." with no bars under it, also when the browser drew that
    state from its cache. ladder.js, run in Chromium on the app's two states, shows the legend above the bars of a
    valid ladder and neither the bars nor the legend at our message."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    from distlab.widgets.browser import module_source
    from distlab.widgets.production import TriageApp

    names = ("description", "disabled", "alt", "playable", "interval_ms", "width", "height", "min", "max", "value")
    names += ("options", "summaries", "errors", "frames", "legend")

    def state(app):
        return {name: getattr(app.picture, name, None) for name in names}

    valid = state(TriageApp())
    # built in the state (its controls no longer offer pp 8 at 4 nodes: review v21)
    app = TriageApp(tp=8, nodes=4, pp=8)
    assert app.error and "tp x pp = 8 x 8 = 64" in app.error
    invalid = state(app)
    page_script = """async ([source, states]) => {
        const url = URL.createObjectURL(new Blob([source], {type: "text/javascript"}));
        const picture = (await import(url)).default;
        const seen = [];
        for (const values of states) {
            const model = {get: (k) => values[k], set: (k, v) => { values[k] = v; }, save_changes() {},
                           on() {}, off() {}};
            const el = document.createElement("div");
            document.body.appendChild(el);
            picture.render({model, el});
            const canvas = el.querySelector("canvas");
            seen.push({shown: getComputedStyle(canvas).display !== "none" && canvas.offsetHeight > 0,
                       page: el.innerText});
        }
        return seen;
    }"""
    messages: list = []
    with _chromium(sync_api) as browser:
        try:
            page = browser.new_page(viewport={"width": 900, "height": 600})
            page.on("pageerror", lambda exc: messages.append(f"thrown: {exc}"))
            page.set_content("<!doctype html><html><body></body></html>")
            ok, bad = page.evaluate(page_script, [module_source("prefetch.js", "ladder.js"), [valid, invalid]])
        finally:
            browser.close()
    assert not messages, messages
    legend = ("optimizer states", "bars: the given configuration")
    assert ok["shown"] and all(text in ok["page"] for text in legend)
    assert not bad["shown"] and bad["page"].count("Cannot compute") == 1
    assert not any(text in bad["page"] for text in legend)
    # and the app shows no legend of its own outside the picture
    assert not any("optimizer states" in w.value for w in app.children if isinstance(getattr(w, "value", 0), str))


#: The kinds of control the lesson apps use that the tests above do not drive from the keyboard (the dropdown and toggle
#: test, the IntSlider test); tests/widgets/test_keyboard_kinds.py checks that every control of every app is of a kind
#: some browser test drives.
KEYBOARD_CELLS = [
    "from distlab.widgets.tensor_parallel import TensorParallelApp\nTensorParallelApp()",
    "from distlab.widgets.training_at_scale import CheckpointApp\nCheckpointApp()",
    "from distlab.widgets.pipeline import StageAnalysisApp\nStageAnalysisApp()",
]


def test_keyboard_drives_every_other_kind_of_control_in_jupyterlab(jupyterlab):
    """Every control from the keyboard (issue 32), the kinds the tests above do not press: a SelectionSlider (lesson
    5's hidden size: ArrowRight), a Checkbox (lesson 5's sequence parallelism: Space), a FloatSlider (lesson 11's
    restart minutes, lesson 4's max bubble: ArrowRight adds one step), a FloatLogSlider (lesson 11's storage: ArrowRight
    one step of its exponent) and a number box (lesson 4's layer time: typed, Enter). After each, the text distlab
    writes under the picture is what the app computes for the new value here (built the same way in this process).
    Lesson 4's max bubble is stepped right after the typed layer time, while the kernel paints that state's
    neighbours: JupyterLab runs the change in a kernel subshell's thread (filling.APP_LOCK), and in about 1 run in 5
    the status showed a neighbour's text before the lock."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    import math

    from distlab.widgets.pipeline import StageAnalysisApp
    from distlab.widgets.training_at_scale import CheckpointApp
    from distlab.widgets.tensor_parallel import TensorParallelApp

    tp, ckpt, stage = TensorParallelApp(), CheckpointApp(), StageAnalysisApp()

    def snap(slider) -> None:
        # the browser's log slider puts its value on its exponent grid (min + k step) when it is drawn and sends that
        # back: the kernel's app then computes for it (lesson 11's default 1.97e-5 failures per GPU-hour shows 2e-05)
        k = round((math.log10(slider.value) - slider.min) / slider.step)
        slider.value = 10 ** (slider.min + k * slider.step)

    texts = lambda app: [t for t in (_squash(s) for s in app.shown_texts()) if t]  # noqa: E731
    steps = []  # (what to press, the app, its text after)

    def expect(label, press, app, change):
        change(app)
        steps.append((label, press, texts(app)))

    hidden = list(tp.hidden.options)
    expect("hidden h", "ArrowRight", tp, lambda a: setattr(a.hidden, "value", hidden[hidden.index(a.hidden.value) + 1]))
    expect("sequence parallelism", "Space", tp, lambda a: setattr(a.sequence_parallel, "value", True))
    snap(ckpt.rate)
    snap(ckpt.storage)
    expect("restart min", "ArrowRight", ckpt, lambda a: setattr(a.restart, "value", a.restart.value + a.restart.step))
    # one step of the exponent (noUiSlider's keyboard step), from the grid value the browser holds
    after = CheckpointApp()
    snap(after.rate)
    after.restart.value = ckpt.restart.value
    after.storage.value = 10 ** (math.log10(ckpt.storage.value) + ckpt.storage.step)
    log_candidates = [texts(after)]
    typed = 2.5 if stage.layer_time.value != 2.5 else 3.5
    expect("layer F (ms)", "type", stage, lambda a: setattr(a.layer_time, "value", typed))
    expect("max bubble %", "ArrowRight", stage, lambda a: setattr(a.max_bubble, "value", a.max_bubble.value + 1.0))
    with _notebook_page(
        jupyterlab, sync_api, "keyboard-kinds.ipynb", KEYBOARD_CELLS, "browser-keyboard-kinds.png", height=2400
    ) as page:
        page.locator(".widget-label", has_text="layer F (ms)").wait_for(timeout=90_000)
        page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=60_000)

        def shows(options: list, what: str) -> None:
            # every text of one of `options` is shown in some HTML widget of the page
            try:
                page.wait_for_function(
                    """options => {
                        const shown = new Set([...document.querySelectorAll('.widget-html-content')]
                            .filter(el => el.offsetParent !== null)
                            .map(el => el.innerText.split(/\\s+/).join(' ').trim()));
                        return options.some(texts => texts.every(t => shown.has(t)));
                    }""",
                    arg=options,
                    timeout=30_000,
                )
            except sync_api.TimeoutError:
                pytest.fail(f"after {what}: the page does not show distlab's text {options[0]!r}")

        def control(label: str):
            return page.locator(
                ".widget-inline-hbox",
                has=page.locator(".widget-label", has_text=re.compile(f"^{re.escape(label)}$")),
            ).first

        for label, press, want in steps[:3]:
            box = control(label)
            if press == "Space":  # ipywidgets writes a checkbox's description beside its box, not in its label
                target = page.get_by_role("checkbox", name=label)
            else:
                target = box.locator("[role=slider], .noUi-handle").first
            target.focus()
            page.keyboard.press(press)
            shows([want], f"{press} on {label!r}")
            assert target.evaluate("el => document.activeElement === el"), f"{label}: the control lost the focus"
        handle = control("storage TB/s").locator("[role=slider], .noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        shows(log_candidates, "ArrowRight on 'storage TB/s'")
        for label, press, want in steps[3:]:
            box = control(label)
            if press == "type":
                field = box.locator("input").first
                field.click()
                field.press("Control+a")
                page.keyboard.type(str(typed))
                page.keyboard.press("Enter")
            else:
                target = box.locator("[role=slider], .noUi-handle").first
                target.focus()
                page.keyboard.press(press)
            shows([want], f"{press} on {label!r}")
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
        assert cells.count() == len(KEYBOARD_CELLS) and page.get_by_text("Error displaying widget").count() == 0


def test_two_pages_on_one_kernel_each_answer_their_own_changes_from_the_cache(jupyterlab):
    """Two browser tabs on one kernel (issue 32): the same notebook open in two pages (each its own widget models,
    loaded from the kernel). Page 1 makes two changes of lesson 1's precision dropdown, then page 2 one change of the
    same dropdown (page 1 sees it echoed), each after the kernel's refill. Page 1's next change is then drawn from its
    cache: the kernel's map names each page's count of changes seen (prefetch.browser_count). Before, it named one
    count, the last change's (page 2's 1), and page 1, with 2 changes made and both seen, took one for a change still
    in flight and left the change to the kernel."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

    from distlab.widgets.common import neighbour_values
    from distlab.widgets.memory_wall import MemoryWallApp

    cell = 'from distlab.widgets.memory_wall import MemoryWallApp\nMemoryWallApp(model="llama2-7b", gpus=8, zero=0)'
    app = MemoryWallApp(model="llama2-7b", gpus=8, zero=0)
    neighbours = sum(len(neighbour_values(w)) for w in app.picture.controls)  # one step each way, at least
    app.close()
    precision = ".widget-dropdown:has(label:text-is('precision')) select"
    base, token = jupyterlab
    with _notebook_page(jupyterlab, sync_api, "two-pages.ipynb", [cell], "browser-two-pages-1.png") as page:
        holder = page.locator("[data-prefetched]").first
        holder.wait_for(state="attached", timeout=90_000)
        _wait_settled(page, holder, neighbours)
        options = page.locator(precision).locator("option").all_text_contents()
        start = page.locator(precision).evaluate("s => s.options[s.selectedIndex].text")
        k = options.index(start)
        other = options[k + 1] if k + 1 < len(options) else options[k - 1]
        for label in (other, start):  # page 1: two changes, each after the refill
            page.locator(precision).select_option(label=label)
            _wait_settled(page, holder, neighbours)
        page.keyboard.press("Control+s")  # the outputs saved: the second page shows the app from them
        page.wait_for_timeout(1500)
        with _chromium(sync_api) as browser2:
            second = browser2.new_page(viewport={"width": 1400, "height": 1000})
            second.set_default_timeout(30_000)
            try:
                workspace = f"/lab/workspaces/test-{next(_WORKSPACES)}/tree/"
                second.goto(f"{base}{workspace}two-pages.ipynb?token={token}")
                holder2 = second.locator("[data-prefetched]").first
                holder2.wait_for(state="attached", timeout=90_000)
                second.locator(precision).select_option(label=other)  # page 2: one change
                _wait_settled(second, holder2, 1)
            finally:
                ARTIFACTS.mkdir(exist_ok=True)
                second.screenshot(path=str(ARTIFACTS / "browser-two-pages-2.png"), full_page=False)
                browser2.close()
        page.wait_for_function(
            "([s, o]) => s.options[s.selectedIndex].text === o",
            arg=[page.locator(precision).element_handle(), other],
            timeout=30_000,
        )
        _wait_settled(page, holder, neighbours)
        hits = int(holder.get_attribute("data-cache-hits") or 0)
        page.locator(precision).select_option(label=start)  # page 1's third change
        _wait_for_hits(page, holder, hits + 1)


#: every text the picture's summary shows from now on (a page observer: each mutation, before the page paints it)
TEXT_LOG = """el => {
  window.__texts = [];
  new MutationObserver(() => window.__texts.push(el.textContent.split(/\\s+/).join(' ').trim()))
    .observe(el, {childList: true, characterData: true, subtree: true});
}"""


def test_the_kernels_late_answer_for_a_state_the_student_has_left_is_never_shown(jupyterlab):
    """The training lab's model dropdown a -> b -> a, 0.1 s apart, with the kernel's answer delayed (issue 32): once
    the kernel has filled the neighbourhood of the state shown, its process is paused (SIGSTOP), b is picked and then
    a again (both drawn from the browser's cache: b is a neighbour, a its home), and the kernel resumed: it answers
    b, then a. A page observer records every text the picture's summary shows from the moment a was drawn: b's text
    is never among them (the kernel's data names its state, BrowserPicture.data_key; before, b's data was painted
    under the controls set to a until a's came: RESULTS.md, session 8, branch rtt), and the text ends as a's."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

    from distlab.widgets.training_lab import TrainingLabApp

    app = TrainingLabApp()
    jobs = len(app.neighbour_jobs())
    a_label = app.model.label
    start = _squash(app.summary())
    options = list(app.model.options)
    app.model.value = options[options.index(app.model.value) + 1]
    b_label, b_text = app.model.label, _squash(app.summary())
    assert b_text != start
    app.close()
    cells = ["import os\nos.getpid()", "from distlab.widgets.training_lab import TrainingLabApp\nTrainingLabApp()"]
    with _notebook_page(jupyterlab, sync_api, "late-answer.ipynb", cells, "browser-late-answer.png") as page:
        holder = page.locator("[data-prefetched]").first
        holder.wait_for(state="attached", timeout=90_000)
        _wait_settled(page, holder, jobs)
        summary = page.locator(".distlab-picture .distlab-summary")
        assert _squash(summary.text_content() or "") == start
        pid = int(page.locator(".jp-Cell").first.locator(".jp-OutputArea-output").text_content().strip())
        hits = int(holder.get_attribute("data-cache-hits") or 0)
        model = page.locator(".widget-dropdown:has(label:text-is('model')) select")
        os.kill(pid, signal.SIGSTOP)
        try:
            model.select_option(label=b_label)
            page.wait_for_timeout(100)
            model.select_option(label=a_label)
            _wait_for_hits(page, holder, hits + 2)
            _wait_for_text(page, summary, start, 5_000)
            summary.evaluate(TEXT_LOG)
        finally:
            os.kill(pid, signal.SIGCONT)
        _wait_settled(page, holder, jobs)  # the kernel has answered both changes and refilled around a
        texts = page.evaluate("window.__texts")
        assert b_text not in texts, texts
        assert _squash(summary.text_content() or "") == start


#: JupyterLab's page at a narrow window: its output area is about 700 px wide (review v17 row 14, at 900 px)
NARROW_WINDOW_PX = 900
#: the smallest size (CSS px) a picture's text is shown at in a narrow output (framecache.MIN_TEXT_PX, common.js)
MIN_TEXT_PX = 10.0

#: What is wrong with one ipympl figure (the element) as shown: a canvas past its output area's right edge, or one
#: whose shown proportions are not its drawing buffer's (a picture scaled to fit must not be squashed)
PICTURE_PAST_THE_OUTPUT = """el => {
  const area = el.closest('.jp-OutputArea-output'), right = area.getBoundingClientRect().right;
  const cell = [...document.querySelectorAll('.jp-CodeCell')].indexOf(el.closest('.jp-CodeCell'));
  const out = [];
  // the figure (its frame scrolls sideways once its canvas is at its least scale) ends within the output
  const figure = el.querySelector('.jupyter-matplotlib-figure') || el, frame = figure.getBoundingClientRect();
  if (frame.width > 0 && frame.right > right + 1) out.push([cell, `${Math.round(frame.right - right)} px past the output`]);
  // a canvas wider than its frame can be scrolled to, not cut: a box around it (ipympl's canvas container) scrolls
  const widest = Math.max(0, ...[...el.querySelectorAll('.jupyter-matplotlib-canvas-div')].map((d) => d.scrollWidth));
  const scrolls = [...el.querySelectorAll('.jupyter-matplotlib-canvas-container')].some(
    (box) => ['auto', 'scroll'].includes(getComputedStyle(box).overflowX) && box.scrollWidth > box.clientWidth);
  if (widest > figure.clientWidth + 1 && !scrolls)
    out.push([cell, `${widest - figure.clientWidth} px of the picture cut, not scrollable`]);
  let shown = null;
  for (const c of el.querySelectorAll('.jupyter-matplotlib-canvas-div canvas')) {
    const r = c.getBoundingClientRect();
    const drawn = c.height / c.width, box = r.height / r.width;
    if (r.width > 0 && c.width > 0 && Math.abs(box - drawn) > 0.02 * drawn)
      out.push([cell, `shown ${box.toFixed(3)} high per px wide, drawn ${drawn.toFixed(3)}`]);
    // the share of its own CSS width (ipympl draws it at the device pixel ratio) the bottom canvas is shown at
    if (shown === null && c.width > 0) shown = r.width / (c.width / (window.devicePixelRatio || 1));
  }
  return {out, cell, shown};
}"""


def _smallest_text_px(app) -> float:
    """The smallest font (CSS px) among the visible texts of an app's figure, counted here from matplotlib's own
    Text objects: points x the figure's dpi / 72."""
    from matplotlib.text import Text

    fig = app.renderer.canvas.figure
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and str(t.get_text()).strip()]
    return min(sizes) * fig.dpi / 72 if sizes else float("inf")  # no text in the figure (lesson 4's stages)


#: The windows the narrow-output check is made at, the widest first: the notebook runs once at the first and the
#: window is then narrowed, as a student narrows it (every control and picture fits by CSS: controls.fit_labels,
#: framecache.FITS_CSS)
NARROW_WINDOWS_PX = (NARROW_WINDOW_PX, 800)


def _narrow_output_problems(page, apps: list, window: int) -> list:
    """What is wrong with the lesson apps shown in `page` at `window` px (test_every_lesson_apps_controls_stay_inside_
    a_narrow_output): controls past their output's right edge, kernel-drawn pictures past it, cut or squashed, and
    picture text shown under MIN_TEXT_PX."""
    figures = page.locator(".jp-OutputArea-output .jupyter-matplotlib")
    pictures = []  # each kernel-drawn picture, measured while shown: (its app's cell, what is wrong)
    shown = []  # (its app's cell, the share of its width each canvas is shown at)
    for i in range(figures.count()):  # ipympl sizes a canvas once its figure is shown and its first frame came
        figures.nth(i).scroll_into_view_if_needed()
        page.wait_for_function(
            "el => [...el.querySelectorAll('canvas')].some(c => c.getBoundingClientRect().width > 0)",
            arg=figures.nth(i).element_handle(),
            timeout=60_000,
        )
        found = page.evaluate(PICTURE_PAST_THE_OUTPUT, figures.nth(i).element_handle())
        pictures += found["out"]
        shown.append((found["cell"], found["shown"]))
    over = page.evaluate(
        """() => {
          const out = [];
          for (const area of document.querySelectorAll('.jp-OutputArea-output')) {
            const right = area.getBoundingClientRect().right;
            const sel = '.widget-dropdown, .widget-toggle-buttons, .widget-slider, .widget-checkbox, '
              + '.widget-text, .widget-button, .widget-select';
            for (const c of area.querySelectorAll(sel)) {
              const r = c.getBoundingClientRect();
              if (r.width > 0 && r.right > right + 1) {
                const label = c.querySelector('.widget-label');
                out.push([(label && label.textContent) || c.className, Math.round(r.right - right)]);
              }
            }
          }
          return out;
        }"""
    )
    problems = [f"controls past the output's right edge at {window} px (label, px): {over}"] if over else []
    if figures.count() < 10:
        problems.append(f"{figures.count()} ipympl figures at {window} px: the kernel-drawn apps did not all render")
    if pictures:
        problems.append(f"kernel-drawn pictures at {window} px (cell, problem): {pictures}")
    # each picture's smallest text is shown at MIN_TEXT_PX or more: its canvas is scaled down no further (and its
    # figure scrolls past that); at this window, 8-point ticks were shown at 7 px before (issue 32)
    small = []
    for cell, scale in shown:
        module, name = apps[cell].rsplit(".", 1)
        app = getattr(importlib.import_module(module), name)()
        try:
            px = _smallest_text_px(app) * scale
        finally:
            app.close()
        if px < MIN_TEXT_PX - 0.05:  # (a figure without text: inf, nothing to keep readable)
            small.append(f"{apps[cell]}: {px:.1f} px (shown at {scale:.2f})")
    if small:
        problems.append(f"text under {MIN_TEXT_PX} px at {window} px: {small}")
    return problems


def test_every_lesson_apps_controls_stay_inside_a_narrow_output(jupyterlab):
    """At a 900 px window (and an 800 px one: the training lab's memory dropdown and lesson 8's bucket slider ran past
    it, review v20; controls.fit_labels now lets a control shrink to its output) every lesson app's controls and
    kernel-drawn (ipympl) pictures stay inside the output area: a row of controls wider than the output wraps
    (controls.fit_labels) instead of running past its right edge, where JupyterLab cuts it (the training lab's
    'compute' dropdown read "calibra…"), and a picture scales down with its proportions kept (framecache.FITS_CSS; at
    900 px they ran 176-300 px past, review v18), but never so far that its smallest text falls under MIN_TEXT_PX (its
    figure then scrolls sideways; 8-point ticks were shown at 7 px). Each app is built in its own cell of one notebook,
    run at 900 px; the window is then narrowed to 800 px (NARROW_WINDOWS_PX); at each, every control's and figure's
    box must end within the output's."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
    import nbformat

    from distlab.lessons import LESSONS

    base, token = jupyterlab
    apps = list(dict.fromkeys(dotted for lesson in LESSONS.values() for dotted in lesson.apps))  # each app once
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from {0} import {1}\n{1}()".format(*dotted.rsplit(".", 1))) for dotted in apps
    ]
    _upload_notebook(base, token, "narrow.ipynb", nb)
    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    with _chromium(sync_api) as browser:
        page = browser.lab_page(viewport={"width": NARROW_WINDOWS_PX[0], "height": 1000})
        page.set_default_timeout(30_000)
        window = NARROW_WINDOWS_PX[0]
        try:
            _open_and_run_all(page, f"{base}/lab/tree/narrow.ipynb?token={token}")
            page.wait_for_function(  # every cell has run (its prompt numbered) and shows its app
                """n => {
                  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                  return prompts.length === n && prompts.every(p => /\\[\\d+\\]/.test(p.textContent))
                    && document.querySelectorAll('.jp-CodeCell .jp-OutputArea-output > .widget-vbox').length === n;
                }""",
                arg=len(apps),
                timeout=240_000,
            )
            page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=120_000)
            for window in NARROW_WINDOWS_PX:
                if window != NARROW_WINDOWS_PX[0]:
                    page.set_viewport_size({"width": window, "height": 1000})
                    page.wait_for_timeout(500)  # JupyterLab lays its panels out again, ipympl its figures
                problems += _narrow_output_problems(page, apps, window)
                if window != NARROW_WINDOWS_PX[-1]:  # the last window's screenshot is the one taken below
                    page.screenshot(path=str(ARTIFACTS / f"narrow-window-{window}.png"), full_page=False)
        finally:
            page.screenshot(path=str(ARTIFACTS / f"narrow-window-{window}.png"), full_page=False)
            browser.close()
    assert problems == [], "\n".join(problems)
