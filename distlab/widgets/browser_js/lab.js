// The training lab's bars (lesson 7): memory per GPU against the GPU's capacity (left), the step-time breakdown
// (right), for every position of the slider (the node count).
// frames: {memory_parts: [names], memory: [position][part] GB, memory_top: GB (the axis: every total and the capacity, at most 2x it),
//          capacity: GB, capacity_label, usable: GB or null (the capacity less the recipe's reserve, what the
//          verdict compares with), usable_label, step_parts: [names], step: [position][part] seconds,
//          step_text: [position][part] the seconds as text, step_total: [position] text, memory_total: [position]
//          text, fits: [position] bool (memory), verdict: [position] text, runs: [position] bool (feasible: fits and
//          no other problem), gpus: [position] count}
// A position still being computed has empty lists: nothing is drawn there (its text says so). A position that cannot
// run (runs false) has its memory but empty step lists: no step-time bar, a note in its place.
const MEMORY_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7"];
// step parts, by name (Okabe & Ito; the bubble grey, as idle time is grey in the bubble grid). Every part the step
// model prices is named: one left out took the series colour of its position, and the overlap slowdown's was the EP
// all-to-all's sky blue (review v19); the all-to-all is purple, as in distlab.step_parts.
const STEP_COLOURS = {
  "compute": "#0072B2",
  "overlap slowdown": "#56B4E9",
  "TP communication": "#E69F00",
  "CP communication (exposed)": "#CC79A7",
  "EP all-to-all": "#6A3D9A",
  "pipeline bubble": "#BBBBBB",
  "pipeline p2p": "#F0E442",
  "activation offload (exposed)": "#8C6D1F",
  "DP communication (exposed)": "#D55E00",
  "optimizer step": "#009E73",
};
const LAB_CAPACITY = "#b3261e"; // red, far from every part colour (the orange gradients read as it: review v18)
const FIT_GOOD = "#1a7f37";
const FIT_BAD = "#b3261e";

function drawMemory(ctx, f, i, x0, width, h) {
  const parts = f.memory[i] || [];
  const left = x0 + 46, up = 24, bottom = 50;
  const plotW = 70, plotH = h - up - bottom;
  const yMax = niceCeiling((f.memory_top || 1) * 1.08);
  const Y = (v) => up + plotH * (1 - v / yMax);
  ctx.font = uiFont(11);
  ctx.fillStyle = TEXT;
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  ctx.fillText("memory per GPU (GB)", x0 + 4, 4);
  yTicks(ctx, left, plotW, Y, yMax);
  const barX = left + 12, barW = plotW - 24;
  let base = 0;
  parts.forEach((v, k) => {
    const top = Math.min(base + v, yMax); // a bar taller than the axis is cut at its top (the total says how tall)
    if (top > base) {
      ctx.fillStyle = MEMORY_COLOURS[k % MEMORY_COLOURS.length];
      ctx.fillRect(barX, Y(top), barW, Y(base) - Y(top));
    }
    base += v;
  });
  if (parts.length && base > yMax) { // cut: an arrow at the top says it goes on
    ctx.fillStyle = TEXT;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    ctx.fillText("\u2191", barX + barW / 2, Y(yMax) + 2);
  }
  if (f.capacity) {
    dashedLine(ctx, left, left + plotW, Y(f.capacity), LAB_CAPACITY);
  }
  if (f.usable) { // the verdict's line: a bar between it and the capacity is over, though under the capacity
    dashedLine(ctx, left, left + plotW, Y(f.usable), MUTED);
  }
  // the verdict under the bar: a mark and a word, not the colour alone
  if (parts.length) {
    const fits = f.fits[i];
    ctx.fillStyle = fits ? FIT_GOOD : FIT_BAD;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.font = uiFont(11, true);
    ctx.fillText(`${fits ? "\u2713" : "\u2717"} ${f.memory_total[i]}: ${f.verdict[i]}`, x0 + 4, up + plotH + 6);
    if (fits && f.runs && !f.runs[i]) {
      ctx.fillStyle = FIT_BAD;
      ctx.fillText("\u2717 cannot run: see the text below", x0 + 4, up + plotH + 21);
    }
    ctx.font = uiFont(11);
  }
  // legend: the parts, then the capacity line
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  const lx = left + plotW + 10;
  f.memory_parts.forEach((name, k) => {
    const y = up + 8 + 17 * (f.memory_parts.length - 1 - k);
    ctx.fillStyle = MEMORY_COLOURS[k % MEMORY_COLOURS.length];
    ctx.fillRect(lx, y - 6, 12, 12);
    ctx.fillStyle = TEXT;
    ctx.fillText(name, lx + 17, y);
  });
  const lines = [[LAB_CAPACITY, f.capacity_label || "GPU memory"]];
  if (f.usable) lines.push([MUTED, f.usable_label]);
  // each label wrapped to the column, its parenthesis from a line of its own: the column ends where the step picture
  // begins ("(80 GB HBM3 = 79.11 GiB visible to CUDA)" on one line ran over "compute 28.1 s")
  const column = x0 + width - (lx + 17) - 8;
  let y = up + 8 + 17 * f.memory_parts.length;
  lines.forEach(([colour, label]) => {
    ctx.strokeStyle = colour;
    ctx.lineWidth = 2;
    ctx.setLineDash([4, 3]);
    ctx.beginPath();
    ctx.moveTo(lx, y);
    ctx.lineTo(lx + 12, y);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.lineWidth = 1;
    ctx.fillStyle = colour;
    const rows = String(label).split(" (").flatMap((part, k) => wrapWords(ctx, k ? `(${part}` : part, column));
    rows.forEach((text, n) => ctx.fillText(text, lx + 17, y + 13 * n));
    y += 13 * (rows.length - 1) + 17;
  });
}

