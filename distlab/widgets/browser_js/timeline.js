// The pipeline bubble grid: stages (rows) x time, one simulated distlab.pipeline timeline per slider position.
// times (float32 pairs: start, end) and codes (uint8 pairs: stage, kind * 2 + microbatch parity) hold the ops of
// every position back to back; frames.positions[i] = [first op, op count, step time, ideal time]. The app's other
// controls are answered from the browser's cache of the states one change away (prefetch.js; issue 32).
const KIND_COLOURS = ["#0072B2", "#E69F00", "#009E73"]; // F, B, W (Okabe-Ito blue, orange, bluish green)
const IDLE = "#d9d9d9";
const STEP_LINE = "#D55E00";

function drawTimeline(ctx, w, h, model, i) {
  const f = model.get("frames");
  const [first, count, step, ideal] = f.positions[i];
  if (count === 0) return; // invalid input or still being simulated: the summary says which
  const stages = f.stages;
  const times = typed(model.get("times"), Float32Array);
  const codes = typed(model.get("codes"), Uint8Array);
  ctx.font = uiFont(11);
  // the stage labels' column: at least 58 px, wider when "stage 15" is (4 px to the grid, 4 px to the canvas's edge;
  // in a wide font it ran past the left edge)
  const left = Math.max(58, Math.ceil(ctx.measureText(`stage ${stages - 1}`).width) + 8);
  const xMax = niceCeiling(step * 1.02);
  // the last tick's label (centred on its tick) inside the canvas: "100" reached past its right edge
  const right = Math.max(10, Math.ceil(ctx.measureText(`${+xMax.toPrecision(6)}`).width / 2) + 2);
  const top = 6, bottom = 22;
  const plotW = w - left - right, plotH = h - top - bottom;
  const X = (x) => left + (x / xMax) * plotW;
  const rowH = plotH / stages;
  const colours = f.colours || { kinds: KIND_COLOURS, idle: IDLE, step: STEP_LINE }; // the legend's, from the kernel
  const palette = colours.kinds.flatMap((c) => [c, lighten(c, 0.3)]);

  ctx.fillStyle = colours.idle;
  ctx.fillRect(X(0), top, X(step) - X(0), plotH);
  for (let k = first; k < first + count; k++) {
    const s = codes[2 * k], code = codes[2 * k + 1];
    const x0 = X(times[2 * k]), x1 = X(times[2 * k + 1]);
    ctx.fillStyle = palette[code];
    ctx.fillRect(x0, top + s * rowH, Math.max(0.5, x1 - x0), rowH);
  }
  if (stages <= 32) { // thin white lines between stages
    ctx.strokeStyle = "#ffffff";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let s = 1; s < stages; s++) {
      ctx.moveTo(X(0), top + s * rowH);
      ctx.lineTo(X(step), top + s * rowH);
    }
    ctx.stroke();
  }
  ctx.lineWidth = 2;
  ctx.strokeStyle = colours.step;
  ctx.beginPath();
  ctx.moveTo(X(step), top);
  ctx.lineTo(X(step), top + plotH);
  ctx.stroke();
  ctx.lineWidth = 1.2;
  ctx.strokeStyle = TEXT;
  ctx.setLineDash([4, 3]);
  ctx.beginPath();
  ctx.moveTo(X(ideal), top);
  ctx.lineTo(X(ideal), top + plotH);
  ctx.stroke();
  ctx.setLineDash([]);

  ctx.fillStyle = TEXT;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const every = Math.ceil(stages / Math.max(1, Math.floor(plotH / 13)));
  for (let s = 0; s < stages; s += every) ctx.fillText(`stage ${s}`, left - 4, top + (s + 0.5) * rowH);
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const tick = niceStep(xMax, 8);
  ctx.strokeStyle = MUTED;
  ctx.lineWidth = 1;
  for (let x = 0; x <= xMax + 1e-9; x += tick) {
    ctx.beginPath();
    ctx.moveTo(X(x), top + plotH);
    ctx.lineTo(X(x), top + plotH + 4);
    ctx.stroke();
    ctx.fillText(`${+x.toPrecision(6)}`, X(x), top + plotH + 6);
  }
}

// The colour legend above the grid, from the same data as the grid (so a change drawn from the browser's cache
// updates it too): frames.legend = [the legend without W, with W] (HTML from distlab.plots.pipeline.legend_html),
// the one with W where the position's ops include a W op (so it names no colour the grid does not draw; issue 31).
// A position with no ops (invalid, or still being simulated) keeps the legend shown last.
function mountLegend(model, el) {
  const legend = element("div", { class: "distlab-legend" }, "margin: 2px 0 4px 0");
  el.appendChild(legend);
  let shown = null;
  const paint = () => {
    const f = model.get("frames") || {};
    const position = f.positions && f.positions[model.get("value") - model.get("min")];
    if (!f.legend || !position || position[1] === 0) return;
    const [first, count] = position;
    const codes = typed(model.get("codes"), Uint8Array);
    let split = 0;
    for (let k = first; k < first + count && !split; k++) if (codes[2 * k + 1] >> 1 === 2) split = 1;
    if (f.legend[split] !== shown) {
      shown = f.legend[split];
      legend.innerHTML = shown; // the kernel's own HTML (plots.pipeline.legend_html), as an ipywidgets HTML shows it
    }
  };
  model.on("change", paint);
  paint();
  return () => model.off("change", paint);
}

// laid out again for an output down to 340 px wide (the time axis narrower, the stage names as they were)
drawTimeline.layout = elasticLayout(340);

export default {
  render({ model, el }) {
    const { view, stop } = prefetching(model, el);
    const unlegend = mountLegend(view, el);
    const unmount = mountPicture(view, el, drawTimeline);
    return () => {
      unmount();
      unlegend();
      stop();
    };
  },
};
