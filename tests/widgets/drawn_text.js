// Node side of tests/widgets/test_drawn_text_fits.py: draw real states of one browser picture on a recording canvas
// and report every text that runs past the canvas or overprints another text drawn in the same frame.
//
// Run as `node drawn_text.js <picture module> <states.json>` with DISTLAB_JS naming distlab/widgets/browser_js. The
// states file holds {"draw": name of the module's draw function, "states": [{width, height, frames, times, codes
// (base64 or ""), positions: [index...], where}], "record": bool}. Prints {"frames": frames drawn, "texts": texts drawn,
// "problems": [text], with record "drawn": [frame][text, x, y, textAlign] of every fillText} as JSON.
//
// The recording canvas measures 7/11 of the font size per character (7 px at the pictures' 11 px UI font): wider
// than the UI fonts' letters and digits (about 6 px at 11 px: Arial/Helvetica/DejaVu digits are 0.56 em), so a text
// that fits here fits in Chromium. A text's box is its em box (font size tall: above an "alphabetic" baseline 0.8 em,
// below it 0.2 em, as Arial's ascent and descent), carried through the context's transform (rotated labels too).
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
const draw = new Function(`${source}\nreturn ${input.draw};`)();

const EM_PER_CHAR = 7 / 11;
// Overprinting: two boxes that overlap by more than 1 px on every axis (the boxes are em boxes, already taller than
// the glyphs, which leave about a tenth of the em empty above the capitals; widths are the 7-px estimate, wider than
// the glyphs): 1 px is the rounding of positions computed in fractions of a pixel.
const OVERLAP_PX = 1;
// Past the canvas: any part of the box outside it, beyond half a pixel of rounding.
const EDGE_PX = 0.5;

function recorder(texts) {
  const identity = [1, 0, 0, 1, 0, 0];
  const state = { m: identity.slice(), textAlign: "start", textBaseline: "alphabetic", font: "10px sans-serif" };
  const stack = [];
  const px = () => {
    const found = /(\d+(?:\.\d+)?)px/.exec(state.font);
    return found ? Number(found[1]) : 10;
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
    measureText: (t) => ({ width: EM_PER_CHAR * px() * Array.from(String(t)).length }),
    fillText(t, x, y) {
      const text = String(t);
      if (!text.trim()) return;
      const size = px(), width = EM_PER_CHAR * size * Array.from(text).length;
      const align = state.textAlign;
      const x0 = align === "right" || align === "end" ? x - width : align === "center" ? x - width / 2 : x;
      const above = { top: 0, hanging: 0, middle: 0.5, alphabetic: 0.8, bottom: 1, ideographic: 1 }[state.textBaseline];
      const y0 = y - size * (above === undefined ? 0.8 : above);
      const corners = [[x0, y0], [x0 + width, y0], [x0 + width, y0 + size], [x0, y0 + size]].map(([u, v]) => apply(u, v));
      texts.push({ text, corners, call: [text, x, y, align] });
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
  for (const name of ["fillRect", "strokeRect", "clearRect", "beginPath", "closePath", "moveTo", "lineTo", "stroke",
    "fill", "rect", "arc", "setLineDash"]) ctx[name] = () => {};
  return ctx;
}

function bounds(corners) {
  const xs = corners.map((c) => c[0]), ys = corners.map((c) => c[1]);
  return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
}

// How far two convex quads overlap: the smallest overlap of their projections on the quads' edge normals (0: apart).
function overlap(p, q) {
  let least = Infinity;
  for (const quad of [p, q]) {
    for (let k = 0; k < 4; k++) {
      const [x0, y0] = quad[k], [x1, y1] = quad[(k + 1) % 4];
      const len = Math.hypot(x1 - x0, y1 - y0) || 1;
      const nx = -(y1 - y0) / len, ny = (x1 - x0) / len;
      const span = (corners) => {
        const dots = corners.map(([x, y]) => x * nx + y * ny);
        return [Math.min(...dots), Math.max(...dots)];
      };
      const [a0, a1] = span(p), [b0, b1] = span(q);
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

const problems = [], drawn = [];
let framesDrawn = 0, textsDrawn = 0;
for (const s of input.states) {
  const traits = { frames: s.frames, times: dataView(s.times), codes: dataView(s.codes), width: s.width, height: s.height };
  const model = { get: (name) => traits[name] };
  for (const i of s.positions) {
    const texts = [];
    draw(recorder(texts), s.width, s.height, model, i);
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
console.log(JSON.stringify({ frames: framesDrawn, texts: textsDrawn, problems, ...(input.record ? { drawn } : {}) }));
