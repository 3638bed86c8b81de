// Stacked bars against a capacity line (lesson 1's memory wall): one set of bars per slider position.
// frames: {parts: [names], bars: [position][bar][part] values, labels: [bar names], totals: [position][bar] each
//          bar's total as the text writes it, unit, capacity, capacity_label}; the y range holds every position, so
//          it stays put while the slider moves. The capacity line is named in the legend: a label on the line ran
//          over the bars that reach it.
const PART_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442"];
const CAPACITY = "#b3261e"; // red, far from every part colour (the orange part read as it: review v18)

// The legend beside the plot (the parts, then the capacity line) down to BARS_BESIDE px wide; narrower, under the plot
// and the bars' names, in a picture as wide as the output (not under BARS_LEAST) and as much taller as the legend is
// (barsLegendUnder): the 150 px column beside the plot left a 340 px output too little room for four bars and their
// totals ("2.79 TB" over "2.79 TB"), and the picture scrolled sideways there.
const BARS_BESIDE = 460;
const BARS_LEAST = 320;
const LEGEND_BESIDE = 150; // the legend's column right of the plot (px)
const BARS_UP = 10, BARS_BOTTOM = 34; // room above the plot, and under it for two lines of a bar's name

// The y axis's top: every total of every position and the capacity, so the axis stays put as the slider moves.
function barsTop(f) {
  let top = f.capacity || 0;
  for (const position of f.bars) for (const bar of position) top = Math.max(top, bar.reduce((a, b) => a + b, 0));
  return niceCeiling(top * 1.05);
}

// The plot's x geometry in a picture `w` px wide (ctx in the 11 px font): where it begins, how wide it is, and each
// bar's slot (its name wrapped to the slot, less 6 px).
function barsPlot(ctx, f, w) {
  const left = turnedTitleLeft(ctx, barsTop(f)), right = w < BARS_BESIDE ? 12 : LEGEND_BESIDE;
  const plotW = w - left - right, count = Math.max(1, ...f.bars.map((position) => position.length));
  return { left, plotW, slot: plotW / count };
}

// The legend under the plot (the narrow arrangement), in a picture `w` px wide whose plot, with the bars' names under
// it, ends `chartH` px down: the parts side by side in rows (in stack order, bottom part first), each a 12 px swatch
// and its name; then the capacity line, a dashed sample and its label wrapped to the room right of it; all starting
// under the plot's left edge. Returns {parts: [{k, x, y, lines}], capacity: {y, lines} or null, bottom} (y: each
// entry's first line's middle; bottom: where the legend's last line ends).
function barsLegendUnder(ctx, f, w, chartH) {
  ctx.font = uiFont(11);
  const { left, slot } = barsPlot(ctx, f, w);
  // the bars' names take two lines under the axis, or as many as the longest needs at this width
  const nameLines = Math.max(2, ...(f.labels || []).map((name) => wrapWords(ctx, name, slot - 6).length));
  const x0 = left, x1 = w - 8, ROW = 18;
  let x = x0, y = chartH + 13 * (nameLines - 2) + 2 + ROW / 2, rowLines = 1;
  const parts = [];
  (f.parts || []).forEach((name, k) => {
    const lines = wrapWords(ctx, name, x1 - x0 - 17);
    const width = 17 + Math.max(...lines.map((line) => ctx.measureText(line).width));
    if (x > x0 && x + width > x1) { // a new row
      y += ROW + 13 * (rowLines - 1);
      x = x0;
      rowLines = 1;
    }
    parts.push({ k, x, y, lines });
    rowLines = Math.max(rowLines, lines.length);
    x += width + 16;
  });
  let bottom = parts.length ? y + 6 + 13 * (rowLines - 1) : y - ROW / 2;
  let capacity = null;
  if (f.capacity) {
    const cy = parts.length ? y + ROW + 13 * (rowLines - 1) : y;
    capacity = { y: cy, lines: wrapWords(ctx, f.capacity_label || "", x1 - (x0 + 24)) };
    bottom = cy + 6 + 13 * (capacity.lines.length - 1);
  }
  return { parts, capacity, bottom };
}