function drawStep(ctx, f, i, x0, width, h) {
  const parts = f.step[i] || [];
  const left = x0 + 8, right = 12, up = 24;
  const plotW = width - 8 - right;
  const total = parts.reduce((a, b) => a + b, 0);
  const xMax = niceCeiling((total || 1) * 1.05);
  const X = (v) => left + plotW * (v / xMax);
  const barY = up + 18, barH = 34, axisY = barY + barH + 10;
  ctx.font = uiFont(11);
  ctx.fillStyle = TEXT;
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  const gpus = f.gpus[i];
  ctx.fillText(`step time, seconds${gpus ? ` (${gpus} GPUs)` : ""}`, left, 4);
  if (!parts.length && (f.memory[i] || []).length) { // priced, but it cannot run: no bar for a step never taken
    ctx.fillStyle = FIT_BAD;
    ctx.font = uiFont(11, true);
    const note = "\u2717 no step time: this layout cannot run (see the text below)";
    wrapWords(ctx, note, plotW).forEach((line, n) => ctx.fillText(line, left, up + 24 + 13 * n));
    ctx.font = uiFont(11);
    return;
  }
  // x axis: ticks and light grid lines (the axis follows the step: 1 node and 128 differ a hundredfold)
  const tick = niceStep(xMax, 5);
  ctx.textAlign = "center";
  for (let v = 0; v <= xMax + 1e-12; v += tick) {
    ctx.strokeStyle = "#e5e7eb";
    ctx.beginPath();
    ctx.moveTo(X(v), barY - 6);
    ctx.lineTo(X(v), axisY);
    ctx.stroke();
    ctx.fillStyle = TEXT;
    ctx.fillText(`${+v.toPrecision(4)}`, X(v), axisY + 2);
  }
  let base = 0;
  parts.forEach((v, k) => {
    ctx.fillStyle = STEP_COLOURS[f.step_parts[k]] || seriesColour(k);
    ctx.fillRect(X(base), barY, X(base + v) - X(base), barH);
    base += v;
  });
  if (parts.length) {
    ctx.fillStyle = TEXT;
    ctx.textAlign = "right";
    ctx.textBaseline = "bottom";
    ctx.fillText(f.step_total[i], Math.min(X(total), left + plotW), barY - 2);
  }
  // legend, two columns under the axis, each entry wrapped to its column ("DP communication (exposed) 7.93 ms" on one
  // line ran past the canvas's right edge); a row as tall as its taller entry
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  const { rows, colW, entries } = stepLegend(ctx, f, i, plotW);
  let y = STEP_LEGEND_Y;
  for (const here of rows) {
    here.forEach((k, col) => {
      const x = left + col * colW, name = f.step_parts[k];
      ctx.fillStyle = STEP_COLOURS[name] || seriesColour(k);
      ctx.fillRect(x, y - 6, 12, 12);
      ctx.strokeStyle = MUTED;
      ctx.strokeRect(x + 0.5, y - 5.5, 11, 11);
      ctx.fillStyle = TEXT;
      entries[k].forEach((line, n) => ctx.fillText(line, x + 17, y + 13 * n));
    });
    y += 17 + 13 * (Math.max(...here.map((k) => entries[k].length)) - 1);
  }
}

