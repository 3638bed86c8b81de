// Node side of tests/widgets/test_drawn_text_fits.py: draw real states of one browser picture on a recording canvas
// and report every text that runs past the canvas or overprints another text drawn in the same frame.
//
// Run as `node drawn_text.js <picture module> <states.json>` with DISTLAB_JS naming distlab/widgets/browser_js. The
// states file holds {"draw": name of the module's draw function, "states": [{width, height, frames, times, codes
// (base64 or ""), positions: [index...], where, available (optional)}], "record": bool}. Prints {"frames": frames
// drawn, "texts": texts drawn, "problems": [text], with record "drawn": [frame][text, x, y, textAlign] of every fillText, "shown": for a
// state with `available` (an output's width, px), each frame's drawn size, smallest text (px, drawn and as shown at
// common.js's displayScale) and whether it fits the output unscrolled} as JSON.
//
// The recording canvas measures each character at least 7/11 of the font size (7 px at the pictures' 11 px UI font),
// and at the width DejaVu Sans gives it where that is wider (WIDE, in em: the larger of its Book and Bold advances,
// read from Debian's Chromium with canvas measureText at 100 px, the font it draws JupyterLab's system-ui stack in; a
// character in neither list counts 1 em). DejaVu is the widest of the common UI sans fonts (its digits 0.636 em, Book;
// Arial's and Helvetica's 0.556), so a text that fits here fits in Chromium. A text's box is its em box (font size
// tall: above an "alphabetic" baseline 0.8 em, below it 0.2 em, as DejaVu's ascent and descent), carried through the
// context's transform (rotated labels too).
"use strict";
const fs = require("fs");
const path = require("path");

const [moduleName, statesFile] = process.argv.slice(2);
const folder = process.env.DISTLAB_JS;
const source = ["common.js", moduleName]
  .map((name) => fs.readFileSync(path.join(folder, name), "utf8"))
  .join("\n")
  .replace("export default", "const _module =");
const input = JSON.parse(fs.readFileSync(statesFile, "utf8"));
const [draw, displayScale] = new Function(`${source}\nreturn [${input.draw}, displayScale];`)();

const EM_PER_CHAR = 7 / 11;
const WIDE = {
  "#": 0.838, "$": 0.696, "%": 1.002, "&": 0.872, "+": 0.838, "0": 0.696, "1": 0.696, "2": 0.696, "3": 0.696,
  "4": 0.696, "5": 0.696, "6": 0.696, "7": 0.696, "8": 0.696, "9": 0.696, "<": 0.838, "=": 0.838, ">": 0.838, "@": 1,
  "A": 0.774, "B": 0.762, "C": 0.734, "D": 0.83, "E": 0.683, "F": 0.683, "G": 0.821, "H": 0.837, "K": 0.775,
  "L": 0.637, "M": 0.995, "N": 0.837, "O": 0.85, "P": 0.733, "Q": 0.85, "R": 0.77, "S": 0.72, "T": 0.682, "U": 0.812,
  "V": 0.774, "W": 1.103, "X": 0.771, "Y": 0.724, "Z": 0.725, "^": 0.838, "a": 0.675, "b": 0.716, "d": 0.716,
  "e": 0.678, "g": 0.716, "h": 0.712, "k": 0.665, "m": 1.042, "n": 0.712, "o": 0.687, "p": 0.716, "q": 0.716,
  "u": 0.712, "v": 0.652, "w": 0.924, "x": 0.645, "y": 0.652, "{": 0.712, "}": 0.712, "~": 0.838, "✓": 0.838,
  "✗": 0.838, "↑": 0.838, "µ": 0.736, "…": 1, "×": 0.838, "≈": 0.838, "—": 1, "−": 0.838,
};
const emWidth = (text) => Array.from(text).reduce((sum, ch) => {
  const code = ch.codePointAt(0);
  return sum + Math.max(EM_PER_CHAR, WIDE[ch] || (code < 127 ? 0 : 1));
}, 0);
// Overprinting: two boxes that overlap by more than 1 px on every axis (the boxes are em boxes, already taller than
// the glyphs, which leave about a tenth of the em empty above the capitals, and at least the glyphs' advance wide):
// 1 px is the rounding of positions computed in fractions of a pixel.
const OVERLAP_PX = 1;
// Past the canvas: any part of the box outside it, beyond half a pixel of rounding.
const EDGE_PX = 0.5;

