"""Where the time of a cached change goes (issue 32): the 3D grid's D, T and P sliders (lesson 6), n presses each,
straight to JupyterLab and through bench_browser_pictures' 50 ms round-trip proxy: per press, keydown -> the picture's
text changed (the cached paint) -> the next animation frame, and every WebSocket frame in or out of the page in that
window (a hook in the page). Used to show that no kernel message lands in the measured frame (RESULTS.md, branch
refill). Not a benchmark with a recorded figure; nothing asserted.

    python benchmarks/probe_picture_frame.py [--n 12] [--full]   # --full: in bench_browser_pictures' whole notebook
"""
import argparse
import json
import os
import secrets
import signal
import statistics as st
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_browser_pictures as B  # noqa: E402
import nbformat

WS_HOOK = """
(() => {
  window.__ws = [];
  const Orig = window.WebSocket;
  window.WebSocket = function (...a) {
    const ws = new Orig(...a);
    ws.addEventListener('message', (e) => window.__ws.push([performance.now(), typeof e.data === 'string' ? e.data.length : (e.data.byteLength || e.data.size || 0)]));
    const send = ws.send.bind(ws);
    ws.send = (d) => { window.__ws.push([performance.now(), -((d && (d.length || d.byteLength)) || 0)]); return send(d); };
    return ws;
  };
  window.WebSocket.prototype = Orig.prototype;
  Object.assign(window.WebSocket, Orig);
})();
"""
FULL = False
token = ""
PROBE = """([control, summary, holder]) => {
  window.__rows = [];
  control.addEventListener('keydown', () => {
    const t0 = performance.now();
    const hits = Number(holder.getAttribute('data-cache-hits') || 0);
    const observer = new MutationObserver(() => {
      observer.disconnect();
      const tm = performance.now();
      requestAnimationFrame((ts) => {
        const tr = performance.now();
        window.__rows.push({t0, paint: tm - t0, raf: tr - t0, rafts: ts - t0,
          hit: Number(holder.getAttribute('data-cache-hits') || 0) > hits,
          ws: window.__ws.filter(([t]) => t >= t0 - 1 && t <= tr).map(([t, n]) => [Math.round((t - t0) * 10) / 10, n])});
      });
    });
    observer.observe(summary, {childList: true, characterData: true, subtree: true});
  }, {capture: true});
}"""

def run(sync_api, base, name, n):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(B.CHROMIUM), headless=True, args=B.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(WS_HOOK)
        page.set_default_timeout(60_000)
        page.goto(f"{base}/lab/workspaces/{name[:-6]}/tree/{name}?reset&token={token}")
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        page.wait_for_timeout(2000)
        sel = page.locator(".jp-Dialog button", has_text="Select")
        if sel.count(): sel.first.click()
        page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=90_000)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        pics = page.locator(".distlab-picture")
        pics.nth((len(B.CELLS) - 1) if FULL else 0).wait_for(timeout=120_000)
        if FULL:
            page.locator(".distlab-framecache").nth(len(B.FRAME_CELLS) - 1).wait_for(state="attached", timeout=120_000)
        pic = pics.nth(4 if FULL else 0)
        page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=120_000)
        page.wait_for_timeout(1500)
        cell = page.locator(".jp-Notebook .jp-Cell").nth(4 if FULL else 0)
        pic.scroll_into_view_if_needed()
        out = {}
        for label in ["D (data)", "T (tensor)", "P (pipeline)"]:
            text, marked = B._watched(pic)
            handle = B._labelled(page, cell, ".widget-slider", label).locator("[role=slider], .noUi-handle").first
            page.evaluate(PROBE, [handle.element_handle(), text.element_handle(), marked.element_handle()])
            handle.focus()
            for i in range(n):
                page.wait_for_timeout(500)
                page.keyboard.press("ArrowLeft" if i % 2 else "ArrowRight")
                page.wait_for_function(f"window.__rows.length >= {i + 1}", timeout=15_000)
            out[label] = page.evaluate("window.__rows")
        browser.close()
    return out

def main() -> None:
    try:
        from playwright import sync_api
    except ImportError:
        print("probe: skipped (playwright is not installed)")
        return
    if not B.CHROMIUM.exists():
        print("probe: skipped (/usr/bin/chromium is not installed)")
        return
    global FULL, token
    args = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    args.add_argument("--n", type=int, default=12, help="presses per slider and mode (default 12)")
    args.add_argument("--full", action="store_true", help="in bench_browser_pictures' whole notebook (19 apps)")
    args.add_argument("--json", default="", help="write every press's record here")
    opts = args.parse_args()
    FULL = opts.full
    tmp = Path(tempfile.mkdtemp(prefix="refill-grid-"))
    root = tmp / "lab"; root.mkdir()
    nb = nbformat.v4.new_notebook(); nb.cells = [nbformat.v4.new_code_cell(c) for c in (B.CELLS + B.FRAME_CELLS if FULL else [B.CELLS[4]])]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for nm in ("direct.ipynb", "delayed.ipynb"): nbformat.write(nb, root / nm)
    port, token = B._free_port(), secrets.token_hex(16)
    n = opts.n
    with open(tmp / "log", "wb") as log:
        server = B._jupyterlab(root, port, token, log)
        try:
            B._wait_up(f"http://127.0.0.1:{port}/api/status?token={token}")
            res = {"direct": run(sync_api, f"http://127.0.0.1:{port}", "direct.ipynb", n)}
            proxy = B.DelayingProxy(port, B.DELAY_S)
            res["delayed"] = run(sync_api, f"http://127.0.0.1:{proxy.port}", "delayed.ipynb", n)
            proxy.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM); server.wait(timeout=30)
    if opts.json:
        Path(opts.json).write_text(json.dumps(res))
    for mode, rows in res.items():
        for label, rs in rows.items():
            print(mode, label, "paint med %.1f raf med %.1f rafts med %.1f hits %d/%d; changes with ws msgs in frame: %d" % (
                st.median(r["paint"] for r in rs), st.median(r["raf"] for r in rs), st.median(r["rafts"] for r in rs),
                sum(r["hit"] for r in rs), len(rs), sum(1 for r in rs if any(m[1] > 0 for m in r["ws"]))))
            print("   ", [r["ws"][:4] for r in rs[:4]])


if __name__ == "__main__":
    main()
