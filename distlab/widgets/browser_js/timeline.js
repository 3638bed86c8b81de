// The pipeline bubble grid: stages (rows) x time, one simulated distlab.pipeline timeline per slider position.
// times (float32 pairs: start, end) and codes (uint8 pairs: stage, kind * 2 + microbatch parity) hold the ops of
// every position back to back; frames.positions[i] = [first op, op count, step time, ideal time].
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
  const left = 58, right = 10, top = 6, bottom = 22;
  const plotW = w - left - right, plotH = h - top - bottom;
  const xMax = niceCeiling(step * 1.02);
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
  ctx.font = uiFont(11);
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

export default {
  render({ model, el }) {
    return mountPicture(model, el, drawTimeline);
  },
};
