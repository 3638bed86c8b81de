"""Where the time of a cached change goes (issue 32): the 3D grid's D, T and P sliders (lesson 6), n presses each,
straight to JupyterLab and through bench_browser_pictures' 50 ms round-trip proxy: per press, keydown -> the picture's
text changed (the cached paint) -> the next animation frame, and every WebSocket frame in or out of the page in that
window (a hook in the page). Used to show that no kernel message lands in the measured frame (RESULTS.md, branch
refill). Not a benchmark with a recorded figure; nothing asserted.

    python benchmarks/probe_picture_frame.py [--n 12] [--full]   # --full: in bench_browser_pictures' whole notebook

--refill APP (branch rtt): the benchmark's refill row of one app (its first dropdown, a -> b -> a 0.1 s apart) in a
notebook of that app alone, both modes, with Chromium's trace: per press, whether its frame was drawn at a MISSED
BeginFrame (the compositor had stopped ticking: at once) or waited for the next 60 Hz tick, whether the compositor
had ticked or a frame was committed just before the press, and the kernel messages received around it.

    python benchmarks/probe_picture_frame.py --refill "memory wall" --n 30

--stale APP (branch stale): n runs of a -> b -> a on the app's first dropdown, 0.1 s apart, each after a pause of
STALE_PAUSE_S (the kernel refilled), both modes, with a page observer recording every text the picture shows (each
mutation, before the page paints it): a run is stale where, after the change back to a, the picture showed any text
but a's (the kernel's answer for b painted under controls at a); its duration is until a's text again.

    python benchmarks/probe_picture_frame.py --stale "training lab" --n 12 [--gap 0.04]
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
        pics = page.locator(".distlab-picture")

        def ready():
            pics.nth((len(B.CELLS) - 1) if FULL else 0).wait_for(timeout=120_000)
            if FULL:
                frames = page.locator(".distlab-framecache")
                frames.nth(len(B.FRAME_CELLS) - 1).wait_for(state="attached", timeout=120_000)

        B.run_in_lab(page, base, token, name, ready)
        pic = pics.nth(4 if FULL else 0)
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

# --refill APP (branch rtt): the app's first dropdown alternated a -> b -> a FILL_PAUSE_S apart, as the benchmark's
# refill row does, in a notebook of that app alone, with Chromium's trace (the compositor's BeginFrames, the main
# thread's commits) and every kernel message decoded (JupyterLab's v1 websocket protocol: msg_type, comm method).
REFILL_HOOK = """
(() => {
  window.__ws = [];
  const Orig = window.WebSocket;
  window.WebSocket = function (...a) {
    const ws = new Orig(...a);
    ws.addEventListener('message', (e) => window.__ws.push([performance.now(), e.data]));
    return ws;
  };
  window.WebSocket.prototype = Orig.prototype;
  Object.assign(window.WebSocket, Orig);
  window.__kind = (d) => {  // after the run: what a kernel message was (status, echo_update, update, custom: map or payload)
    try {
      let m;
      if (typeof d === 'string') m = JSON.parse(d);
      else {
        const dv = new DataView(d), n = Number(dv.getBigUint64(0, true)), off = [], td = new TextDecoder();
        for (let i = 0; i < n; i++) off.push(Number(dv.getBigUint64(8 * (i + 1), true)));
        m = {header: JSON.parse(td.decode(d.slice(off[1], off[2]))), content: JSON.parse(td.decode(d.slice(off[4], off[5])))};
      }
      const data = (m.content || {}).data || {}, c = data.content || {};
      if (m.header.msg_type === 'status') return 'status';
      if (data.method !== 'custom') return data.method || m.header.msg_type;
      return c.prefetch_base === '' ? 'forget' : c.prefetch_base !== undefined ? 'map' : c.prefetch !== undefined ? 'payload' : 'custom';
    } catch (e) { return 'other'; }
  };
})();
"""
REFILL_PROBE = """([control, summary]) => {
  window.__rows = [];
  let pending = 0;
  control.addEventListener('change', () => {
    const i = window.__rows.length + pending++;
    const t0 = performance.now(); performance.mark('press' + i);
    const observer = new MutationObserver(() => {
      observer.disconnect();
      performance.mark('mut' + i);
      requestAnimationFrame(() => { performance.mark('raf' + i); pending -= 1; window.__rows.push({i, t0, raf: performance.now() - t0}); });
    });
    observer.observe(summary, {childList: true, characterData: true, subtree: true});
  }, {capture: true});
}"""
TRACE_CATEGORIES = ["cc", "devtools.timeline", "disabled-by-default-devtools.timeline", "blink.user_timing"]


def run_refill(sync_api, base, name, app, n):
    """The refill row of `app` in the page at `base`: per press, the latency (change -> the frame after the picture's
    text changed), the trace around it and the kernel messages received."""
    _, index, dropdowns, *_ = next(row for row in B.CONTROL_APPS if row[0] == app)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(B.CHROMIUM), headless=True, args=B.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(REFILL_HOOK)
        page.set_default_timeout(60_000)
        pic = page.locator(".distlab-framecache" if index >= len(B.CELLS) else ".distlab-picture").first
        B.run_in_lab(page, base, token, name, lambda: pic.wait_for(state="attached", timeout=120_000))
        page.wait_for_timeout(1500)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        select = B._labelled(page, cell, ".widget-dropdown", dropdowns[0]).locator("select")
        pair = B._visible_pair(page, select, pic)
        page.wait_for_timeout(1500)
        page.evaluate(REFILL_PROBE, [select.element_handle(), B._watched(pic)[0].element_handle()])
        page.evaluate("window.__ws.length = 0")
        browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        for i in range(n):
            page.wait_for_timeout(B.FILL_PAUSE_S * 1e3)
            select.select_option(label=pair[i % 2])
            page.wait_for_function(f"window.__rows.length >= {i + 1}", timeout=15_000)
        page.wait_for_timeout(1000)
        trace = json.loads(browser.stop_tracing())
        rows = page.evaluate("window.__rows")
        ws = page.evaluate("window.__ws.map(([t, d]) => [t, window.__kind(d)])")
        browser.close()
    return {"rows": rows, "ws": ws, "trace": trace}


def refill_frames(res: dict) -> dict:
    """Per press, from the trace: whether its frame came from a MISSED BeginFrame (sent at once to a compositor that
    had stopped ticking) or from the next 60 Hz tick, whether the compositor had ticked in the 17 ms before the
    press, whether a frame was committed in the 40 ms before it, and the kernel messages received from 40 ms before
    the press to its frame."""
    events = res["trace"]["traceEvents"] if isinstance(res["trace"], dict) else res["trace"]
    marks = {}
    for e in events:
        if "blink.user_timing" in e.get("cat", ""):
            marks.setdefault(e["name"], e)
    pid, tid = marks["press0"]["pid"], marks["press0"]["tid"]
    ticks = sorted((e["ts"], e["args"]["args"].get("subtype") == "MISSED") for e in events
                   if e.get("name") == "Scheduler::BeginFrame" and e["pid"] == pid)
    commits = [e["ts"] for e in events if e.get("name") == "Commit" and e.get("ph") == "X" and (e["pid"], e["tid"]) == (pid, tid)]
    out = []
    for row in res["rows"]:
        i = row["i"]
        t0, tm, tr = (marks[f"{k}{i}"]["ts"] for k in ("press", "mut", "raf"))
        serving = [m for ts, m in ticks if tm - 20e3 <= ts <= tr]
        msgs = [kind for t, kind in res["ws"] if row["t0"] - 40 <= t <= row["t0"] + row["raf"]]
        out.append({"raf": row["raf"], "missed": serving[-1] if serving else None,
                    "ticking": any(not m and t0 - 17e3 <= ts < t0 for ts, m in ticks),
                    "commit": any(0 < t0 - c < 40e3 for c in commits), "msgs": msgs})
    return out


def report_refill(mode: str, frames: list) -> None:
    def med(xs: list) -> str:
        return f"{st.median(xs):.1f} ms (n={len(xs)})" if xs else "- (n=0)"

    print(f"{mode}: median {med([f['raf'] for f in frames])}; drawn at a MISSED BeginFrame {med([f['raf'] for f in frames if f['missed']])}, "
          f"at the next tick {med([f['raf'] for f in frames if f['missed'] is False])}; compositor ticking in the 17 ms "
          f"before the press {sum(f['ticking'] for f in frames)}/{len(frames)}, a commit in the 40 ms before "
          f"{sum(f['commit'] for f in frames)}/{len(frames)}")
    kinds = {}
    for f in frames:
        for k in f["msgs"]:
            kinds[k] = kinds.get(k, 0) + 1
    print(f"    kernel messages from 40 ms before a press to its frame: {kinds}")


# --stale APP (branch stale): every text of the picture, and the dropdown's changes, with their times
STALE_LOG = """([control, summary]) => {
  window.__texts = [];
  window.__changes = [];
  control.addEventListener('change', () => window.__changes.push([performance.now(), control.options[control.selectedIndex].text]), {capture: true});
  new MutationObserver(() => window.__texts.push([performance.now(), summary.textContent.split(/\\s+/).join(' ').trim()]))
    .observe(summary, {childList: true, characterData: true, subtree: true});
}"""
STALE_PAUSE_S = 2.0


def run_stale(sync_api, base, name, app, n, gap_s=B.FILL_PAUSE_S):
    """n runs of a -> b -> a (gap_s apart) on `app`'s first dropdown in the page at `base`, STALE_PAUSE_S after
    the last: per run, [ms after the change back to a, text] of every text the picture showed after it, and a's text."""
    _, index, dropdowns, *_ = next(row for row in B.CONTROL_APPS if row[0] == app)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(B.CHROMIUM), headless=True, args=B.CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        pic = page.locator(".distlab-framecache" if index >= len(B.CELLS) else ".distlab-picture").first
        B.run_in_lab(page, base, token, name, lambda: pic.wait_for(state="attached", timeout=120_000))
        page.wait_for_timeout(1500)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        select = B._labelled(page, cell, ".widget-dropdown", dropdowns[0]).locator("select")
        other, start = B._visible_pair(page, select, pic)
        summary = B._watched(pic)[0]
        page.evaluate(STALE_LOG, [select.element_handle(), summary.element_handle()])
        runs = []
        for _ in range(n):
            page.wait_for_timeout(STALE_PAUSE_S * 1e3)
            a_text = " ".join((summary.text_content() or "").split())
            page.evaluate("window.__texts.length = 0; window.__changes.length = 0")
            select.select_option(label=other)
            page.wait_for_timeout(gap_s * 1e3)
            select.select_option(label=start)
            page.wait_for_timeout(1500)
            texts, changes = page.evaluate("[window.__texts, window.__changes]")
            back = changes[-1][0]
            runs.append({"a": a_text, "after": [[t - back, text] for t, text in texts if t >= back]})
        browser.close()
    return runs


