// The ring all-reduce (or parameter server) picture: every state of distlab's simulation record.
// frames: {gpus, chunks, contributors, server (-1: none), pairs: [[sender, receiver]...],
//          holds[t][g * chunks + c]: bit j set when GPU g's chunk c already sums GPU j's data,
//          received[t]: [[g, c]...] chunks received in the step just done, busy[t]: indices into pairs}.
const EMPTY = "#e9ebee";
const ARROW_IDLE = "#c7cbd1";
const ARROW_BUSY = "#111111";

function ringLayout(n, server) {
  const order = [];
  for (let g = 0; g < n; g++) if (g !== server) order.push(g);
  const ring = server < 0 ? n : Math.max(n - 1, 1);
  const centres = Array.from({ length: n }, () => [0, 0]);
  order.forEach((g, i) => {
    const a = Math.PI / 2 - (2 * Math.PI * i) / ring;
    centres[g] = [Math.cos(a), Math.sin(a)];
  });
  const size = ring <= 2 ? 0.5 : Math.min(0.5, 1.25 * Math.sin(Math.PI / ring));
  return { centres, size };
}

function drawRing(ctx, w, h, model, t) {
  const f = model.get("frames");
  const n = f.gpus, chunks = f.chunks, contributors = f.contributors;
  const { centres, size } = ringLayout(n, f.server);
  const width = size * Math.min(1, chunks / 3);
  // the scale: the ring and its panels inside the shorter side, and the side panels' labels (beside them, 6 px out,
  // 11 px text) inside the width (laid out narrower, "GPU 12" ran 12 px past a 345 px canvas at N = 16)
  ctx.font = uiFont(11);
  let widest = 0;
  for (let g = 0; g < n; g++) widest = Math.max(widest, ctx.measureText(`GPU ${g}`).width);
  const scale = Math.min(Math.min(w, h) / (2 * (1 + size) + 0.35), (w / 2 - 10 - widest) / (1 + width / 2));
  const X = (x) => w / 2 + x * scale;
  const Y = (y) => h / 2 - y * scale;
  const colW = width / chunks, rowH = size / contributors;

  // the labels' boxes (drawn last, on white patches): an arrow stops short of them, or a label under a panel hid the
  // head of the arrow arriving there from below (GPU 7 -> GPU 8 at N = 10, review v18)
  // A side panel's label goes beside it, outward (as the static figure's): under it, it sat in the gap to the panel
  // below, where the arrow between them runs.
  ctx.font = uiFont(11);
  const labels = [], labelBoxes = [];
  for (let g = 0; g < n; g++) {
    const [cx, cy] = centres[g];
    const label = g === f.server ? `GPU ${g} (server)` : `GPU ${g}`, tw = ctx.measureText(label).width;
    const norm = Math.hypot(cx, cy), side = g !== f.server && norm > 0 && Math.abs(cx / norm) >= 0.35;
    const lx = side ? (cx > 0 ? X(cx + width / 2) + 6 + tw / 2 : X(cx - width / 2) - 6 - tw / 2) : X(cx);
    const ly = side ? Y(cy) - 7 : Y(cy - size / 2) + 4;
    labels.push([label, lx, ly]);
    labelBoxes.push([lx - tw / 2 - 2, ly - 1, lx + tw / 2 + 2, ly + 13]);
  }
  const inLabel = (x, y) => labelBoxes.some(([x0, y0, x1, y1]) => x > x0 - 2 && x < x1 + 2 && y > y0 - 2 && y < y1 + 2);

  // arrows first (under the panels): idle grey, busy (a message in the step just done) black with a head
  const busy = new Set(f.busy[t]);
  f.pairs.forEach(([s, r], i) => {
    const [x0, y0] = centres[s], [x1, y1] = centres[r];
    const dx = x1 - x0, dy = y1 - y0, len = Math.hypot(dx, dy) || 1;
    const ux = dx / len, uy = dy / len;
    const off = f.server >= 0 ? 0.04 : 0; // the star's two directions side by side
    const ox = -uy * off, oy = ux * off;
    const pad = size * 0.62;
    const ax = x0 + ux * pad + ox, ay = y0 + uy * pad + oy, bx = x1 - ux * pad + ox, by = y1 - uy * pad + oy;
    // in pixels, each end moved along the arrow out of the labels' boxes (the head's 9 px too), while 12 px are left
    let [sx, sy, ex, ey] = [X(ax), Y(ay), X(bx), Y(by)];
    const px = (ex - sx) / (Math.hypot(ex - sx, ey - sy) || 1), py = (ey - sy) / (Math.hypot(ex - sx, ey - sy) || 1);
    while ((inLabel(ex, ey) || inLabel(ex - 9 * px, ey - 9 * py)) && Math.hypot(ex - sx, ey - sy) > 12) {
      ex -= px;
      ey -= py;
    }
    while (inLabel(sx, sy) && Math.hypot(ex - sx, ey - sy) > 12) {
      sx += px;
      sy += py;
    }
    const on = busy.has(i);
    ctx.strokeStyle = ctx.fillStyle = on ? ARROW_BUSY : ARROW_IDLE;
    ctx.lineWidth = on ? 2 : 1;
    ctx.beginPath();
    ctx.moveTo(sx, sy);
    ctx.lineTo(ex, ey);
    ctx.stroke();
    if (on) {
      const hx = ex, hy = ey, angle = Math.atan2(ey - sy, ex - sx);
      ctx.beginPath();
      ctx.moveTo(hx, hy);
      ctx.lineTo(hx - 9 * Math.cos(angle - 0.4), hy - 9 * Math.sin(angle - 0.4));
      ctx.lineTo(hx - 9 * Math.cos(angle + 0.4), hy - 9 * Math.sin(angle + 0.4));
      ctx.closePath();
      ctx.fill();
    }
  });

  const holds = f.holds[t];
  const received = new Set(f.received[t].map(([g, c]) => g * chunks + c));
  ctx.font = uiFont(11);
  ctx.textAlign = "center";
  for (let g = 0; g < n; g++) {
    const [cx, cy] = centres[g];
    const x0 = cx - width / 2, y0 = cy - size / 2;
    for (let c = 0; c < chunks; c++) {
      const mask = holds[g * chunks + c];
      for (let j = 0; j < contributors; j++) {
        ctx.fillStyle = (mask >> j) & 1 ? seriesColour(j) : EMPTY;
        const px = X(x0 + c * colW), py = Y(y0 + (j + 1) * rowH);
        ctx.fillRect(px, py, colW * scale, rowH * scale + 0.5);
      }
      ctx.lineWidth = received.has(g * chunks + c) ? 2.5 : 0.8;
      ctx.strokeStyle = received.has(g * chunks + c) ? "#111111" : "#9aa0a6";
      ctx.strokeRect(X(x0 + c * colW), Y(y0 + size), colW * scale, size * scale);
    }
  }
  // the labels last, each on a white patch a few pixels under its panel: drawn with the panels, a received chunk's
  // thick outline and the arrows leaving a panel downwards ran over "GPU 6" and "GPU 1" at N = 8
  ctx.textBaseline = "top";
  labels.forEach(([label, lx, ly], g) => {
    const [x0, y0, x1, y1] = labelBoxes[g];
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
    ctx.fillStyle = TEXT;
    ctx.fillText(label, lx, ly);
  });
}

// In an output narrower than the picture the ring lays itself out again, as wide as the output (not under RING_LEAST
// px) and as tall in proportion: the ring's scale follows the shorter side (drawRing), its 11 px text stays 11 px
// (scaled down whole, it showed that text at 8 px in the narrowest output, or scrolled: review v20).
const RING_LEAST = 300;
drawRing.layout = (ctx, model, available) => {
  const width = model.get("width"), height = model.get("height");
  if (!(available > 0) || available >= width) return null;
  const w = Math.max(RING_LEAST, Math.floor(available));
  return { width: w, height: Math.round((height * w) / width) };
};

export default {
  render({ model, el }) {
    const { view, stop } = prefetching(model, el);
    const unmount = mountPicture(view, el, drawRing);
    return () => {
      unmount();
      stop();
    };
  },
};
