// distlab browser pictures: the part every picture shares (Python prepends it to each picture's module).
// Plain ES module text, no build step. The physics is computed in Python; these functions only draw
// the data they are sent. A picture holds the data of EVERY position of its slider, so stepping,
// playing and dragging redraw here, in the browser, with no round trip to the kernel.

// Okabe & Ito (2008), "Color Universal Design": eight colours told apart with every common colour-vision
// deficiency. Beyond seven series, colours of maximum contrast (SERIES_COLOURS; the ring's stripe row is a second cue).
const OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"];
const TEXT = "#1f2328";
// The canvas's font family: a canvas font cannot name a CSS variable (a font string with var() is ignored and the
// canvas keeps 10px sans-serif), so mountPicture reads JupyterLab's --jp-ui-font-family from the page once.
let UI_FONT_FAMILY = "sans-serif";

// The smallest font size (CSS px) a picture's text is shown at: a picture wider than its output is scaled down to fit
// it, but never so far that its smallest font falls under this (a 720 px picture in a 468 px output, a 900 px window,
// showed its 11 px text at 7 px, and at 5 px in a narrower one: review v20); a picture that can lay itself out again
// narrower (draw.layout: the training lab stacks its two charts) does that first, and one that still does not fit
// scrolls sideways in its frame.
const MIN_TEXT_PX = 10;
// The smallest font size a draw function asked uiFont for since the last resetFontRecord(): what displayScale keeps.
let smallestFontPx = Infinity;
function resetFontRecord() {
  smallestFontPx = Infinity;
}

// A canvas font string: uiFont(11) is "11px <family>", uiFont(11, true) its bold.
function uiFont(px, bold) {
  smallestFontPx = Math.min(smallestFontPx, px);
  return `${bold ? "bold " : ""}${px}px ${UI_FONT_FAMILY}`;
}

// A draw function's layout (mountPicture: draw.layout) for a picture that lays itself out at any width from `least`
// px up to its own: in an output narrower than the picture, drawn as wide as the output (not under `least`), as tall.
function elasticLayout(least) {
  return (ctx, model, available) => {
    const width = model.get("width");
    if (!(available > 0) || available >= width) return null;
    return { width: Math.max(least, Math.floor(available)), height: model.get("height") };
  };
}

// A draw function's layout for a picture with two arrangements: from `beside` px up to its own width, as
// elasticLayout(beside) lays it out (its own arrangement, as wide as the output); in an output narrower than `beside`,
// a narrow arrangement (what stood beside the plot moved under or over it: bars.js's legend, ladder.js's capacity
// label) as wide as the output, not under `least`, and `extra(ctx, model, width)` px taller than the model's height.
// The draw function knows the narrow arrangement by its width: under `beside`.
function narrowingLayout(beside, least, extra) {
  const elastic = elasticLayout(beside);
  return (ctx, model, available) => {
    const own = model.get("width");
    if (!(available > 0) || available >= own || available >= beside) return elastic(ctx, model, available);
    const width = Math.max(least, Math.floor(available));
    return { width, height: model.get("height") + Math.max(0, Math.ceil(extra(ctx, model, width) || 0)) };
  };
}

// The factor a picture `width` px wide is shown at in an output `available` px wide (0: not laid out yet) whose
// smallest text is `smallest` px: down to fit the output, but not under MIN_TEXT_PX for that text, never up.
function displayScale(width, available, smallest) {
  const fit = available > 0 ? Math.min(1, available / width) : 1;
  return Math.max(fit, Math.min(1, MIN_TEXT_PX / smallest));
}
const MUTED = "#57606a";

function lighten(hex, amount) {
  const n = parseInt(hex.slice(1), 16);
  const mix = (c) => Math.round(c + (255 - c) * amount);
  return `rgb(${mix((n >> 16) & 255)}, ${mix((n >> 8) & 255)}, ${mix(n & 255)})`;
}