// A line crossing a text: its stroke, lineWidth wide, overlaps the text's em box by more than OVERLAP_PX. Dashed lines
// (a capacity line, the ideal end of a step: lesson 8b's ladder drew "80.2 GB", the total of a bar just under the
// GPU's memory, with the capacity line through it) and solid ones (outlines, arrows, strokeRect: lesson 2's ring ran a
// received chunk's thick outline and an arrow over "GPU 6" and "GPU 1", lesson 6's grid its group outlines over "100"),
// whichever was drawn first. A solid line is hidden where a white patch (fillRect) drawn after it and before the text
// covers the text's box, as a label on a backing patch does.
function recorder(texts, dashed = [], solid = [], patches = [], fills = []) {
  const identity = [1, 0, 0, 1, 0, 0];
  const state = { m: identity.slice(), textAlign: "start", textBaseline: "alphabetic", font: "10px sans-serif",
    dash: [] };
  let path = [], at = null;
  const stack = [];
  let sized = null, size = 10; // the last font string read, and its size
  const px = () => {
    if (state.font !== sized) {
      const found = /(\d+(?:\.\d+)?)px/.exec(state.font);
      sized = state.font;
      size = found ? Number(found[1]) : 10;
    }
    return size;
  };
  const apply = (x, y) => {
    const [a, b, c, d, e, f] = state.m;
    return [a * x + c * y + e, b * x + d * y + f];
  };
  const ctx = {
    fillStyle: "", strokeStyle: "", lineWidth: 1, globalAlpha: 1,
    get font() { return state.font; }, set font(v) { state.font = v; },
    get textAlign() { return state.textAlign; }, set textAlign(v) { state.textAlign = v; },
    get textBaseline() { return state.textBaseline; }, set textBaseline(v) { state.textBaseline = v; },
    measureText: (t) => ({ width: px() * emWidth(String(t)) }),
    fillText(t, x, y) {
      const text = String(t);
      if (!text.trim()) return;
      const size = px(), width = size * emWidth(text);
      const align = state.textAlign;
      const x0 = align === "right" || align === "end" ? x - width : align === "center" ? x - width / 2 : x;
      const above = { top: 0, hanging: 0, middle: 0.5, alphabetic: 0.8, bottom: 1, ideographic: 1 }[state.textBaseline];
      const y0 = y - size * (above === undefined ? 0.8 : above);
      const box = [[x0, y0], [x0 + width, y0], [x0 + width, y0 + size], [x0, y0 + size]];
      const corners = box.map(([u, v]) => apply(u, v));
      const [a, b] = state.m;
      texts.push({ text, corners, call: [text, x, y, align], px: size * Math.hypot(a, b) });
    },
    save() { stack.push({ ...state, m: state.m.slice() }); },
    restore() { if (stack.length) Object.assign(state, stack.pop()); },
    setTransform(a, b, c, d, e, f) { state.m = [a, b, c, d, e, f]; },
    resetTransform() { state.m = identity.slice(); },
    translate(x, y) {
      const [a, b, c, d, e, f] = state.m;
      state.m = [a, b, c, d, a * x + c * y + e, b * x + d * y + f];
    },
    rotate(r) {
      const [a, b, c, d, e, f] = state.m, cos = Math.cos(r), sin = Math.sin(r);
      state.m = [a * cos + c * sin, b * cos + d * sin, c * cos - a * sin, d * cos - b * sin, e, f];
    },
    scale(sx, sy) {
      const [a, b, c, d, e, f] = state.m;
      state.m = [a * sx, b * sx, c * sy, d * sy, e, f];
    },
  };
  ctx.beginPath = () => { path = []; at = null; };
  ctx.moveTo = (x, y) => { at = apply(x, y); };
  ctx.lineTo = (x, y) => {
    const to = apply(x, y);
    if (at) path.push([at, to]);
    at = to;
  };
  ctx.setLineDash = (segments) => { state.dash = Array.from(segments || []); };
  ctx.stroke = () => {
    const width = ctx.lineWidth || 1;
    if (state.dash.some((v) => v > 0)) for (const segment of path) dashed.push({ segment, width });
    else for (const segment of path) solid.push({ segment, width });
  };
  ctx.strokeRect = (x, y, w, h) => {
    const c = [apply(x, y), apply(x + w, y), apply(x + w, y + h), apply(x, y + h)];
    for (let k = 0; k < 4; k++) solid.push({ segment: [c[k], c[(k + 1) % 4]], width: ctx.lineWidth || 1 });
  };
  // a patch keeps its rectangle and the transform it was drawn under (state.m is replaced, never changed in place);
  // patchBounds() carries it through when a check needs it (most patches, a grid's cells, are never looked at)
  ctx.fillRect = (x, y, w, h) => {
    patches.push({ m: state.m, x, y, w, h, box: null, order: texts.length, strokes: solid.length, fills: fills.length,
      colour: String(ctx.fillStyle) });
  };
  // a filled path (an arrow's head): its corners, so that a white patch drawn over it later is seen (review v18)
  ctx.fill = () => {
    if (path.length) fills.push({ corners: path.flat(), colour: String(ctx.fillStyle) });
  };
  for (const name of ["clearRect", "closePath", "rect", "arc"]) ctx[name] = () => {};
  return ctx;
}

