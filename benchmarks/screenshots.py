"""Screenshots of the lessons as a student meets them: each lesson opened in JupyterLab in Chromium, Run All Cells,
two controls of its first app moved, and the page captured (issue 31: look at them after every change to a lesson).

    .venv/bin/python benchmarks/screenshots.py [--out screenshots] [01 04 ...]

Needs Debian's Chromium (/usr/bin/chromium) and Playwright (the test extra). The lessons are copied to a temporary
folder first: JupyterLab saves a notebook it runs, and the committed ones must keep their outputs. Writes, per
lesson, NN-0-top.png (after Run All), NN-k-app.png (each app's output, scrolled into view) and NN-move-*.png (after
each of two control changes in the first app)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: JupyterLab's "Would you like to get notified about official Jupyter news?" toast covers the bottom-right corner of
#: every page; answering "never" in the user settings keeps it away (the server reads overrides.d only at launch).
NEWS_PLUGIN, NO_NEWS = "@jupyterlab/apputils-extension:notification", {"fetchNews": "false", "checkForUpdates": False}
sys.path.insert(0, str(ROOT / "tests"))


def shoot(lessons: list[str], out: Path, wait_s: float = 240) -> list[Path]:
    from playwright import sync_api

    import test_browser as tb  # the JupyterLab launch and Run All of the browser tests, one copy of them

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        notebooks = [
            p
            for p in sorted((ROOT / "notebooks").glob("*.ipynb"))
            if not lessons or p.name[:3].rstrip("_") in lessons or p.name.split("_")[0] in lessons
        ]
        tb.LESSON = notebooks[0]  # the fixture copies tb.LESSON; the others are copied below
        factory = _TmpFactory(root)
        fixture = tb.jupyterlab.__wrapped__(factory)  # the generator under pytest's fixture decorator
        base, token = next(fixture)
        lab = next(p for p in root.iterdir() if p.name.startswith("jupyterlab")) / "lab"
        _no_news(base, token)
        for nb in notebooks:
            shutil.copy(nb, lab / nb.name)
        try:
            with tb._chromium(sync_api) as browser:
                for nb in notebooks:
                    stem = nb.name.split("_")[0]
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    page.set_default_timeout(60_000)
                    try:
                        tb._open_and_run_all(page, f"{base}/lab/tree/{nb.name}?token={token}")
                        page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=wait_s * 1000)
                        page.wait_for_timeout(2000)
                        written.append(out / f"{stem}-0-top.png")
                        page.screenshot(path=written[-1])
                        apps = page.locator(".jp-OutputArea-output .widget-vbox:not(.widget-vbox .widget-vbox)")
                        for k in range(min(apps.count(), 6)):
                            app = apps.nth(k)
                            app.scroll_into_view_if_needed()
                            page.wait_for_timeout(500)
                            written.append(out / f"{stem}-{k + 1}-app.png")
                            app.screenshot(path=written[-1])
                        if apps.count():
                            written += _move_two_controls(page, apps.first, out, stem)
                    except Exception as exc:  # noqa: BLE001 - a lesson that fails is reported, the others still shot
                        print(f"{nb.name}: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
                        shot = out / f"{stem}-failed.png"
                        page.screenshot(path=shot)
                        written.append(shot)
                    finally:
                        page.close()
        finally:
            next(fixture, None)
    return written


def _no_news(base: str, token: str) -> None:
    request = urllib.request.Request(
        f"{base}/lab/api/settings/{NEWS_PLUGIN}?token={token}",
        data=json.dumps({"raw": json.dumps(NO_NEWS)}).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=30).close()


def _move_two_controls(page, app, out: Path, stem: str) -> list[Path]:
    """Pick the last option of the first two dropdowns (or press ArrowRight on sliders) and capture the app."""
    shots = []
    selects = app.locator("select")
    # the focusable part of an ipywidgets 8 slider is its handle (noUiSlider); its container takes no key presses,
    # which sent ArrowRight to the notebook instead of the slider
    sliders = app.locator("input[type=range], .widget-slider .noUi-handle")
    moves = []
    for i in range(min(selects.count(), 2)):
        moves.append(("select", selects.nth(i)))
    for i in range(min(sliders.count(), 2 - len(moves))):
        moves.append(("slider", sliders.nth(i)))
    for n, (kind, control) in enumerate(moves, 1):
        if kind == "select":
            options = control.evaluate("s => Array.from(s.options).map(o => o.value)")
            if len(options) > 1:
                control.select_option(options[-1])
        else:
            control.focus()
            page.keyboard.press("ArrowRight")
        page.wait_for_timeout(1500)
        shot = out / f"{stem}-move-{n}.png"
        app.screenshot(path=shot)
        shots.append(shot)
    return shots


class _TmpFactory:
    """The one method of pytest's tmp_path_factory the fixture uses."""

    def __init__(self, root: Path):
        self.root = root

    def mktemp(self, name: str) -> Path:
        path = self.root / name
        path.mkdir()
        return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers (01, 04, 08b, ...); default: all")
    parser.add_argument("--out", default="screenshots", help="folder for the PNGs (default ./screenshots)")
    args = parser.parse_args(argv)
    for path in shoot(args.lessons, Path(args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
