// The GPU assignment grid of 3D parallelism (lesson 6): one cell per GPU, each node a row of its GPUs on a
// light frame. The slider is the picked GPU: its TP, DP and PP groups are outlined (a colour AND a dash pattern
// each), the GPUs outside them faded; clicking a cell picks that GPU. The fills follow the colour-by choice the kernel sent.
// frames: {x, y: cell corners per rank (cell = 1, y down), width, height, gpus_per_node, fill: index per rank,
//          fill_kind: "groups" | "ramp", fill_count, groups: {tp, dp, pp: group index per rank}, sizes}
const OUTLINES = [
  ["tp", "#000000", []],
  ["dp", "#0072B2", [5, 3]],
  ["pp", "#D55E00", [2, 2]],
];
const NODE_FACE = "#eef1f5";
const CELL_GAP = 0.12;
const LEGEND_H = 22;

// Group fills: light enough for the dark rank numbers, and no two of up to 49 groups alike. Seven colours
// (Okabe-Ito's without its black, lightened: black lightened is a dark grey under black text), each round of seven
// with its own hatch, a second cue that colour-blind eyes and a projector keep (28 TP groups drew pastel hues 13
// degrees apart, which no one told apart). Past 49 groups the fills repeat; neighbouring groups still differ, and the
// picked GPU's groups are outlined. distlab.plots.parallelism_3d draws the lessons' static grids with the same cues.
const GROUP_COLOURS = OKABE_ITO.filter((c) => c !== "#000000");
const GROUP_HATCHES = ["", "/", "\\", "x", "-", "|", "."];
const HATCH_INK = "rgba(31, 35, 40, 0.45)";

// A cell outside the picked GPU's groups is drawn faded, at this opacity; a ramp's cells (pipeline stage) are not:
// faded, the four stages' blues of lesson 6's 4 x 4 x 4 grid came 4-6 CIELAB units apart and no stage could be read
// (a student's review). The outlines still mark the picked GPU's groups.
const FADED = 0.3;

function cellAlpha(f, emphasised) {
  return emphasised || f.fill_kind === "ramp" ? 1 : FADED;
}

// A frame's colours and text widths, computed once, not per cell and paint (issue 32)
const fillColours = new Map();
function fillColour(f, k) {
  const key = f.fill_kind === "ramp" ? `${k}/${f.fill_count}` : k;
  let colour = fillColours.get(key);
  if (colour === undefined) {
    colour = f.fill_kind === "ramp" ? lighten("#0072B2", 0.85 - 0.75 * (k / Math.max(1, f.fill_count - 1))) :
      lighten(GROUP_COLOURS[k % GROUP_COLOURS.length], 0.25);
    fillColours.set(key, colour);
  }
  return colour;
}

// ctx.measureText(text).width in `font` (ctx's font now), kept until a web font loads
const textWidths = new Map();
if (typeof document !== "undefined" && document.fonts && document.fonts.addEventListener) {
  document.fonts.addEventListener("loadingdone", () => textWidths.clear());
}
function textWidth(ctx, font, text) {
  const key = `${font}\x1f${text}`;
  let width = textWidths.get(key);
  if (width === undefined) {
    if (textWidths.size > 4096) textWidths.clear();
    width = ctx.measureText(text).width;
    textWidths.set(key, width);
  }
  return width;
}

function fillHatch(f, k) {
  if (f.fill_kind === "ramp") return "";
  return GROUP_HATCHES[Math.floor(k / GROUP_COLOURS.length) % GROUP_HATCHES.length];
}

// A hatch over the cell at (x, y), size s px: a repeating tile of 1 px lines (or dots) in a translucent dark grey,
// s / 4 apart, one fillRect per cell (drawn line by line, 16 groups' hatches made the grid's frames 12 times slower
// to record in tests/widgets/drawn_text.js). Where there is no document (Node) the hatch is left out.
const hatchTiles = new Map();

