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
// The capacity's label right of the plot (76 px) down to LADDER_BESIDE px wide; narrower, down to LADDER_LEAST, a key
// above the plot's right end instead (a dashed sample and the label's lines on one line, wrapped to the room there:
// ladderKey), the picture as much taller: beside the plot it left a 400 px output too little room for five rungs, and
// "84.9 GB" ran into the first fit's "\u2713 first fit".
const LADDER_BESIDE = 460;
const LADDER_LEAST = 320;
const LABEL_BESIDE = 76;
const NARROW_RIGHT = 12; // the narrow arrangement's margin right of the plot
const ANGLE = Math.PI / 5; // 36 degrees: the rungs' names turned when they do not fit their slots

// The narrow arrangement's key of the capacity line, above the plot of a picture `w` px wide whose plot begins at
// `left` and ends `right` px from the edge: its lines (the label's lines joined, wrapped to the plot's width less the
// dashed sample), where its text begins (x: the widest line ends at the plot's right end) and the band it takes
// above the plot (height: 0 with no capacity).
function ladderKey(ctx, f, w, left, right) {
  if (!f.capacity) return { lines: [], x: left, height: 0 };
  ctx.font = uiFont(11);
  const text = String(f.capacity_label || "").split("\n").join(", ");
  const lines = wrapWords(ctx, text, w - right - left - 24);
  const widest = Math.max(...lines.map((line) => ctx.measureText(line).width));
  return { lines, x: Math.max(left + 24, w - right - widest), height: 8 + 13 * lines.length };
}

// The x geometry of a ladder of `bars` in a picture `w` px wide, `right` px of it right of the plot (ctx in the 11 px
// font): exactly one slot per bar (no empty slot after the last rung), the plot beginning at `left`; each rung's name
// (labels), turned `angle` when the widest does not fit a slot; and the room the names take under the plot (names).
function ladderColumns(ctx, f, bars, w, right) {
  let left = turnedTitleLeft(ctx, f.top > 0 ? f.top : 1);
  const labels = bars.map((_, b) => String((f.labels || [])[b] ?? ""));
  const widths = labels.map((s) => ctx.measureText(s).width), widest = Math.max(...widths);
  const turned = widest > ((w - left - right) / bars.length) * 0.92;
  if (turned) {
    // the plot begins far enough right for every turned name to end inside the canvas (its left end, 1 px in):
    // "1 micro_batch_size=2", the second rung's, ran past the left edge of a narrow picture. Not past a third of the
    // picture: a name longer than that (none the app writes) would leave no plot
    const n = bars.length, most = Math.max(left, Math.floor(w / 3));
    widths.forEach((tw, b) => {
      const reach = tw * Math.cos(ANGLE) + 5.5 * Math.sin(ANGLE) + 1, at = (b + 0.5) / n;
      left = Math.min(most, Math.max(left, Math.ceil((reach - (w - right) * at) / (1 - at))));
    });
  }
  const slot = (w - left - right) / bars.length;
  // turned more steeply where the slots are so narrow that names turned 36 degrees would overprint each other (their
  // lines 13 px apart at least: a dozen rungs in a narrow picture)
  const angle = turned ? Math.max(ANGLE, Math.asin(Math.min(1, 13 / slot))) : ANGLE;
  return { left, slot, labels, turned, angle, names: turned ? 14 + widest * Math.sin(angle) + 8 : 24 };
}