function drawBars(ctx, w, h, model, i) {
  const f = model.get("frames");
  const bars = f.bars[i];
  if (!bars) return;
  const yMax = barsTop(f);
  ctx.font = uiFont(11);
  const narrow = w < BARS_BESIDE, chartH = narrow ? Math.min(h, model.get("height")) : h;
  const { left, plotW } = barsPlot(ctx, f, w), up = BARS_UP, bottom = BARS_BOTTOM;
  const plotH = chartH - up - bottom;
  const Y = (v) => up + plotH * (1 - v / yMax);
  // y axis: ticks and light grid lines
  yTicks(ctx, left, plotW, Y, yMax);
  ctx.save();
  ctx.translate(12, up + plotH / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.fillText(`per GPU (${f.unit})`, 0, 0);
  ctx.restore();
  // the bars: parts stacked bottom up, the total on top
  const slot = plotW / bars.length, barW = slot * 0.5;
  bars.forEach((parts, b) => {
    const x = left + slot * (b + 0.25);
    let base = 0;
    parts.forEach((v, k) => {
      ctx.fillStyle = PART_COLOURS[k % PART_COLOURS.length];
      ctx.fillRect(x, Y(base + v), barW, Y(base) - Y(base + v));
      base += v;
    });
    ctx.fillStyle = TEXT;
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    const total = (f.totals && f.totals[i] && f.totals[i][b]) || `${+base.toPrecision(3)} ${f.unit}`;
    // above the bar, or above the capacity line where the line would cross the text (a bar just under it)
    let y = Y(base) - 2;
    if (f.capacity && y - 13 < Y(f.capacity) && Y(f.capacity) < y + 2) y = Y(f.capacity) - 3;
    ctx.fillText(total, x + barW / 2, y);
    ctx.textBaseline = "top";
    // the bar's name wrapped to its slot (two lines in the room under the axis): laid out narrower for a narrow
    // output, "one GPU, no sharding" ran into "each GPU in your setup"
    wrapWords(ctx, f.labels[b], slot - 6).forEach((line, n) => {
      ctx.fillText(line, x + barW / 2, up + plotH + 6 + 13 * n);
    });
  });
  // the capacity line
  if (f.capacity) dashedLine(ctx, left, left + plotW, Y(f.capacity), CAPACITY);
  if (narrow) {
    drawBarsLegendUnder(ctx, f, w, chartH);
    return;
  }
  // legend, right of the plot: the parts, then the capacity line (a dashed sample and its label)
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  f.parts.forEach((name, k) => {
    const y = up + 10 + 18 * (f.parts.length - 1 - k);
    ctx.fillStyle = PART_COLOURS[k % PART_COLOURS.length];
    ctx.fillRect(left + plotW + 12, y - 6, 12, 12);
    ctx.fillStyle = TEXT;
    ctx.fillText(name, left + plotW + 30, y);
  });
  if (f.capacity) {
    const y = up + 10 + 18 * f.parts.length;
    dashedLine(ctx, left + plotW + 8, left + plotW + 26, y, CAPACITY);
    ctx.fillStyle = CAPACITY;
    // the label ("h100-sxm: 84.9 GB (80 GB HBM3 = 79.11 GiB visible to CUDA)") wrapped to the legend's width: drawn
    // on one line it ran past the canvas's right edge and was cut off
    wrapWords(ctx, f.capacity_label, w - (left + plotW + 30) - 4).forEach((line, n) => {
      ctx.fillText(line, left + plotW + 30, y + 13 * n);
    });
  }
}

// The narrow arrangement's legend (barsLegendUnder): under the plot and the bars' names.
function drawBarsLegendUnder(ctx, f, w, chartH) {
  const { parts, capacity } = barsLegendUnder(ctx, f, w, chartH);
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  for (const { k, x, y, lines } of parts) {
    ctx.fillStyle = PART_COLOURS[k % PART_COLOURS.length];
    ctx.fillRect(x, y - 6, 12, 12);
    ctx.fillStyle = TEXT;
    lines.forEach((line, n) => ctx.fillText(line, x + 17, y + 13 * n));
  }
  if (capacity) {
    const x = barsPlot(ctx, f, w).left;
    dashedLine(ctx, x, x + 18, capacity.y, CAPACITY);
    ctx.fillStyle = CAPACITY;
    capacity.lines.forEach((line, n) => ctx.fillText(line, x + 24, capacity.y + 13 * n));
  }
}

// laid out again for an output down to BARS_BESIDE px wide, the legend beside the plot; narrower, down to BARS_LEAST,
// the legend under it, the picture as much taller as the legend (and any third line of a bar's name) needs
drawBars.layout = narrowingLayout(BARS_BESIDE, BARS_LEAST, (ctx, model, width) => {
  const f = model.get("frames"), chartH = model.get("height");
  return f && f.bars ? barsLegendUnder(ctx, f, width, chartH).bottom + 6 - chartH : 0;
});

export default {
  render({ model, el }) {
    const { view, stop } = prefetching(model, el);
    const unmount = mountPicture(view, el, drawBars);
    return () => {
      unmount();
      stop();
    };
  },
};