function hatchPattern(ctx, hatch, gap) {
  if (typeof document === "undefined" || typeof ctx.createPattern !== "function") return null;
  const key = `${hatch} ${gap}`;
  if (!hatchTiles.has(key)) {
    const tile = document.createElement("canvas");
    tile.width = tile.height = gap;
    const t = tile.getContext("2d");
    t.strokeStyle = t.fillStyle = HATCH_INK;
    t.lineWidth = 1;
    t.beginPath();
    const line = (x0, y0, x1, y1) => {
      t.moveTo(x0, y0);
      t.lineTo(x1, y1);
    };
    // the diagonals run corner to corner, so the tiles join into unbroken lines
    if (hatch === "/" || hatch === "x") line(0, gap, gap, 0);
    if (hatch === "\\" || hatch === "x") line(0, 0, gap, gap);
    if (hatch === "-") line(0, gap / 2, gap, gap / 2);
    if (hatch === "|") line(gap / 2, 0, gap / 2, gap);
    t.stroke();
    if (hatch === ".") t.fillRect(gap / 2 - 0.75, gap / 2 - 0.75, 1.5, 1.5);
    hatchTiles.set(key, ctx.createPattern(tile, "repeat"));
  }
  return hatchTiles.get(key);
}

function drawHatch(ctx, hatch, x, y, s) {
  const pattern = hatch ? hatchPattern(ctx, hatch, Math.max(4, Math.round(s / 4))) : null;
  if (!pattern) return;
  ctx.fillStyle = pattern;
  ctx.fillRect(x, y, s, s);
}

// Cell units -> canvas pixels: the scale s and the maps X, Y (4 px margin, room for "node k" on the left; the
// legend's band, `legend` px, under the grid).
const LABEL_ROOM = 3.2;
function gridScale(f, w, h, legend = LEGEND_H) {
  const s = Math.min((w - 8) / (f.width + LABEL_ROOM), (h - legend - 8) / f.height);
  return { s, X: (v) => 4 + (v + LABEL_ROOM) * s, Y: (v) => 4 + v * s };
}

// In an output narrower than the picture the grid lays itself out again (draw.layout), as the lab and the ring do: as
// wide as the output (not under GRID_LEAST px), its nodes stacked in fewer columns (frames.narrow, computed in Python
// by plots.parallelism_3d.grid_geometry), as tall as those cells need at that width (up to GRID_TALLEST px), and its
// legend over as many lines as it takes. Shrunk whole, its 11 px legend and 12 px rank numbers were shown at 7-8 px,
// or the picture scrolled sideways (review v20).
const GRID_LEAST = 310; // at 300-306 px a 16-wide mesh ran its node labels 1 px past the canvas (test_drawn_text_fits)
const GRID_TALLEST = 640;
const LEGEND_LINE = 18;

// The cells a picture w px wide draws: the narrow stacking under its natural width, else the frames' own.
function cellsFor(f, w, natural) {
  return w < natural && f.narrow ? { ...f, ...f.narrow } : f;
}

// The legend's items ([text, outline colour, dash, line width, swatch]; the fills have no box, a ramp's two ends a
// filled swatch each) laid out in lines no wider than w: one line where it fits (the natural width, but for a ramp's
// two more items), as many as it takes narrower.
function legendLines(ctx, f, picked, w, natural) {
  const font = (ctx.font = uiFont(11));
  const items = [[`picked GPU ${picked}`, "#000000", [], 3]];
  for (const [d, colour, dash] of OUTLINES) items.push([`its ${d.toUpperCase()} group`, colour, dash, 2]);
  items.push([`fills: ${f.colour_by}`, null, [], 0]);
  // a ramp's scale: its first and last step, each a swatch of its colour (the stages between are shades between)
  if (f.fill_kind === "ramp") {
    const last = Math.max(0, f.fill_count - 1);
    items.push([last > 0 ? "0 (light)" : "0", null, [], 0, fillColour(f, 0)]);
    if (last > 0) items.push([`${last} (dark)`, null, [], 0, fillColour(f, last)]);
  }
  const lines = [[]];
  const widthOf = (item) => (item[1] || item[4] ? 17 : 0) + textWidth(ctx, font, item[0]);
  const gapOf = (item) => (item[1] || item[4] ? 15 : 10);
  let x = 8;
  items.forEach((item, k) => {
    const width = widthOf(item);
    // the fills and a ramp's two ends stay on one line: the line breaks before "fills:" if they do not fit after it
    const block = items.slice(k);
    const rest = item[1] ? width : block.reduce((sum, it) => sum + widthOf(it) + gapOf(it), -gapOf(items.at(-1)));
    if (x > 8 && x + Math.max(width, Math.min(rest, w - 12)) > w - 4) {
      lines.push([]);
      x = 8;
    }
    lines[lines.length - 1].push([item, x]);
    x += width + gapOf(item);
  });
  return lines;
}