function drawLadder(ctx, w, h, model, i) {
  const f = model.get("frames");
  const bars = (f.bars || [])[i];
  if (!bars || !bars.length) return;
  const faded = (f.faded || [])[i] || [];
  const totals = (f.totals || [])[i] || [];
  const clipped = (f.clipped || [])[i] || [];
  const yMax = f.top > 0 ? f.top : 1;
  ctx.font = uiFont(11);
  // the capacity's label right of the plot, clear of every bar and mark; in the narrow arrangement a key above it
  const narrow = w < LADDER_BESIDE, right = narrow ? NARROW_RIGHT : LABEL_BESIDE;
  const key = narrow ? ladderKey(ctx, f, w, turnedTitleLeft(ctx, yMax), right) : null;
  const up = 30 + (key ? key.height : 0);
  const { left, slot, labels, turned, angle, names } = ladderColumns(ctx, f, bars, w, right);
  const bottom = Math.min(names, (h - up) / 2); // a plot left above long names
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
  const written = []; // each total's box [x0, y0, x1, y1], for the mark to keep clear of
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
      if (showTotals) {
        const text = String(totals[b] ?? ""), half = ctx.measureText(text).width / 2;
        ctx.fillText(text, centre, above);
        written.push([centre - half, above - 13, centre + half, above]);
      }
      // the rung's name under it
      ctx.fillStyle = faded[b] ? MUTED : TEXT;
      if (turned) {
        ctx.save();
        ctx.translate(centre, up + plotH + 6);
        ctx.rotate(-angle);
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
    if (key) { // the key above the plot's right end: a dashed sample, then the label
      dashedLine(ctx, key.x - 24, key.x - 6, 4 + 6.5, f.capacity_colour);
      key.lines.forEach((line, k) => ctx.fillText(line, key.x, 4 + 6.5 + 13 * k));
    } else {
      const lines = String(f.capacity_label || "").split("\n");
      lines.forEach((line, k) => ctx.fillText(line, left + plotW + 6, y + 13 * (k - (lines.length - 1) / 2)));
    }
  }
  // the first rung that fits: a check mark and a word over it (not the colour alone)
  for (const [b, text] of (f.mark || [])[i] || []) {
    if (!Array.isArray(bars[b])) continue; // a mark past the last bar has nothing to stand on
    ctx.font = uiFont(11, true);
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    const total = bars[b].reduce((a, v) => a + v, 0);
    const label = `\u2713 ${text}`, tw = ctx.measureText(label).width;
    // over its bar, moved in where it would run past the plot's left end, or its right end (where the capacity's
    // label begins: the eighth rung's ran into "84.9 GB" at 460 px), or, in the narrow arrangement, past the canvas
    const end = key ? w - 2 : left + plotW;
    const centre = Math.min(Math.max(left + slot * (b + 0.5), left + tw / 2 + 2), end - tw / 2);
    let y = clearOfCapacity(showTotals ? totalY(total) - 14 : Y(total) - 3); // over the line
    // and over any other rung's total it would overprint (the rung before, just over the capacity: its "91.5 GB"
    // stood where a narrow slot put "\u2713 first fit"), each move up clear of the line again; never past the top
    for (let moved = true; moved && y > 14;) {
      moved = false;
      for (const [x0, y0, x1, y1] of written) {
        if (x0 < centre + tw / 2 + 2 && centre - tw / 2 - 2 < x1 && y0 < y && y - 13 < y1) {
          y = Math.max(14, clearOfCapacity(y0));
          moved = true;
        }
      }
    }
    ctx.fillStyle = "rgba(255, 255, 255, 0.85)"; // readable over the capacity line
    ctx.fillRect(centre - tw / 2 - 2, y - 13, tw + 4, 13);
    ctx.fillStyle = LADDER_FIT;
    ctx.fillText(label, centre, y);
    ctx.font = uiFont(11);
  }
}

// laid out again for an output down to LADDER_BESIDE px wide, the capacity's label right of the plot; narrower, down
// to LADDER_LEAST, its key above the plot, the picture as much taller as the key needs, and taller again where the
// rungs' names, turned steeply in narrow slots, need more than half the height under the key (fifteen rungs in a
// 320 px output ran past the bottom)
drawLadder.layout = narrowingLayout(LADDER_BESIDE, LADDER_LEAST, (ctx, model, width) => {
  const f = model.get("frames");
  if (!f || !f.bars) return 0;
  ctx.font = uiFont(11);
  const key = ladderKey(ctx, f, width, turnedTitleLeft(ctx, f.top > 0 ? f.top : 1), NARROW_RIGHT).height;
  let names = 0;
  for (const bars of f.bars) {
    if (bars && bars.length) names = Math.max(names, ladderColumns(ctx, f, bars, width, NARROW_RIGHT).names);
  }
  return key + Math.max(0, 2 * names - (model.get("height") - 30));
});

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
