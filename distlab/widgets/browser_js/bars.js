// Stacked bars against a capacity line (lesson 1's memory wall): one set of bars per slider position.
// frames: {parts: [names], bars: [position][bar][part] values, labels: [bar names], totals: [position][bar] each
//          bar's total as the text writes it, unit, capacity, capacity_label}; the y range holds every position, so
//          it stays put while the slider moves. The capacity line is named in the legend: a label on the line ran
//          over the bars that reach it.
const PART_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442"];
const CAPACITY = "#b3261e"; // red, far from every part colour (the orange part read as it: review v18)

function drawBars(ctx, w, h, model, i) {
  const f = model.get("frames");
  const bars = f.bars[i];
  if (!bars) return;
  let top = f.capacity || 0;
  for (const position of f.bars) for (const bar of position) top = Math.max(top, bar.reduce((a, b) => a + b, 0));
  const yMax = niceCeiling(top * 1.05);
  ctx.font = uiFont(11);
  const left = turnedTitleLeft(ctx, yMax), right = 150, up = 10, bottom = 34;
  const plotW = w - left - right, plotH = h - up - bottom;
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

// laid out again for an output down to 460 px wide (two lines of a bar's name fit under the axis there)
drawBars.layout = elasticLayout(460);

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