function legendHeight(lines) {
  return lines.length === 1 ? LEGEND_H : lines.length * LEGEND_LINE + 4;
}

drawGrid.layout = (ctx, model, available) => {
  const width = model.get("width"), f = model.get("frames");
  if (!f || !f.x || !(available > 0) || available >= width) return null;
  const w = Math.max(GRID_LEAST, Math.floor(available));
  const cells = cellsFor(f, w, width);
  const legend = legendHeight(legendLines(ctx, cells, model.get("value"), w, width));
  const s = (w - 8) / (cells.width + LABEL_ROOM);
  return { width: w, height: Math.min(GRID_TALLEST, Math.max(60, Math.round(s * cells.height + legend + 8))) };
};

function drawGrid(ctx, w, h, model, picked) {
  const natural = model.get("width");
  const f = model.get("frames") && cellsFor(model.get("frames"), w, natural);
  if (!f || !f.x) return;
  const world = f.x.length, g = f.gpus_per_node;
  const lines = legendLines(ctx, f, picked, w, natural);
  const { s, X, Y } = gridScale(f, w, h, legendHeight(lines));
  if (ctx.canvas) ctx.canvas.distlabGrid = { f, s, X, Y, w, h }; // where each cell is: pickOnClick
  const fontPx = Math.max(8, Math.min(12, s * 0.42));
  const font = (ctx.font = uiFont(fontPx));
  // node frames and labels
  const nodes = Math.ceil(world / g);
  for (let k = 0; k < nodes; k++) {
    const first = k * g, count = Math.min(g, world - first);
    ctx.fillStyle = NODE_FACE;
    ctx.fillRect(X(f.x[first] - 0.18), Y(f.y[first] - 0.18), (count * (1 + CELL_GAP) - CELL_GAP + 0.36) * s, 1.36 * s);
    if (nodes <= 32) {
      ctx.fillStyle = MUTED;
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(`node ${k}`, X(f.x[first] - 0.4), Y(f.y[first] + 0.5));
    }
  }
  // which of the picked GPU's groups each GPU is in
  const member = new Array(world).fill(null);
  for (const [d, colour, dash] of OUTLINES) {
    if (f.sizes[d] <= 1) continue;
    const group = f.groups[d], style = [colour, dash];
    for (let r = 0; r < world; r++) if (group[r] === group[picked]) member[r] = style;
  }
  // the cells: the picked GPU's groups in full colour, the others faded
  for (let r = 0; r < world; r++) {
    ctx.globalAlpha = cellAlpha(f, member[r] || r === picked);
    ctx.fillStyle = fillColour(f, f.fill[r]);
    ctx.fillRect(X(f.x[r]), Y(f.y[r]), s, s);
    drawHatch(ctx, fillHatch(f, f.fill[r]), X(f.x[r]), Y(f.y[r]), s);
  }
  ctx.globalAlpha = 1;
  // outlines: each group its colour and dash; the picked GPU a thick black edge
  ctx.lineWidth = 2;
  let style = null;
  for (let r = 0; r < world; r++) {
    if (!member[r] || r === picked) continue;
    if (member[r] !== style) {
      style = member[r];
      ctx.strokeStyle = style[0];
      ctx.setLineDash(style[1]);
    }
    ctx.strokeRect(X(f.x[r]) + 1, Y(f.y[r]) + 1, s - 2, s - 2);
  }
  ctx.setLineDash([]);
  ctx.lineWidth = 3.5;
  ctx.strokeStyle = "#000000";
  ctx.strokeRect(X(f.x[picked]) + 1.75, Y(f.y[picked]) + 1.75, s - 3.5, s - 3.5);
  // rank numbers inside the outlines (2 px inset; the picked GPU's 3.5 px): each in a font whose widest number fits
  // between them ("100" ran 1.9 px under the lines at T = 8), none under 7 px (the picked one's: the status names it)
  const widest = textWidth(ctx, font, String(world - 1));
  const fitted = (room) => (widest > room ? (fontPx * room) / widest : fontPx);
  const rankPx = fitted(s - 5), pickedPx = fitted(s - 8);
  if (world <= 128 && s >= 14 && rankPx >= 7) {
    ctx.fillStyle = TEXT;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    // each font set once: the other GPUs' numbers, then the picked one's
    const number = (r, px, numberFont) => {
      if (fillHatch(f, f.fill[r])) {
        // a hatched cell's number on a patch of its colour: the hatch lines would run through the digits
        const tw = textWidth(ctx, numberFont, String(r));
        const back = [X(f.x[r] + 0.5) - tw / 2 - 1.5, Y(f.y[r] + 0.5) - px / 2 - 1, tw + 3, px + 2];
        ctx.fillStyle = "#ffffff"; // the canvas under a faded cell, then the cell's colour as faded
        ctx.fillRect(...back);
        ctx.globalAlpha = cellAlpha(f, member[r] || r === picked);
        ctx.fillStyle = fillColour(f, f.fill[r]);
        ctx.fillRect(...back);
        ctx.globalAlpha = 1;
        ctx.fillStyle = TEXT;
      }
      ctx.fillText(String(r), X(f.x[r] + 0.5), Y(f.y[r] + 0.5));
    };
    if (world > 1) {
      const rankFont = (ctx.font = uiFont(rankPx));
      for (let r = 0; r < world; r++) if (r !== picked) number(r, rankPx, rankFont);
    }
    if (pickedPx >= 7) number(picked, pickedPx, (ctx.font = uiFont(pickedPx)));
  }
  // legend under the grid, line by line (legendLines)
  ctx.font = uiFont(11);
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  lines.forEach((line, k) => {
    const y = lines.length === 1 ? h - LEGEND_H / 2 : h - legendHeight(lines) + 2 + (k + 0.5) * LEGEND_LINE;
    for (const [[text, colour, dash, width, swatch], x] of line) {
      if (swatch) { // a ramp's step: a swatch of its colour, its number after it
        ctx.fillStyle = swatch;
        ctx.fillRect(x, y - 6, 12, 12);
        ctx.lineWidth = 1;
        ctx.strokeStyle = MUTED;
        ctx.strokeRect(x, y - 6, 12, 12);
        ctx.fillStyle = TEXT;
        ctx.fillText(text, x + 17, y);
        continue;
      }
      if (!colour) {
        ctx.fillStyle = MUTED;
        ctx.fillText(text, x, y);
        continue;
      }
      ctx.lineWidth = width;
      ctx.strokeStyle = colour;
      ctx.setLineDash(dash);
      ctx.strokeRect(x, y - 6, 12, 12);
      ctx.setLineDash([]);
      ctx.fillStyle = TEXT;
      ctx.fillText(text, x + 17, y);
    }
  });
}