// The quad a stroked segment paints: the segment widened by half the line width on each side.
function strokeQuad([[x0, y0], [x1, y1]], width) {
  const len = Math.hypot(x1 - x0, y1 - y0) || 1;
  const nx = (-(y1 - y0) / len) * (width / 2), ny = ((x1 - x0) / len) * (width / 2);
  return [[x0 + nx, y0 + ny], [x1 + nx, y1 + ny], [x1 - nx, y1 - ny], [x0 - nx, y0 - ny]];
}

function bounds(corners) {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const [x, y] of corners) {
    if (x < x0) x0 = x;
    if (x > x1) x1 = x;
    if (y < y0) y0 = y;
    if (y > y1) y1 = y;
  }
  return [x0, y0, x1, y1];
}

// A patch's bounds: its rectangle's four corners through the transform it was drawn under (computed once).
function patchBounds(p) {
  if (!p.box) {
    const [a, b, c, d, e, f] = p.m;
    const at = (x, y) => [a * x + c * y + e, b * x + d * y + f];
    p.box = bounds([at(p.x, p.y), at(p.x + p.w, p.y), at(p.x + p.w, p.y + p.h), at(p.x, p.y + p.h)]);
  }
  return p.box;
}

// How far two convex quads overlap: the smallest overlap of their projections on the quads' edge normals (0: apart).
function overlap(p, q) {
  let least = Infinity;
  for (let side = 0; side < 2; side++) {
    const quad = side ? q : p;
    for (let k = 0; k < 4; k++) {
      const [x0, y0] = quad[k], [x1, y1] = quad[(k + 1) % 4];
      const len = Math.hypot(x1 - x0, y1 - y0) || 1;
      const nx = -(y1 - y0) / len, ny = (x1 - x0) / len;
      let a0 = Infinity, a1 = -Infinity, b0 = Infinity, b1 = -Infinity;
      for (const [x, y] of p) {
        const dot = x * nx + y * ny;
        if (dot < a0) a0 = dot;
        if (dot > a1) a1 = dot;
      }
      for (const [x, y] of q) {
        const dot = x * nx + y * ny;
        if (dot < b0) b0 = dot;
        if (dot > b1) b1 = dot;
      }
      least = Math.min(least, Math.min(a1, b1) - Math.max(a0, b0));
      if (least <= 0) return 0;
    }
  }
  return least;
}

