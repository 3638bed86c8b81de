"""Voila's time to the first app, in a real browser (issue 32): the README's Voila link serves lesson 7.

Starts Voila as the README says (`voila notebooks/07_training_lab.ipynb`, from the checkout's root, so the
`voila.json` there is read, as Binder's Voila server extension reads it from the same folder: progressive
rendering), on localhost with a random port and token, and times:

* Voila's own start: from launching the process to its first HTTP answer;
* for each of several page loads, in a fresh page of headless Chromium (/usr/bin/chromium, driven by Playwright),
  from the navigation's start (performance.now() = 0) to
  - the first thing shown: the first cell output in the page;
  - the app: the training lab's picture (`.distlab-picture canvas`, lesson 7 §6) painted on screen, its text
    under it not "pricing ..." (every node count priced): what a user waits for;
  - every cell done (the last cell's output in the page; Voila's own page has no other signal).

Each load is a new Voila kernel (the page is closed with its unload handler, which shuts the kernel down). The first
load, at once after Voila answers (the visitor who started it), is printed apart; the counted loads follow back to
back (with preheated kernels, each PAUSE_S after the one before: Voila runs the notebook again in a fresh kernel for
the next visitor meanwhile). The machine's load (`os.getloadavg`) is printed before and after: a shared machine
slows every figure.

    python benchmarks/bench_voila_first_paint.py          # 5 loads (or: python benchmarks/run.py voila_first_paint)
    python benchmarks/bench_voila_first_paint.py 11       # 11 loads
    DISTLAB_BENCH_VOILA=none python benchmarks/bench_voila_first_paint.py     # Voila's defaults (before issue 32)
    DISTLAB_BENCH_VOILA=preheat python benchmarks/bench_voila_first_paint.py  # preheated kernels instead (the
        standalone app only; Binder's server extension has none)
(the last two run the notebook copied to a folder of their own, where the root's voila.json is not read).
Skipped with a message when Voila, Chromium or Playwright is missing. Nothing here is asserted in tests.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from _timing import report, summarize

ROOT = Path(__file__).resolve().parents[1]
#: The README's Voila link; DISTLAB_BENCH_NOTEBOOK names another notebook (a path from the checkout's root), e.g. one
#: with the app alone, to see the floor that Voila, the kernel and the imports set.
NOTEBOOK = os.environ.get("DISTLAB_BENCH_NOTEBOOK", "notebooks/07_training_lab.ipynb")
#: Figures (<img>) the notebook's outputs hold once every cell has run: lesson 7 draws three.
FIGURES = int(os.environ.get("DISTLAB_BENCH_FIGURES", "3"))
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-sandbox"]
LOADS = 5
#: Seconds between two counted loads (preheated kernels: the time Voila has to run the notebook for the next visitor).
PAUSE_S = float(os.environ.get("DISTLAB_BENCH_PAUSE_S", "60"))
#: Which configuration Voila reads: "readme" (the root's voila.json), "none" or "preheat" (see the docstring).
MODE = os.environ.get("DISTLAB_BENCH_VOILA", "readme")
PREHEAT = {"VoilaConfiguration": {"preheat_kernel": True}}
#: What the page shows, read in the page every animation frame: the time (performance.now(), ms from the
#: navigation's start) each first became true.
WATCH = """() => {
  const seen = {};
  const lab = () => {
    const canvas = document.querySelector('.distlab-picture canvas');
    const summary = document.querySelector('.distlab-picture .distlab-summary');
    if (!canvas || !canvas.width || canvas.offsetParent === null || !canvas.getBoundingClientRect().width) return false;
    if (!summary || !summary.textContent.trim() || summary.textContent.includes('pricing')) return false;
    const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    for (let k = 3; k < pixels.length; k += 64) if (pixels[k]) return true;
    return false;
  };
  const output = () => [...document.querySelectorAll('.jp-OutputArea-output')].some(
    (el) => el.offsetParent !== null && el.getBoundingClientRect().height > 0);
  const tick = () => {
    const now = performance.now();
    if (seen.output === undefined && output()) seen.output = now;
    if (seen.app === undefined && lab()) seen.app = now;
    window.__seen = seen;
    if (seen.app === undefined || seen.output === undefined) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _voila(port: int, token: str, tmp: Path, log):
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_RUNTIME_DIR": str(tmp / "rt")}
    env.pop("JUPYTER_CONFIG_PATH", None)
    cwd, notebook = ROOT, NOTEBOOK
    if MODE in ("none", "preheat"):  # a folder of its own, without the root's voila.json
        cwd = tmp / "site"
        (cwd / "notebooks").mkdir(parents=True)
        shutil.copy(ROOT / NOTEBOOK, cwd / NOTEBOOK)
        if MODE == "preheat":
            (cwd / "voila.json").write_text(json.dumps(PREHEAT), encoding="utf-8")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "voila", notebook, "--no-browser", "--Voila.ip=127.0.0.1", f"--port={port}",
         f"--token={token}", "--Voila.port_retries=0"],
        cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


def _wait_up(server, url: str, seconds: float = 120) -> float:
    start = time.monotonic()
    while time.monotonic() < start + seconds:
        try:
            with urllib.request.urlopen(url, timeout=2):  # noqa: S310 - localhost only
                return time.monotonic() - start
        except urllib.error.HTTPError:
            return time.monotonic() - start
        except OSError:
            if server.poll() is not None:
                break
            time.sleep(0.05)
    raise RuntimeError(f"Voila did not answer at {url}")


def _stop(server) -> None:
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _one_load(browser, url: str) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(180_000)
    try:
        page.add_init_script(f"({WATCH})()")
        page.goto(url, wait_until="commit", timeout=180_000)
        page.wait_for_function("window.__seen && window.__seen.app !== undefined", polling=100, timeout=180_000)
        seen = page.evaluate("window.__seen")
        # every cell: the last figure (lesson 7: the third, the validation plot, its last output) in the page
        page.wait_for_function(
            f"document.querySelectorAll('.jp-OutputArea-output img').length >= {FIGURES}", polling=100, timeout=180_000
        )
        seen["done"] = page.evaluate("performance.now()")
        assert "Traceback" not in page.content()
        return seen
    finally:
        page.close(run_before_unload=True)
        time.sleep(1.0)  # the unload handler's kernel shutdown reaches the server


def main(loads: int = LOADS) -> dict:
    """Start Voila, load the page `loads` times, print Voila's start and median/p95 of each mark."""
    try:
        from playwright import sync_api
    except ImportError:
        print("voila first paint: skipped (playwright is not installed)")
        return {}
    if not CHROMIUM.exists():
        print("voila first paint: skipped (/usr/bin/chromium is not installed)")
        return {}
    if shutil.which("voila", path=str(Path(sys.executable).parent)) is None:
        print("voila first paint: skipped (voila, the lessons extra, is not installed)")
        return {}
    config = {"readme": (ROOT / "voila.json").read_text(encoding="utf-8") if (ROOT / "voila.json").exists() else "none",
              "none": "none", "preheat": json.dumps(PREHEAT)}[MODE]
    print(f"voila first paint: {NOTEBOOK}, {MODE}: voila.json {' '.join(config.split())}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="distlab-bench-voila-"))
    port, token = _free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}/?token={token}"
    marks: dict = {"output": [], "app": [], "done": []}
    with open(tmp / "voila.log", "wb") as log:
        server = _voila(port, token, tmp, log)
        try:
            started = _wait_up(server, url)
            print(f"Voila's own start (process to first HTTP answer): {started:.2f} s", flush=True)
            with sync_api.sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
                try:
                    seen = _one_load(browser, url)  # the visitor who started Voila; not counted
                    print(f"  first load, at once after the start: first output {seen['output'] / 1e3:.2f} s, app "
                          f"{seen['app'] / 1e3:.2f} s, every cell {seen['done'] / 1e3:.2f} s", flush=True)
                    for k in range(loads):
                        if MODE == "preheat":
                            time.sleep(PAUSE_S)
                        seen = _one_load(browser, url)
                        print(f"  load {k + 1}: first output {seen['output'] / 1e3:.2f} s, app "
                              f"{seen['app'] / 1e3:.2f} s, every cell {seen['done'] / 1e3:.2f} s", flush=True)
                        for key in marks:
                            marks[key].append(seen[key] / 1e3)
                finally:
                    browser.close()
        finally:
            _stop(server)
    out = {key: summarize(values) for key, values in marks.items()}
    print(report("Voila lesson 7: first cell output", out["output"]))
    print(report("Voila lesson 7: the app drawn (target <= 3 s)", out["app"], 3000))
    print(report("Voila lesson 7: every cell done", out["done"]))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("loads", nargs="?", type=int, default=LOADS, help=f"page loads counted (default {LOADS})")
    main(parser.parse_args().loads)