// A click on a cell picks that GPU (the slider and the keyboard do the same).
function pickOnClick(model, canvas) {
  const onClick = (event) => {
    const drawn = canvas.distlabGrid; // the cells as the last paint placed them (at the layout's size)
    if (!drawn || model.get("disabled")) return;
    const { f, s, X, Y, w, h } = drawn;
    const { x: px, y: py } = canvasPoint(canvas, event, w, h);
    for (let r = 0; r < f.x.length; r++) {
      if (px >= X(f.x[r]) && px <= X(f.x[r]) + s && py >= Y(f.y[r]) && py <= Y(f.y[r]) + s) {
        model.set("value", r);
        model.save_changes();
        return;
      }
    }
  };
  canvas.addEventListener("click", onClick);
  return () => canvas.removeEventListener("click", onClick);
}

// The layout's warnings (frames.note), in red under the grid's text; none at a position with our message. Drawn
// from the frames, so a change the browser draws from its cache shows its own warnings at once.
function warningNote(model, root) {
  const note = element("div", { class: "distlab-note", role: "note" },
    "white-space: pre-wrap; font-family: var(--jp-code-font-family, monospace); font-size: 12px; margin-top: 4px; " +
    "color: #b3261e");
  root.append(note);
  const show = () => {
    const errors = model.get("errors") || [];
    const index = model.get("value") - model.get("min");
    const error = errors.length ? errors[Math.min(Math.max(index, 0), errors.length - 1)] : "";
    const text = error ? "" : ((model.get("frames") || {}).note || "");
    setText(note, text);
    if (note.hidden !== !text) note.hidden = !text;
  };
  model.on("change", show);
  show();
  return () => model.off("change", show);
}

export default {
  render({ model, el }) {
    const { view, stop } = prefetching(model, el);
    const unmount = mountPicture(view, el, drawGrid);
    const unnote = warningNote(view, el.querySelector(".distlab-picture"));
    const unclick = pickOnClick(view, el.querySelector("canvas.distlab-canvas"));
    return () => {
      unnote();
      unclick();
      unmount();
      stop();
    };
  },
};