def report_stale(mode: str, runs: list) -> None:
    """Stale runs (a text other than a's shown after the change back to a), and for each when and for how long."""
    stale = []
    for run in runs:
        shown = [(t, text != run["a"]) for t, text in run["after"]]
        first = next((t for t, other in shown if other), None)
        if first is not None:
            end = next((t for t, other in shown if t > first and not other), None)
            stale.append((first, None if end is None else end - first))
    spans = ", ".join(f"{t:.0f} ms after, for {'-' if d is None else f'{d:.0f}'} ms" for t, d in stale)
    print(f"{mode}: another state's text shown after the change back in {len(stale)} of {len(runs)} runs" +
          (f" ({spans})" if spans else ""))


def both_modes(app: str, prefix: str, run) -> dict:
    """{"direct": run(sync_api, base, notebook), "delayed": the same through bench_browser_pictures' 50 ms
    round-trip proxy}: one JupyterLab serving a notebook per mode that holds the app `app` alone."""
    global token
    from playwright import sync_api

    index = next(row[1] for row in B.CONTROL_APPS if row[0] == app)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    root = tmp / "lab"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell((B.CELLS + B.FRAME_CELLS)[index])]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for nm in ("direct.ipynb", "delayed.ipynb"):
        nbformat.write(nb, root / nm)
    port, token = B._free_port(), secrets.token_hex(16)
    res = {}
    with open(tmp / "log", "wb") as log:
        server = B._jupyterlab(root, port, token, log)
        try:
            B._wait_up(f"http://127.0.0.1:{port}/api/status?token={token}")
            res["direct"] = run(sync_api, f"http://127.0.0.1:{port}", "direct.ipynb")
            proxy = B.DelayingProxy(port, B.DELAY_S)
            res["delayed"] = run(sync_api, f"http://127.0.0.1:{proxy.port}", "delayed.ipynb")
            proxy.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    return res