// The step chart's legend: its rows (the parts' indices, two columns), column width and each entry's lines, wrapped to
// the column in the lab's 11 px font; it starts at STEP_LEGEND_Y, under the bar's axis.
const STEP_LEGEND_Y = 24 + 18 + 34 + 10 + 28;
function stepLegend(ctx, f, i, plotW) {
  ctx.font = uiFont(11);
  const count = f.step_parts.length, half = Math.ceil(count / 2), colW = plotW / 2;
  const entries = f.step_parts.map((name, k) => {
    const text = (f.step_text[i] || [])[k];
    return wrapWords(ctx, text === undefined ? name : `${name} ${text}`, colW - 17 - 8);
  });
  const rows = Array.from({ length: half }, (_, row) => [row, row + half].filter((k) => k < count));
  return { rows, colW, entries };
}

// The side-by-side lab's memory column (px): the memory legend's column wide enough for a capacity label in three
// lines. Stacked (an output too narrow for the two side by side at MIN_TEXT_PX), the picture is at least STACKED_MIN
// wide: the memory chart and its legend.
const SPLIT = 300;
const STACKED_MIN = 320;
const LAB_FONT_PX = 11;

// The size the lab is drawn at in an output `available` px wide: its own (model width x height: the memory chart left
// of the step time) where that, scaled to fit, shows its 11 px text at MIN_TEXT_PX or more; else the step chart under
// the memory chart, as wide as the output, as tall as the tallest step legend of every node count needs (the picture
// keeps its height as the slider moves).
function labLayout(ctx, model, available) {
  const f = model.get("frames"), width = model.get("width"), height = model.get("height");
  if (!f || !f.memory || !(available > 0) || (available * LAB_FONT_PX) / MIN_TEXT_PX >= width) return null;
  const w = Math.max(STACKED_MIN, Math.min(width, Math.floor(available)));
  let tallest = STEP_LEGEND_Y;
  for (let i = 0; i < Math.max(1, f.memory.length); i++) {
    const { rows, entries } = stepLegend(ctx, f, i, w - 8 - 12);
    const tall = (here) => Math.max(...here.map((k) => entries[k].length));
    const y = rows.reduce((y, here) => y + 17 + 13 * (tall(here) - 1), STEP_LEGEND_Y);
    tallest = Math.max(tallest, y);
  }
  return { width: w, height: height + tallest };
}

// Side by side at the model's width; stacked (labLayout: taller than the model's height) the memory chart over the step
// chart, each as wide as the picture.
function drawLab(ctx, w, h, model, i) {
  const f = model.get("frames");
  if (!f || !f.memory) return;
  const top = model.get("height");
  if (h <= top) {
    drawMemory(ctx, f, i, 0, SPLIT, h);
    drawStep(ctx, f, i, SPLIT, w - SPLIT, h);
    return;
  }
  drawMemory(ctx, f, i, 0, w, top);
  ctx.save();
  ctx.translate(0, top);
  drawStep(ctx, f, i, 0, w, h - top);
  ctx.restore();
}
drawLab.layout = labLayout;

export default {
  render({ model, el }) {
    const { view, stop } = prefetching(model, el);
    const unmount = mountPicture(view, el, drawLab);
    return () => {
      unmount();
      stop();
    };
  },
};
