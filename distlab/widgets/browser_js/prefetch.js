// The browser's cache of the states one control change away (issue 32; distlab.widgets.prefetch), shared by the
// pictures of apps whose other controls change their data (the training lab, the triage ladder, lessons 1-4, 6): the
// kernel sends {prefetch_base, limit} after each change, then {prefetch: key, payload: {summaries, errors, frames}}
// (and, where the change moves the picture's slider, min, max, value and height; lesson 4's grid: times and codes,
// as binary buffers named by the message's `buffers`) per neighbouring state. The key is the
// labels the app's controls (the `controls` trait) show, joined by \x1f (a checkbox: 1 or 0; a slider: its number).
// A change of a control to a cached state redraws at once from the payload, shown over the model's own data until
// the kernel sends its data (the same, computed by the same functions); any other change waits for the kernel.
// A payload without frames keeps the picture's frames (our message in place of the text: the picture hides them).
const KEY_SEPARATOR = "\x1f";
// the model's changes that bring the kernel's own data (lesson 4's grid sends times and codes with its frames)
const KERNEL_DATA = "change:frames change:summaries change:errors change:times change:codes";

function controlLabel(m) {
  const labels = m.get("_options_labels");
  if (labels !== undefined) {
    const index = m.get("index");
    return index === null || index === undefined ? "" : String(labels[index]);
  }
  const value = m.get("value");
  return typeof value === "boolean" ? (value ? "1" : "0") : String(value); // a checkbox, or a slider's number
}

// The payload of a prefetch message with its binary parts put back (lesson 4's timeline ops: msg.buffers names the
// message's buffers in order), each as a DataView, as the model holds a bytes trait.
function withBuffers(msg, buffers) {
  const names = msg.buffers || [];
  if (!names.length) return msg.payload;
  const payload = { ...msg.payload };
  names.forEach((name, k) => {
    const b = buffers[k];
    payload[name] = b instanceof DataView ? b : ArrayBuffer.isView(b) ? new DataView(b.buffer, b.byteOffset, b.byteLength) : new DataView(b);
  });
  return payload;
}

// {view, stop}: `view` reads the model through the cached payload drawn last (mountPicture paints from it); `stop`
// removes the listeners. The element `root` carries data-prefetched (states held) and data-cache-hits (changes drawn
// from the cache) for tests and the browser benchmark.
function prefetching(model, root) {
  const cache = new Map();
  let limit = 64;
  let shown = null; // the payload drawn over the model's data since the last change from the kernel
  const painters = [];
  let controls = [];
  let last = null;
  let hits = 0; // changes drawn from the cache (data-cache-hits: the browser benchmark reads it)
  const key = () => controls.map(controlLabel).join(KEY_SEPARATOR);
  const count = () => root.setAttribute("data-prefetched", String(cache.size));
  const view = {
    get: (name) => {
      if (shown === null) return model.get(name);
      if (name in shown) return shown[name];
      // a payload with a new slider range (the grid after a new D, T or P): the value clamped into it, as the
      // kernel's BrowserPicture clamps it
      if (name === "value" && "max" in shown) return Math.min(Math.max(model.get(name), shown.min ?? 0), shown.max);
      return model.get(name);
    },
    // the browser moves a value the cached payload holds (the ring's step after a new GPU count): its own from now on
    set: (name, ...rest) => {
      if (shown !== null && typeof name === "string" && name in shown) {
        shown = { ...shown };
        delete shown[name];
      }
      model.set(name, ...rest);
    },
    save_changes: () => model.save_changes(),
    on: (name, callback) => {
      model.on(name, callback);
      if (name === "change") painters.push(callback);
    },
    off: (name, callback) => {
      model.off(name, callback);
      const k = painters.indexOf(callback);
      if (k >= 0) painters.splice(k, 1);
    },
  };
  const fromKernel = () => { shown = null; };
  const onMessage = (msg, buffers) => {
    if (msg && msg.prefetch_base !== undefined) {
      cache.clear();
      limit = msg.limit || limit;
    } else if (msg && msg.prefetch !== undefined) {
      cache.delete(msg.prefetch);
      cache.set(msg.prefetch, withBuffers(msg, buffers || []));
      while (cache.size > limit) cache.delete(cache.keys().next().value);
    }
    count();
  };
  const onControl = (changed) => {
    const k = key();
    if (k === last) return;
    last = k;
    // a change the kernel made (ipywidgets applies the kernel's state under _state_lock): the kernel's own data
    // follows; only the student's changes are looked up
    if (changed && changed._state_lock) return;
    const hit = cache.get(k);
    if (hit === undefined) return;
    shown = hit;
    hits += 1;
    root.setAttribute("data-drawn-from", "cache");
    root.setAttribute("data-cache-hits", String(hits));
    painters.forEach((paint) => paint());
  };
  // registered before the picture's own painter: the kernel's data replaces the cached one before it paints
  model.on(KERNEL_DATA, fromKernel);
  model.on("msg:custom", onMessage);
  const refs = model.get("controls") || [];
  Promise.all(refs.map((ref) => model.widget_manager.get_model(String(ref).replace(/^IPY_MODEL_/, ""))))
    .then((models) => {
      controls = models;
      last = key();
      controls.forEach((m) => m.on("change", onControl));
    })
    .catch((exc) => console.warn("distlab picture: controls not found, no cache", exc));
  count();
  const stop = () => {
    model.off(KERNEL_DATA, fromKernel);
    model.off("msg:custom", onMessage);
    controls.forEach((m) => m.off("change", onControl));
  };
  return { view, stop };
}