// One colour per series (a GPU of the ring, a part of a bar), never black: the pictures draw their outlines and busy
// arrows in black (the ring's GPU 7 was black, so "holds GPU 7's data" and "just received" looked alike). Seven
// Okabe-Ito colours, then nine of Kelly's (1965) and Tol's (2021) muted colours of maximum contrast, each chosen as
// the farthest (CIELAB) from those before it and from the ring's empty grey: 16 colours no two of which are within
// 26 units of CIELAB (the seven lightened Okabe-Ito colours they replace put light sky blue 12 from light blue).
const SERIES_COLOURS = [
  ...OKABE_ITO.filter((c) => c !== "#000000"),
  "#654522",
  "#332288",
  "#BE0032",
  "#C2B280",
  "#F99379",
  "#848482",
  "#882255",
  "#8DB600",
  "#882D17",
];

function seriesColour(i) {
  return SERIES_COLOURS[i % SERIES_COLOURS.length];
}

// A number and its unit kept on one line: the space between them a no-break space. The text under a picture wraps at
// the output's width, and at a 900 px window the training lab broke "pipeline bubble 4.84 / s" (review v19); the
// status panels' message_html (widgets/common.py, _UNIT_GAP) does the same with &nbsp;.
const UNIT_GAP = /(\d) (?=(?:[kMGTP]?B(?:\/s)?|[kMGT]iB|ms|µs|ns|s|%|W|[kMG]Hz|[TP]FLOP\/s|GPUs?|nodes?|days?|h|min)(?![\w/]))/g;
function keepUnits(text) {
  return String(text).replace(UNIT_GAP, "$1\u00a0");
}

// The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k at or above x (stable axis ranges, as in distlab.plots).
function niceCeiling(x) {
  if (!(x > 0)) return 1;
  const k = Math.floor(Math.log10(x));
  for (const m of [1, 1.5, 2, 3, 4, 5, 6, 8, 10]) {
    const v = m * 10 ** k;
    if (v >= x * (1 - 1e-12)) return v;
  }
  return 10 ** (k + 1);
}

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const k = Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * 10 ** k >= raw) return m * 10 ** k;
  }
  return 10 ** (k + 1);
}

// The ticks of a y axis from 0 to yMax: [value, label] at a nice step.
function yTickLabels(yMax) {
  const ticks = [], tick = niceStep(yMax, 5);
  for (let v = 0; v <= yMax + 1e-9; v += tick) ticks.push([v, `${+v.toPrecision(6)}`]);
  return ticks;
}

// A y axis of a plot whose x runs from `left` over `plotW` pixels: ticks at a nice step, light grid lines, labels.
function yTicks(ctx, left, plotW, Y, yMax) {
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const [v, label] of yTickLabels(yMax)) {
    ctx.strokeStyle = "#e5e7eb";
    ctx.beginPath();
    ctx.moveTo(left, Y(v));
    ctx.lineTo(left + plotW, Y(v));
    ctx.stroke();
    ctx.fillStyle = TEXT;
    ctx.fillText(label, left - 4, Y(v));
  }
}

// Where a plot with an axis title turned up at x = 12 begins (bars.js, ladder.js): at least 56 px, more when yTicks'
// widest label in ctx's font would come within 2 px of the title (its em, 11 px, about x = 12 reaches 17.5 px; the
// labels end 4 px left of the plot): "10000" in a wide font touched "per GPU (GB)".
function turnedTitleLeft(ctx, yMax) {
  const widest = Math.max(...yTickLabels(yMax).map(([, label]) => ctx.measureText(label).width));
  return Math.max(56, Math.ceil(widest) + 24);
}

// `text` as lines of whole words each at most `width` pixels wide in ctx's font (a word wider than that alone on
// its line, cut to fit with an ellipsis): a legend's label that would run past its column (bars.js, lab.js)
function wrapWords(ctx, text, width) {
  const lines = [];
  for (const word of String(text).split(" ")) {
    const last = lines.length ? lines[lines.length - 1] + " " + word : null;
    if (last !== null && ctx.measureText(last).width <= width) lines[lines.length - 1] = last;
    else lines.push(word);
  }
  return lines.map((line) => {
    let cut = line;
    while (cut.length > 1 && ctx.measureText(cut === line ? cut : cut + "…").width > width) cut = cut.slice(0, -1);
    return cut === line ? cut : cut + "…";
  });
}

