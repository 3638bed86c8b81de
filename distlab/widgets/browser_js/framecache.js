// The frame cache of the apps matplotlib draws (issue 32; distlab.widgets.framecache). The kernel sends, per state one
// control change away, {png (a binary buffer), texts: [status HTML, ...], shown}; prefetch.js holds them by state id
// (the PNG bytes within its byte budget) and finds them by the labels of the app's controls. The PNGs of the current
// neighbourhood are kept decoded (a hit paints within its frame); those of older ones are closed (a decoded picture
// is width x height x 4 bytes: 2-6 MB at a device pixel ratio of 2) and decoded again when they are neighbours again.
// A picture is held under the id of its state and of what the kernel drew it in (FrameCachingApp.frame_context: the
// pixel geometry, the full draw, the plot helpers' remembered ranges), so one from an older neighbourhood is shown
// only where the kernel would paint it the same. A change to a cached state draws the PNG over the app's ipympl
// canvas (same CSS size; the PNG is at the device's pixel ratio, as ipympl draws) and writes the texts into the app's
// HTML widgets at once; the overlay goes when the kernel says it has drawn that state (`drawn`), a frame after
// ipympl's own frame.
const FRAME_CLASS = "distlab-frame";
const FITS_CLASS = "distlab-fits"; // framecache.py's FITS_CLASS
const SETTLE_MS = 50; // after the kernel's `drawn`: ipympl's frame (sent before it) is decoded and painted

// the views of the widget `ref` (IPY_MODEL_...) now shown (a promise)
function widgetViews(manager, ref) {
  const id = String(ref).replace(/^IPY_MODEL_/, "");
  return manager.get_model(id).then((m) => Promise.all(Object.values(m.views || {})));
}

// a payload's PNG (a DataView: prefetch.js's withBuffers) decoded: {bitmap (once decoded), promise}
function decoded(png) {
  if (!png) return null;
  const bytes = new Uint8Array(png.buffer, png.byteOffset, png.byteLength);
  const ready = { bitmap: null, closed: false };
  ready.promise = createImageBitmap(new Blob([bytes], { type: "image/png" })).then((bitmap) => {
    if (ready.closed) bitmap.close();
    else ready.bitmap = bitmap;
    return bitmap;
  });
  return ready;
}

function closed(ready) {
  if (!ready) return;
  ready.closed = true;
  if (ready.bitmap) ready.bitmap.close();
  ready.bitmap = null;
}

function overlayOf(view) {
  const div = view.el.querySelector(".jupyter-matplotlib-canvas-div");
  if (!div) return null;
  let frame = div.querySelector(`canvas.${FRAME_CLASS}`);
  if (!frame) {
    frame = document.createElement("canvas");
    frame.className = FRAME_CLASS;
    Object.assign(frame.style, { position: "absolute", left: "0", top: "0", zIndex: "10", pointerEvents: "none" });
    div.appendChild(frame);
  }
  return { div, frame };
}

function paintOver(view, bitmap) {
  const found = overlayOf(view);
  if (!found) return;
  const { div, frame } = found;
  const base = div.querySelector(`canvas:not(.${FRAME_CLASS})`) || div;
  frame.width = bitmap.width;
  frame.height = bitmap.height;
  frame.style.width = base.style.width || `${base.clientWidth}px`;
  frame.style.height = base.style.height || `${base.clientHeight}px`;
  frame.getContext("2d").drawImage(bitmap, 0, 0);
  frame.style.display = "";
}

function setHtml(view, html) {
  const content = view.el.querySelector(".widget-html-content");
  if (content) content.innerHTML = html;
}

// the canvas's display as the kernel's layout says it
function kernelDisplay(view) {
  const layout = view.model.get("layout");
  const display = layout && layout.get ? layout.get("display") : null;
  return display || "";
}

// A canvas scaled down to a narrower output (FITS_CSS) stops at least_scale of its own width, where its smallest
// text is shown at framecache.py's MIN_TEXT_PX; past that its figure scrolls sideways. The floor follows the canvas's
// size (ipympl sizes it once its first frame comes, and again on a resize).
function keepTextReadable(view) {
  const div = view.el.querySelector(".jupyter-matplotlib-canvas-div");
  const canvas = div && div.querySelector("canvas");
  if (!canvas) return;
  if (view.distlabFloor) return view.distlabFloor();
  const floor = () => {
    const least = view.distlabLeast || 0, natural = canvas.width / (window.devicePixelRatio || 1);
    div.style.minWidth = least > 0 && natural > 0 ? `${Math.ceil(natural * least)}px` : "";
  };
  new MutationObserver(floor).observe(canvas, { attributes: true, attributeFilter: ["width"] });
  floor();
  view.distlabFloor = floor;
}

// Tab (and Shift+Tab) leaves the app's ipympl canvas. ipympl's canvas div is focusable (tabindex 0) and its keydown
// handler calls preventDefault on every key, to send it to matplotlib: a student tabbing through an app was held on
// the picture and could not reach the rest of the notebook (review v19: lesson 11's schedule and FSDP apps). The apps
// take no keys on the canvas, so Tab is stopped here, in the capture phase above the canvas div, before ipympl's
// handler: the browser moves the focus as it does everywhere else.
function letTabLeave(view) {
  if (view.el.dataset.distlabTab) return;
  view.el.dataset.distlabTab = "1";
  view.el.addEventListener(
    "keydown",
    (event) => {
      if (event.key === "Tab" && event.target !== view.el) event.stopPropagation();
    },
    true,
  );
}

