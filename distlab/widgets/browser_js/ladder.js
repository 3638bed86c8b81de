// The OOM triage ladder (lesson 8b's TriageApp): memory per GPU of the given configuration and of each rung of the
// ladder of fixes, stacked by part, against the GPU's capacity. One position (no slider): each new ladder comes in
// one message and is drawn here, so its axes (exactly its bars on x; on y a range fixed by the capacity, so the
// capacity line stays put from one ladder to the next) cost the kernel nothing.
// frames: {parts: [names], bars: [[bar][part] GB]], labels: [bar names], faded: [[bar] bool] (a skipped rung),
//          totals: [[bar] text], clipped: [[bar] bool] (taller than the axis: cut, marked with a triangle),
//          top: GB (the axis: fixed by the capacity, about twice it), capacity: GB,
//          capacity_label (lines split by "\n"), mark: [[bar, text]] (the first rung that fits), unit,
//          colours: [one per part], capacity_colour (distlab.plots' colours: the lesson's static ladder and the
//          legend above the picture use the same)}
const LADDER_FIT = "#1a7f37";
const SKIPPED_ALPHA = 0.3;

function drawLadder(ctx, w, h, model, i) {
  const f = model.get("frames");
  const bars = (f.bars || [])[i];
  if (!bars || !bars.length) return;
  const faded = (f.faded || [])[i] || [];
  const totals = (f.totals || [])[i] || [];
  const clipped = (f.clipped || [])[i] || [];
  const yMax = f.top > 0 ? f.top : 1;
  ctx.font = uiFont(11);
  // x: exactly one slot per bar (no empty slot after the last rung); the labels turn when they do not fit a slot
  // the capacity's label right of the plot, clear of every bar and mark
  const left = turnedTitleLeft(ctx, yMax), right = 76, up = 30;
  const slot = (w - left - right) / bars.length;
  const labels = bars.map((_, b) => String((f.labels || [])[b] ?? ""));
  const widest = Math.max(...labels.map((s) => ctx.measureText(s).width));
  const turned = widest > slot * 0.92;
  const ANGLE = Math.PI / 5; // 36 degrees
  const bottom = Math.min(turned ? 14 + widest * Math.sin(ANGLE) + 8 : 24, (h - up) / 2); // a plot left above long names
  const plotW = w - left - right, plotH = h - up - bottom;
  const Y = (v) => up + plotH * (1 - Math.min(v, yMax) / yMax);
  yTicks(ctx, left, plotW, Y, yMax);
  ctx.save();
  ctx.translate(12, up + plotH / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.fillStyle = TEXT;
  ctx.fillText(`memory per GPU (${f.unit})`, 0, 0);
  ctx.restore();
  const barW = Math.min(slot * 0.6, 90);
  const showTotals = Math.max(0, ...totals.map((s) => ctx.measureText(String(s ?? "")).width)) <= slot * 0.98;
  // a text's baseline y, moved above the capacity line where the line would cross the text (a bar just under it, as
  // bars.js does: the line ran through "80.2 GB", the first rung that fits); a bar's total sits 2 px above the bar
  const cap = f.capacity ? Y(f.capacity) : null;
  const clearOfCapacity = (y) => (cap !== null && y - 13 < cap && cap < y + 2 ? cap - 3 : y);
  const totalY = (total) => clearOfCapacity(Y(total) - 2);
  try {
    bars.forEach((parts, b) => {
      const x = left + slot * b + (slot - barW) / 2, centre = x + barW / 2;
      ctx.globalAlpha = faded[b] ? SKIPPED_ALPHA : 1;
      let base = 0;
      parts.forEach((v, k) => {
        const lo = Y(base), hi = Y(base + v); // cut at the axis's top
        if (lo > hi) {
          ctx.fillStyle = f.colours[k % f.colours.length];
          ctx.fillRect(x, hi, barW, lo - hi);
        }
        base += v;
      });
      ctx.fillStyle = TEXT;
      let above = totalY(base);
      if (clipped[b]) { // a bar taller than the axis: a triangle on its cut top (its total in the text below)
        ctx.beginPath();
        ctx.moveTo(centre - 5, up - 2);
        ctx.lineTo(centre + 5, up - 2);
        ctx.lineTo(centre, up - 10);
        ctx.closePath();
        ctx.fill();
        above = up - 11;
      }
      ctx.textAlign = "center";
      ctx.textBaseline = "bottom";
      if (showTotals) ctx.fillText(String(totals[b] ?? ""), centre, above);
      // the rung's name under it
      ctx.fillStyle = faded[b] ? MUTED : TEXT;
      if (turned) {
        ctx.save();
        ctx.translate(centre, up + plotH + 6);
        ctx.rotate(-ANGLE);
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        ctx.fillText(labels[b], 0, 0);
        ctx.restore();
      } else {
        ctx.textBaseline = "top";
        ctx.fillText(labels[b], centre, up + plotH + 6);
      }
      ctx.globalAlpha = 1;
    });
  } finally {
    ctx.globalAlpha = 1; // a bar that failed to draw leaves no fading behind (the error overlay is drawn after)
  }
  // the capacity line over the bars, its label (one line per "\n") right of the plot
  if (f.capacity) {
    const y = Y(f.capacity);
    dashedLine(ctx, left, left + plotW, y, f.capacity_colour);
    ctx.fillStyle = f.capacity_colour;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    const lines = String(f.capacity_label || "").split("\n");
    lines.forEach((line, k) => ctx.fillText(line, left + plotW + 6, y + 13 * (k - (lines.length - 1) / 2)));
  }
  // the first rung that fits: a check mark and a word over it (not the colour alone)
  for (const [b, text] of (f.mark || [])[i] || []) {
    if (!Array.isArray(bars[b])) continue; // a mark past the last bar has nothing to stand on
    const centre = left + slot * (b + 0.5);
    ctx.font = uiFont(11, true);
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    const total = bars[b].reduce((a, v) => a + v, 0);
    const label = `\u2713 ${text}`, tw = ctx.measureText(label).width;
    const y = clearOfCapacity(showTotals ? totalY(total) - 14 : Y(total) - 3); // over the line
    ctx.fillStyle = "rgba(255, 255, 255, 0.85)"; // readable over the capacity line
    ctx.fillRect(centre - tw / 2 - 2, y - 13, tw + 4, 13);
    ctx.fillStyle = LADDER_FIT;
    ctx.fillText(label, centre, y);
    ctx.font = uiFont(11);
  }
}

// laid out again for an output down to 460 px wide (its bars' names and marks fit there)
drawLadder.layout = elasticLayout(460);

export default {
  render({ model, el }) {
    const { view, stop } = prefetching(model, el);
    const done = mountPicture(view, el, drawLadder);
    // one position: no slider, no play button (the controls above the picture change the ladder)
    for (const row of el.querySelectorAll(".distlab-controls")) row.style.display = "none";
    // the legend (model.legend, HTML distlab writes) above the bars, hidden with them at our message
    const legend = element("div", { class: "distlab-legend" }, "font-size: 12px; margin: 2px 0 4px");
    const canvas = el.querySelector("canvas.distlab-canvas");
    canvas.parentNode.insertBefore(legend, canvas);
    const showLegend = () => {
      legend.innerHTML = view.get("legend") || "";
      legend.hidden = Boolean((view.get("errors") || [])[0]) || !legend.innerHTML;
    };
    view.on("change", showLegend);
    showLegend();
    return () => {
      view.off("change", showLegend);
      done();
      stop();
    };
  },
};