// A horizontal dashed line (a GPU's capacity) from x0 to x1 at height y.
function dashedLine(ctx, x0, x1, y, colour) {
  ctx.strokeStyle = colour;
  ctx.lineWidth = 2;
  ctx.setLineDash([6, 4]);
  ctx.beginPath();
  ctx.moveTo(x0, y);
  ctx.lineTo(x1, y);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.lineWidth = 1;
}

// Set a node's text only where it differs: the same text set again still replaces its text node (a layout to redo).
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function element(tag, attributes, style) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes || {})) node.setAttribute(k, v);
  if (style) node.style.cssText = style;
  return node;
}

// Mount a picture: a canvas at the device's pixel ratio, a play button (when the model says playable), a native
// range input for the position, and a text summary (an aria-live region) of the numbers shown.
// draw(ctx, width, height, model, index) paints position `index` (0 = the slider's minimum).
function mountPicture(model, el, draw) {
  const family = getComputedStyle(el).getPropertyValue("--jp-ui-font-family").trim();
  if (family) UI_FONT_FAMILY = family;
  const root = element("div", { class: "distlab-picture" },
    `font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; color: ${TEXT}; max-width: 100%`);
  // in a frame as wide as the output (a 900 px window: every picture but the ring is wider than its output): laid out
  // again for the output's width where the picture can (draw.layout), else scaled down whole, its aspect kept, to
  // fit, but its text never under MIN_TEXT_PX (displayScale): past that the frame scrolls sideways. A click is mapped
  // back to the drawing's coordinates (canvasPoint).
  const frame = element("div", { class: "distlab-frame" }, "max-width: 100%; overflow-x: auto");
  const canvas = element("canvas", { role: "img", class: "distlab-canvas" }, "display: block");
  frame.append(canvas);
  const row = element("div", { class: "distlab-controls" }, "display: flex; align-items: center; gap: 8px; margin: 4px 0");
  const play = element("button", { type: "button", class: "distlab-play", "aria-pressed": "false" },
    "min-width: 72px; padding: 2px 8px");
  // the slider 260 px wide where the output has room, narrower where it has not (down to 60 px), its caption on one
  // line: at 260 px the row ran 5-75 px past an output 300-345 px wide (the ring's, with its play button, the most),
  // over a picture that fit it
  const label = element("label", {}, "display: flex; align-items: center; gap: 6px; min-width: 0");
  const caption = element("span", { class: "distlab-label" }, "white-space: nowrap");
  const slider = element("input", { type: "range", step: "1", class: "distlab-slider" },
    "width: 260px; min-width: 60px; flex: 0 1 auto");
  const readout = element("output", { class: "distlab-readout" }, "min-width: 2.5em; font-variant-numeric: tabular-nums");
  const summary = element("div", { class: "distlab-summary", role: "status", "aria-live": "polite" },
    "white-space: pre-wrap; font-family: var(--jp-code-font-family, monospace); font-size: 12px; margin-top: 4px");
  label.append(caption, slider);
  row.append(play, label, readout);
  root.append(row, frame, summary);
  el.appendChild(root);

  let timer = null;
  const stop = () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
    play.textContent = "\u25B6 play";
    play.setAttribute("aria-pressed", "false");
  };
  const setValue = (v) => {
    model.set("value", v);
    model.save_changes();
  };

  let available = 0; // the output's width (px) the last paint laid the picture out for
  // the output's width as the ResizeObserver last read it (null: none yet, read at the paint): reading clientWidth in
  // a paint forced a layout of the whole notebook after the control's own DOM changes (3-4 ms in a trace; issue 32)
  let measured = null;
  function paint() {
    available = measured ?? frame.clientWidth;
    const ctx = canvas.getContext("2d");
    const natural = { width: model.get("width"), height: model.get("height") };
    const { width: w, height: h } = (draw.layout && draw.layout(ctx, model, available)) || natural;
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const options = model.get("options") || []; // a selection picture: the slider runs over these values
    const lo = model.get("min");
    const hi = model.get("max");
    const value = model.get("value");
    const index = options.length ? options.indexOf(value) : value - lo;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    resetFontRecord();
    const errors = model.get("errors") || [];
    const error = errors.length ? errors[Math.min(index, errors.length - 1)] : "";
    const summaries = model.get("summaries") || [];
    try {
      if (index >= 0 && index < summaries.length) draw(ctx, w, h, model, index);
    } catch (exc) {
      console.error("distlab picture:", exc);
    }
    const shown = displayScale(w, available, smallestFontPx);
    canvas.style.width = `${w * shown}px`;
    canvas.style.height = `${h * shown}px`;
    // no picture at an invalid position: our message (the summary below) stands where it would be, once, with no
    // blank or faded canvas above it (issue 31)
    canvas.style.display = error ? "none" : "block";
    setText(caption, model.get("description"));
    slider.min = String(options.length ? 0 : lo);
    slider.max = String(options.length ? options.length - 1 : hi);
    slider.value = String(options.length ? index : value);
    slider.disabled = model.get("disabled");
    slider.setAttribute("aria-valuetext", `${model.get("description")} ${value}`);
    setText(readout, String(value));
    play.hidden = !model.get("playable");
    play.disabled = model.get("disabled");
    canvas.setAttribute("aria-label", model.get("alt") || `${model.get("description")} ${value}`);
    summary.style.color = error ? "#b3261e" : TEXT;
    summary.textContent = error ? `Cannot compute: ${error}` : keepUnits(summaries[index] ?? "");
  }

  // The keys a range input and a button use are theirs: JupyterLab binds ArrowLeft/ArrowRight in command mode
  // (collapse/expand headings) on any focused element that is not editable, a range input included.
  const OWN_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown", " ", "Enter"]);
  for (const control of [slider, play]) {
    control.addEventListener("keydown", (event) => {
      if (OWN_KEYS.has(event.key) && !event.shiftKey && !event.ctrlKey && !event.metaKey) event.stopPropagation();
    });
  }
  // the value at slider position k, and the value after `value` (null at the end)
  const valueAt = (k) => {
    const options = model.get("options") || [];
    return options.length ? options[k] : k;
  };
  const next = (value) => {
    const options = model.get("options") || [];
    if (options.length) {
      const k = options.indexOf(value);
      return k + 1 < options.length ? options[k + 1] : null;
    }
    return value < model.get("max") ? value + 1 : null;
  };
  const first = () => valueAt(Number(slider.min));
  slider.addEventListener("input", () => setValue(valueAt(Number(slider.value))));
  play.addEventListener("click", () => {
    if (timer !== null) return stop();
    if (next(model.get("value")) === null) setValue(first());
    play.textContent = "\u275A\u275A pause";
    play.setAttribute("aria-pressed", "true");
    timer = setInterval(() => {
      const v = next(model.get("value"));
      if (v === null) return stop();
      setValue(v);
    }, Math.max(16, model.get("interval_ms")));
  });
  stop();
  model.on("change", paint);
  model.on("change:min change:max change:options change:frames", stop);
  // laid out again when the output's width changes (the window, a side panel; 0 until the output is shown)
  const resized = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => {
    measured = frame.clientWidth;
    if (measured !== available) paint();
  });
  if (resized) resized.observe(frame);
  paint();
  return () => {
    if (resized) resized.disconnect();
    stop();
    model.off("change", paint);
    model.off("change:min change:max change:options change:frames", stop);
  };
}

// A pointer event's point in the drawing's own coordinates (width x height, as draw() paints them), where the canvas
// is shown scaled (displayScale).
function canvasPoint(canvas, event, width, height) {
  const box = canvas.getBoundingClientRect();
  return {
    x: (event.clientX - box.left) * (box.width ? width / box.width : 1),
    y: (event.clientY - box.top) * (box.height ? height / box.height : 1),
  };
}

// Typed views of a binary trait (ipywidgets sends bytes as a DataView), copied once per new buffer.
const typedCache = new WeakMap();
function typed(view, Kind) {
  if (!view || !view.byteLength) return new Kind(0);
  let entry = typedCache.get(view);
  if (!entry) {
    entry = new Map();
    typedCache.set(view, entry);
  }
  if (!entry.has(Kind)) {
    const bytes = view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
    entry.set(Kind, new Kind(bytes));
  }
  return entry.get(Kind);
}