function dataView(b64) {
  const bytes = Buffer.from(b64 || "", "base64");
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

const problems = [], drawn = [], shown = [];
let framesDrawn = 0, textsDrawn = 0;
for (const state of input.states) {
  const traits = { frames: state.frames, times: dataView(state.times), codes: dataView(state.codes),
    width: state.width, height: state.height };
  const model = { get: (name) => traits[name] };
  // in an output `available` px wide (optional): drawn at the size the picture lays itself out at there (draw.layout,
  // as mountPicture asks it), and shown at displayScale of its smallest text
  const s = { ...state };
  if (state.available && draw.layout) Object.assign(s, draw.layout(recorder([]), model, state.available) || {});
  for (const i of s.positions) {
    const texts = [], dashed = [], solid = [], patches = [], fills = [];
    draw(recorder(texts, dashed, solid, patches, fills), s.width, s.height, model, i);
    if (state.available && texts.length) {
      const smallest = Math.min(...texts.map((t) => t.px));
      const scale = displayScale(s.width, state.available, smallest);
      shown.push({ where: `${state.where}, position ${i}`, available: state.available, width: s.width,
        height: s.height, smallest, shown: smallest * scale, fits: s.width * scale <= state.available + 0.5 });
    }
    framesDrawn += 1;
    if (input.record) drawn.push(texts.map((t) => t.call));
    textsDrawn += texts.length;
    const where = `${s.where}, position ${i} (${s.width} x ${s.height} px)`;
    const boxes = texts.map((t) => bounds(t.corners));
    texts.forEach(({ text }, k) => {
      const [x0, y0, x1, y1] = boxes[k];
      const out = Math.max(-x0, x1 - s.width, -y0, y1 - s.height);
      if (out > EDGE_PX) problems.push(`${where}: ${JSON.stringify(text)} runs ${out.toFixed(0)} px past the canvas`);
    });
    // each stroke's quad and its bounds, once a frame; a pair whose bounds overlap by at most OVERLAP_PX on an axis is
    // skipped (as two texts are below): moving one quad that far along that axis parts them, so overlap() (the depth
    // by which they overlap, the least push that parts them) is at most that much
    // (the box is the segment's bounds widened by half the line width on each axis: it holds the stroke's quad, so a
    // pair it lets through is the same or more, and overlap() decides; the quad itself is built when first needed)
    const quads = (lines) => lines.map(({ segment, width }) => {
      const [[x0, y0], [x1, y1]] = segment, half = width / 2;
      return { segment, width, quad: null,
        box: [Math.min(x0, x1) - half, Math.min(y0, y1) - half, Math.max(x0, x1) + half, Math.max(y0, y1) + half] };
    });
    const quadOf = (line) => line.quad || (line.quad = strokeQuad(line.segment, line.width));
    const near = (p, q) => Math.min(p[2], q[2]) - Math.max(p[0], q[0]) > OVERLAP_PX
      && Math.min(p[3], q[3]) - Math.max(p[1], q[1]) > OVERLAP_PX;
    const dashedQuads = quads(dashed), solidQuads = quads(solid);
    texts.forEach(({ text, corners }, k) => {
      for (const line of dashedQuads) {
        if (!near(boxes[k], line.box)) continue;
        const depth = overlap(corners, quadOf(line));
        if (depth > OVERLAP_PX) {
          problems.push(`${where}: ${JSON.stringify(text)} is crossed by a dashed line (${depth.toFixed(1)} px)`);
          break;
        }
      }
    });
    texts.forEach(({ text, corners }, k) => {
      // a white patch drawn under this text (after the strokes it hides, before the text) covers them
      const [tx0, ty0, tx1, ty1] = boxes[k];
      const covers = (n) => patches.some((p) => {
        if (p.order > k || p.strokes <= n || !/^(#fff(fff)?|white)$/i.test(p.colour)) return false;
        const [px0, py0, px1, py1] = patchBounds(p);
        return px0 <= tx0 + 1 && py0 <= ty0 + 1 && px1 >= tx1 - 1 && py1 >= ty1 - 1;
      });
      for (let n = 0; n < solid.length; n++) {
        if (!near(boxes[k], solidQuads[n].box)) continue;
        const depth = overlap(corners, quadOf(solidQuads[n]));
        if (depth > OVERLAP_PX && !covers(n)) {
          problems.push(`${where}: ${JSON.stringify(text)} is crossed by a solid line (${depth.toFixed(1)} px)`);
          break;
        }
      }
    });
    // a filled shape (an arrow's head) mostly under a white patch drawn after it (a label's backing): the label hid
    // the head of lesson 2's ring arrow from GPU 7 to GPU 8 at N = 10 (review v18)
    fills.forEach(({ corners, colour }, k) => {
      if (/^(#fff(fff)?|white)$/i.test(colour)) return;
      const [fx0, fy0, fx1, fy1] = bounds(corners);
      const area = Math.max((fx1 - fx0) * (fy1 - fy0), 1);
      const hidden = patches.some((p) => {
        if (p.fills <= k || !/^(#fff(fff)?|white)$/i.test(p.colour)) return false;
        const [px0, py0, px1, py1] = patchBounds(p);
        const w = Math.min(fx1, px1) - Math.max(fx0, px0), h = Math.min(fy1, py1) - Math.max(fy0, py0);
        return w > 0 && h > 0 && (w * h) / area > 0.5;
      });
      if (hidden) problems.push(`${where}: a filled shape (an arrow's head?) at (${fx0.toFixed(0)}, ${fy0.toFixed(0)}) is ` +
        "hidden under a white patch drawn after it");
    });
    for (let a = 0; a < texts.length; a++) {
      for (let b = a + 1; b < texts.length; b++) {
        const [p, q] = [boxes[a], boxes[b]];
        if (Math.min(p[2], q[2]) - Math.max(p[0], q[0]) <= OVERLAP_PX) continue; // apart: no need to look closer
        if (Math.min(p[3], q[3]) - Math.max(p[1], q[1]) <= OVERLAP_PX) continue;
        const depth = overlap(texts[a].corners, texts[b].corners);
        if (depth > OVERLAP_PX) {
          problems.push(`${where}: ${JSON.stringify(texts[a].text)} and ${JSON.stringify(texts[b].text)} overlap by ` +
            `${depth.toFixed(1)} px`);
        }
      }
    }
  }
}
const report = { frames: framesDrawn, texts: textsDrawn, problems, shown };
console.log(JSON.stringify(input.record ? { ...report, drawn } : report));
