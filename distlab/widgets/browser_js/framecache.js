// The frame cache of the apps matplotlib draws (issue 32; distlab.widgets.framecache). The kernel sends, per state one
// control change away, {png (a binary buffer), texts: [status HTML, ...], shown}; prefetch.js keys them by the labels
// of the app's controls. A change to a cached state draws the PNG over the app's ipympl canvas (same CSS size; the
// PNG is at the device's pixel ratio, as ipympl draws) and writes the texts into the app's HTML widgets at once; the
// overlay goes when the kernel says it has drawn that state (`drawn`), a frame after ipympl's own frame.
const FRAME_CLASS = "distlab-frame";
const SETTLE_MS = 50; // after the kernel's `drawn`: ipympl's frame (sent before it) is decoded and painted

// the views of the widget `ref` (IPY_MODEL_...) now shown (a promise)
function widgetViews(manager, ref) {
  const id = String(ref).replace(/^IPY_MODEL_/, "");
  return manager.get_model(id).then((m) => Promise.all(Object.values(m.views || {})));
}

// the payload's PNG decoded once, when it arrives: a cache hit then paints within its own frame
function decode(payload) {
  if (!payload.png || payload.ready) return;
  const blob = new Blob([payload.png], { type: "image/png" });
  payload.ready = createImageBitmap(blob).then((bitmap) => (payload.bitmap = bitmap));
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

export default {
  render({ model, el }) {
    el.classList.add("distlab-framecache");
    let canvasViews = [];
    let textViews = [];
    let generation = 0; // bumped by every change drawn from the cache
    const find = () => {
      const manager = model.widget_manager;
      const canvas = model.get("canvas");
      if (canvas) widgetViews(manager, canvas).then((v) => (canvasViews = v)).catch(() => {});
      Promise.all((model.get("texts") || []).map((ref) => widgetViews(manager, ref)))
        .then((v) => (textViews = v))
        .catch(() => {});
    };
    const hit = (payload) => {
      generation += 1;
      const mine = generation;
      for (const view of canvasViews) {
        view.el.style.display = payload.shown ? "" : "none";
        if (!payload.shown) continue;
        if (payload.bitmap) paintOver(view, payload.bitmap);
        else if (payload.ready) payload.ready.then((b) => mine === generation && paintOver(view, b));
      }
      (payload.texts || []).forEach((html, i) => (textViews[i] || []).forEach((view) => setHtml(view, html)));
      el.setAttribute("data-overlay", "1");
    };
    const clear = () => {
      for (const view of canvasViews) {
        const found = overlayOf(view);
        if (found) found.frame.style.display = "none";
        view.el.style.display = kernelDisplay(view);
      }
      textViews.forEach((views) => views.forEach((view) => setHtml(view, view.model.get("value"))));
      el.removeAttribute("data-overlay");
    };
    const stored = (payload) => {
      decode(payload);
      find(); // the app's views are made beside this one (and again when it is shown again): found as they come
    };
    const { stop, key } = prefetching(model, el, { stored, hit });
    const onDrawn = () => {
      if (model.get("drawn") !== key() || !el.hasAttribute("data-overlay")) return;
      const mine = generation;
      requestAnimationFrame(() => setTimeout(() => mine === generation && clear(), SETTLE_MS));
    };
    model.on("change:drawn", onDrawn);
    find();
    return () => {
      model.off("change:drawn", onDrawn);
      stop();
    };
  },
};