def main_stale(app: str, n: int, dump: str, gap_s: float) -> None:
    """--stale APP: both modes, the same JupyterLab (a notebook each)."""
    res = both_modes(app, "stale-probe-", lambda api, base, name: run_stale(api, base, name, app, n, gap_s))
    if dump:
        Path(dump).write_text(json.dumps(res))
    print(f"{app}: its first dropdown, {n} runs of a -> b -> a {gap_s} s apart (load {os.getloadavg()[0]:.1f})")
    for mode, runs in res.items():
        report_stale(mode, runs)


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
    args.add_argument("--refill", default="", metavar="APP",
                      help="the refill row of APP (a CONTROL_APPS name, e.g. 'memory wall'): n changes of its first "
                           "dropdown 0.1 s apart, with Chromium's trace (branch rtt)")
    args.add_argument("--stale", default="", metavar="APP",
                      help="n runs of a -> b -> a on APP's first dropdown 0.1 s apart, a page observer counting the "
                           "runs that showed another state's text after the change back (branch stale)")
    args.add_argument("--gap", type=float, default=B.FILL_PAUSE_S,
                      help=f"--stale: seconds between a -> b and b -> a (default {B.FILL_PAUSE_S})")
    opts = args.parse_args()
    FULL = opts.full
    if opts.stale:
        return main_stale(opts.stale, opts.n, opts.json, opts.gap)
    if opts.refill:
        return main_refill(opts.refill, opts.n, opts.json)
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


def main_refill(app: str, n: int, dump: str) -> None:
    """--refill APP: both modes, the same JupyterLab (a notebook each)."""
    res = both_modes(app, "refill-probe-", lambda api, base, name: run_refill(api, base, name, app, n))
    frames = {mode: refill_frames(r) for mode, r in res.items()}
    if dump:
        Path(dump).write_text(json.dumps(frames))
    print(f"{app}: its first dropdown, {n} changes {B.FILL_PAUSE_S} s apart (load {os.getloadavg()[0]:.1f})")
    for mode, f in frames.items():
        report_refill(mode, f)


if __name__ == "__main__":
    main()