export default {
  render({ model, el }) {
    el.classList.add("distlab-framecache");
    let canvasViews = [];
    let textViews = [];
    let controls = []; // the control models (prefetch.js keys the cache by their labels: controlLabel)
    const bitmaps = new Map(); // state id -> {bitmap, promise}: the PNGs of the current neighbourhood, decoded
    let neighbourhood = new Set(); // the state ids of the current neighbourhood
    let payloads = null; // id -> the PNG of a held payload (prefetch.js's cache)
    let painted = 0; // the cache hits painted so far (prefetch.js counts them in data-cache-hits)
    let generation = 0; // bumped by every change drawn from the cache
    const manager = model.widget_manager;
    const key = () => controls.map(controlLabel).join(KEY_SEPARATOR);
    // The texts of the payload drawn over the app, kept in its HTML widgets until the overlay goes: the kernel's
    // texts for another state (its answer to a change the student has left: a -> b -> a, b's status landing after a
    // was drawn from the cache) are written back over at once, after the widget's own view (registered before) and
    // again in a microtask (before the page paints), as its canvas stays under the overlay until `drawn` names the
    // state the controls show (issue 32)
    let overlayTexts = null;
    const keepTexts = () => {
      if (overlayTexts === null) return;
      overlayTexts.forEach((html, i) => (textViews[i] || []).forEach((v) => setHtml(v, html)));
    };
    const onText = () => {
      keepTexts();
      queueMicrotask(keepTexts);
    };
    const hooked = new Set(); // the HTML widgets' models onText listens to
    const find = () => {
      const canvas = model.get("canvas");
      if (canvas) {
        widgetViews(manager, canvas)
          .then((v) => {
            canvasViews = v;
            v.forEach((view) => view.el.classList.add(FITS_CLASS)); // framecache.py's FITS_CSS: fits a narrow output
            v.forEach((view) => {
              view.distlabLeast = model.get("least_scale");
              keepTextReadable(view);
            });
            v.forEach(letTabLeave);
          })
          .catch(() => {});
      }
      Promise.all((model.get("text_widgets") || []).map((ref) => widgetViews(manager, ref)))
        .then((v) => {
          textViews = v;
          for (const views of v) {
            for (const text of views) {
              if (!hooked.has(text.model)) {
                hooked.add(text.model);
                text.model.on("change", onText);
              }
            }
          }
        })
        .catch(() => {});
    };
    Promise.all((model.get("controls") || []).map((ref) => manager.get_model(String(ref).replace(/^IPY_MODEL_/, ""))))
      .then((models) => (controls = models))
      .catch(() => {});
    const onMessage = () => find(); // the app's views are made beside this one (and again when shown again)
    model.on("msg:custom", onMessage);
    const forget = (id) => {
      closed(bitmaps.get(id));
      bitmaps.delete(id);
    };
    const events = {
      stored: (id) => {
        forget(id);
        if (neighbourhood.has(id)) bitmaps.set(id, decoded(payloads(id)));
      },
      evicted: forget,
      based: (ids) => {
        neighbourhood = ids;
        for (const id of [...bitmaps.keys()]) if (!ids.has(id)) forget(id);
        for (const id of ids) if (!bitmaps.has(id) && payloads(id)) bitmaps.set(id, decoded(payloads(id)));
      },
    };
    const { view, stop, shownId, payload } = prefetching(model, el, events);
    payloads = (id) => (payload(id) || {}).png;
    // called by prefetch.js after a change drawn from the cache (view reads that payload) and on the model's changes
    const paint = () => {
      const hits = Number(el.getAttribute("data-cache-hits") || 0);
      if (hits === painted) return;
      painted = hits;
      generation += 1;
      const mine = generation;
      const shown = view.get("shown");
      const id = shownId();
      if (!bitmaps.has(id) && payloads(id)) bitmaps.set(id, decoded(payloads(id)));
      const ready = bitmaps.get(id);
      for (const canvas of canvasViews) {
        canvas.el.style.display = shown ? "" : "none";
        if (!shown || !ready) continue;
        if (ready.bitmap) paintOver(canvas, ready.bitmap);
        else ready.promise.then((b) => mine === generation && paintOver(canvas, b));
      }
      overlayTexts = view.get("texts") || [];
      keepTexts();
      el.setAttribute("data-overlay", "1");
    };
    const clear = () => {
      overlayTexts = null;
      for (const canvas of canvasViews) {
        const found = overlayOf(canvas);
        if (found) found.frame.style.display = "none";
        canvas.el.style.display = kernelDisplay(canvas);
      }
      textViews.forEach((views) => views.forEach((v) => setHtml(v, v.model.get("value"))));
      el.removeAttribute("data-overlay");
    };
    const onDrawn = () => {
      if (model.get("drawn") !== key() || !el.hasAttribute("data-overlay")) return;
      const mine = generation;
      requestAnimationFrame(() => setTimeout(() => mine === generation && clear(), SETTLE_MS));
    };
    const onLeast = () => {
      for (const canvas of canvasViews) {
        canvas.distlabLeast = model.get("least_scale");
        keepTextReadable(canvas);
      }
    };
    view.on("change", paint);
    model.on("change:drawn", onDrawn);
    model.on("change:least_scale", onLeast);
    find();
    return () => {
      view.off("change", paint);
      model.off("change:drawn", onDrawn);
      model.off("change:least_scale", onLeast);
      model.off("msg:custom", onMessage);
      for (const text of hooked) text.off("change", onText);
      stop();
      for (const id of [...bitmaps.keys()]) forget(id);
    };
  },
};
