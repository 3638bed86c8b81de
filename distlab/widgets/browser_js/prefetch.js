// The browser's cache of the states one control change away (issue 32; distlab.widgets.prefetch), shared by the
// pictures of apps whose other controls change their data (the training lab, the triage ladder, lessons 1-4, 6): the
// kernel sends {prefetch_base, limit, expect: {key: id}, fill, seen, home} after each change (the neighbourhood: the
// key and the full state's id of every state one change away, up to three steps along one control: prefetch.REACH,
// and of the base itself; fill counts them; seen: {view: the count of that page's changes the kernel had seen}, which
// each browser page sends with each change as "<view>:<count>" (CHANGE_COUNT; view: a random id of the page, so two
// tabs on one kernel each count their own); home: the keys from which a change straight back to the base reaches
// the base itself;
// an empty base and map after a change has reached the kernel: see `kept`), then {prefetch: key, id, fill, payload:
// {summaries, errors, frames}}
// (and, where the change moves the picture's slider, min, max, value and height; lesson 4's grid: times and codes,
// as binary buffers named by the message's `buffers`) per neighbouring state. The key is the
// labels the app's controls (the `controls` trait) show, joined by \x1f (a checkbox: 1 or 0; a slider: its number;
// a log slider: its step position, logSliderLabel). Where the picture has `inputs` (text boxes the key does not show),
// each message also names their values the states were priced at (`inputs`): nothing is answered while they differ.
// A change of a control to a state of the current neighbourhood whose payload is held (reached from its base by a run
// of steps along one control: `walk`) redraws at once from it,
// shown over the model's own data until the kernel sends its data (the same, computed by the same functions); any
// other change waits for the kernel. Payloads are held by state id across fills (a change back soon after is found
// before the kernel has refilled), at most `limit` of them and BYTE_BUDGET bytes, the least recently used out
// first, never one of the current neighbourhood.
// The kernel's own data names the state it was computed for (the model's data_key: BrowserPicture.data_key) and is
// painted only while the controls show that state: its answer to a change the student has since left is not (see
// `hold`).
// A payload without frames keeps the picture's frames (our message in place of the text: the picture hides them);
// its control_disabled ([true, false or null per control]) is applied to the controls at once (lesson 4's chunks v).
const KEY_SEPARATOR = "\x1f";
// the attribute of a control's model that carries the count of the student's changes to the kernel (prefetch.CHANGE_COUNT)
const CHANGE_COUNT = "_distlab_change";
// this page's id in the kernel's counts (two tabs on one kernel: each its own count; the kernel's "seen" names each)
const randomView = () => Math.random().toString(36).slice(2, 10);
// the keys after the student's last changes kept (a new map's in-flight changes are replayed from them)
const HISTORY = 64;
// the most bytes of payload held besides the current neighbourhood's (prefetch.BROWSER_LIMIT states in all): 64 MiB,
// where a frame-cache PNG is 12-18 kB, the training lab's payload 12 kB (the count binds first), lesson 4's grid
// 0.1-1 MB (its 64 timelines' ops: the bytes bind first, at 60 or more states)
const BYTE_BUDGET = 64 * 2 ** 20;
// a log slider's value within this fraction of a step of a step position is at that position (controls.ON_STEP)
const ON_STEP = 1e-6;
// the model's changes that bring the kernel's own data (lesson 4's grid sends times and codes with its frames)
const KERNEL_DATA = "change:frames change:summaries change:errors change:times change:codes change:data_key";
// the model's attribute naming the state the kernel's data was computed for: the key of its controls' labels then
// (BrowserPicture.data_key, prefetch.state_key; "" from a picture that names none: its data is painted as it comes)
const DATA_KEY = "data_key";
// how long data for a state the controls have not shown lately is held for the kernel's labels of it (its own change
// of a control: they come in the same turn of the kernel) before it is painted anyway (a key the browser would
// write otherwise than the kernel: never held for good)
const LABELS_GRACE_MS = 1000;

function controlLabel(m) {
  const labels = m.get("_options_labels");
  if (labels !== undefined) {
    const index = m.get("index");
    return index === null || index === undefined ? "" : String(labels[index]);
  }
  const value = m.get("value");
  if (m.get("_model_name") === "FloatLogSliderModel") {
    return logSliderLabel(value, m.get("min"), m.get("step"), m.get("base"));
  }
  return typeof value === "boolean" ? (value ? "1" : "0") : String(value); // a checkbox, or a slider's number
}

// A FloatLogSlider's label (prefetch.log_slider_label computes the same): its step position
// (log_base(value) - min) / step, an integer both sides compute exactly where noUiSlider's stepped exponent and
// Python's base ** (min + k step) differ in their last bits; "~" and the number for a value between steps (a
// default such as lesson 11's failure rate, 2.3e-5), which no step position names.
function logSliderLabel(value, min, step, base) {
  const position = (Math.log(value) / Math.log(base) - min) / step;
  const k = Math.round(position);
  return Number.isFinite(position) && Math.abs(position - k) < ON_STEP ? String(k) : `~${String(value)}`;
}

// the bytes a payload holds: its binary parts and the length of its JSON parts
function payloadBytes(payload) {
  let bytes = 0;
  for (const value of Object.values(payload)) {
    if (value instanceof DataView || ArrayBuffer.isView(value)) bytes += value.byteLength;
    else if (value !== null && value !== undefined) bytes += 2 * (JSON.stringify(value) || "").length;
  }
  return bytes;
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

// whether two values of a payload are the same data: JSON values compared deeply, binary parts (DataView, typed
// arrays: lesson 4's timeline ops) byte by byte
function sameData(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.byteLength !== b.byteLength) return false;
    const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    for (let i = 0; i < x.length; i += 1) if (x[i] !== y[i]) return false;
    return true;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => Object.prototype.hasOwnProperty.call(b, k) && sameData(a[k], b[k]));
}

// {control, offset} of key `k` from `base` (browser keys of the same `controls`) when they differ in one control's
// label only: the offset in its options (a dropdown, toggles, a selection slider), in its steps (a slider), in step
// positions (a log slider's label) or its other state (a checkbox: 1 or 0); null otherwise
function offsetFrom(controls, base, k) {
  const a = base.split(KEY_SEPARATOR);
  const b = k.split(KEY_SEPARATOR);
  if (a.length !== b.length || a.length !== controls.length) return null;
  const moved = a.map((label, i) => (label === b[i] ? -1 : i)).filter((i) => i >= 0);
  if (moved.length !== 1) return null;
  const i = moved[0];
  const m = controls[i];
  const labels = m.get("_options_labels");
  let offset;
  if (labels !== undefined) {
    const names = labels.map(String);
    const from = names.indexOf(a[i]);
    const to = names.indexOf(b[i]);
    offset = from < 0 || to < 0 ? NaN : to - from;
  } else {
    const positions = m.get("_model_name") === "FloatLogSliderModel" || typeof m.get("value") === "boolean";
    const scale = positions ? 1 : m.get("step") || 1;
    offset = Math.round((Number(b[i]) - Number(a[i])) / scale);
  }
  return Number.isFinite(offset) && offset !== 0 ? { control: i, offset } : null;
}

// {view, stop, shownId, payload}: `view` reads the model through the cached payload drawn last (mountPicture paints
// from it); `stop` removes the listeners; `shownId()` the state id of that payload; `payload(id)` the payload held
// under that id (or undefined). `events` (optional): {stored(id, msg, buffers), evicted(id), based(ids)}, for the
// frame cache's bitmaps. The element `root` carries data-prefetched (states of the current neighbourhood held),
// data-cached (states held), data-fill (the neighbourhood's number) and data-cache-hits (changes drawn from the
// cache) for tests and the browser benchmark.
function prefetching(model, root, events = {}) {
  const cache = new Map(); // state id -> payload, the least recently used first
  const sizes = new Map(); // state id -> payloadBytes
  let bytes = 0;
  let expect = new Map(); // browser key -> state id: the current neighbourhood (the kernel's last prefetch_base)
  let pinned = new Set(); // its ids: never evicted
  // whether `expect` is kept past the kernel's "forget" (an empty base: a change has reached it, and it may now move
  // controls itself) that says "keep" (the change was of a keyed control: the key shows it; a text box's change or the
  // picture's own slider's empties the map at once): until the kernel's next map, or until a change the kernel makes to
  // a control's label, the student's further changes along one control (a held key, 30 ms a press, faster than the
  // round trip) are still found under the old map's keys, which name the full state the kernel reaches by those
  // changes one after another
  let kept = false;
  // the student's changes since the map's base: along one control (its index), the offset reached (steps from the
  // base's label); broken once they leave that path. The map names the state a run of changes one step after the
  // other reaches (a first change may jump: the kernel keys a state only where the jump reaches the same state), so
  // a change that turns back or goes over to another control is left to the kernel (a dependent control such as
  // lesson 5's TP degree follows the way there: TP moved by h + 1 stays moved at h - 1)
  // (`at`: the key the walk has reached.) A change straight back to the base from a state the kernel marks `home`
  // (a -> b -> a where the step to b moved no other control) reaches the base itself: the walk starts afresh there.
  let baseKey = null;
  let walk = { control: -1, offset: 0, broken: false, at: null };
  let home = new Set();
  const rebase = (k) => {
    baseKey = k;
    walk = { control: -1, offset: 0, broken: false, at: k };
  };
  // the student's changes in this page, counted once for every view of this picture in it (the kernel sees each
  // change once): their number, the key after each (the last HISTORY), the key seen last and the page's id (`view`: a
  // second page on the same kernel has models of its own, and so its own count, which the kernel keeps apart)
  const changes = model.distlabChanges ||
    (model.distlabChanges = { count: 0, keys: new Map(), last: null, view: randomView() });
  // a new map's base `k`, named after the kernel has seen some of the student's changes: those it has not seen yet
  // are the walk's changes past k when k is on the walk (the rest of the run goes on from k), none when the student
  // has not changed anything since the last base; otherwise they are unknown (the student turned back or moved
  // another control on the way), and nothing is answered until a map whose base is the student's state
  // a new map's base `k` where the kernel names the count of the student's changes it had seen (`seen`): nothing in
  // flight when that is every change (then the student must be at k: else the kernel has moved a control itself,
  // and its labels are on the way); else k must be the key after the change seen last, and the changes since then
  // are walked again from k (each must continue the walk: `along`)
  // (`seen`: {view: count}, this page's entry absent where the kernel has seen none of its changes; a bare number from
  // a kernel that counts one browser)
  const rebaseOn = (k, counts) => {
    const seen = typeof counts === "number" ? counts :
      counts !== null && typeof counts === "object" ? (counts[changes.view] ?? 0) : undefined;
    if (typeof seen !== "number" || !controls.length) return rebaseOnWalk(k);
    rebase(k);
    if (seen === changes.count) {
      if (key() !== k) walk.broken = true;
      return;
    }
    if (seen > changes.count || changes.keys.get(seen) !== k) {
      walk.broken = true;
      return;
    }
    for (let n = seen + 1; n <= changes.count && !walk.broken; n += 1) along(changes.keys.get(n));
  };
  // the same without the kernel's count (a kernel that sends none): from the walk alone
  const rebaseOnWalk = (k) => {
    const onWalk = !walk.broken && walk.control !== -1;
    const on = !onWalk ? null : k === baseKey ? { control: walk.control, offset: 0 } : offsetFrom(controls, baseKey, k);
    const through = on !== null && on.control === walk.control && (on.offset === 0 ||
      (Math.sign(on.offset) === Math.sign(walk.offset) && Math.abs(on.offset) <= Math.abs(walk.offset)));
    const rest = through ? walk.offset - on.offset : 0;
    const unchanged = walk.control === -1 && !walk.broken;
    rebase(k);
    if (rest !== 0) walk = { control: on.control, offset: rest, broken: false, at: key() };
    else if (!through && !unchanged && controls.length && key() !== k) walk.broken = true;
  };
  let fill = 0; // its number (a base sent before this view was made never reaches it: its messages name it then)
  let limit = 256;
  let shown = null; // the payload drawn over the model's data since the last change from the kernel
  let shownId = null;
  const painters = [];
  let controls = [];
  // the picture's inputs the key does not show (a text box: the ring's size M, lessons 1 and 3's custom size) and
  // their values the current map was priced at (the kernel's messages name them): a change is answered only while
  // the inputs hold those values, so a change after a new size the kernel has not seen yet goes to the kernel
  let inputs = [];
  let pricedAt = [];
  const atPriced = () => inputs.every((m, i) => Array.isArray(pricedAt) && m.get("value") === pricedAt[i]);
  let last = null;
  let hits = 0; // changes drawn from the cache (data-cache-hits: the browser benchmark reads it)
  const key = () => controls.map(controlLabel).join(KEY_SEPARATOR);
  const count = () => {
    let held = 0;
    for (const id of expect.values()) if (cache.has(id)) held += 1;
    root.setAttribute("data-prefetched", String(held));
    root.setAttribute("data-cached", String(cache.size));
    root.setAttribute("data-fill", String(fill));
  };
  const drop = (id) => {
    bytes -= sizes.get(id) || 0;
    sizes.delete(id);
    cache.delete(id);
    if (events.evicted) events.evicted(id);
  };
  const evict = () => {
    for (const id of [...cache.keys()]) {
      if (cache.size <= limit && bytes <= BYTE_BUDGET) break;
      if (!pinned.has(id)) drop(id);
    }
  };
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
    // a painter is not called for the kernel's change that only confirms the payload drawn (`confirms`)
    on: (name, callback) => {
      if (name !== "change") return model.on(name, callback);
      const painter = (...args) => { if (!confirms(args[0])) callback(...args); };
      wrapped.set(callback, painter);
      model.on(name, painter);
      painters.push(callback);
    },
    off: (name, callback) => {
      model.off(name, wrapped.get(callback) || callback);
      wrapped.delete(callback);
      const k = painters.indexOf(callback);
      if (k >= 0) painters.splice(k, 1);
    },
  };
  const wrapped = new Map(); // a painter -> the listener registered for it
  // The kernel's data after a change drawn from the cache is that same payload (computed by the same functions):
  // repainting it draws the same pixels, and its frame, a few ms before the student's next change, keeps Chromium's
  // compositor on its 60 Hz ticks, so that change's own frame waits for the next tick (up to 16.7 ms) instead of
  // being drawn at once (RESULTS.md, branch rtt). A change of the model (one set(): Backbone's `changed`, on the
  // Backbone model each event names first; anywidget's model passes it on) whose every attribute equals the payload
  // shown keeps it, and no painter runs; any other goes back to the model's data.
  // The kernel's data names the state it was computed for (DATA_KEY): data for another state than the controls show
  // now (the kernel's answer to a change the student has left: a -> b -> a, b's data landing after a was drawn from
  // the cache) is not painted: what is drawn stays (`held`: the payload shown, else the model's values before
  // that set(), Backbone's previous()) until the model's data is that of the state shown (`catchUp`: its next data,
  // or the controls' labels reaching the state the kernel moved them to itself: a reset, a clamp, another page).
  // (worked out once per set(), payload shown and number of attributes changed: a nested set() adds to `changed`)
  let verdict = { changed: null, size: 0, of: null, same: false };
  const changedOf = (source) =>
    source && typeof source === "object" && "changed" in source ? source.changed : model.changed;
  // whether the model's data is that of the state the controls show now (a picture that names none: always)
  const current = () => {
    const k = model.get(DATA_KEY);
    return !k || !controls.length || k === key();
  };
  const confirms = (source) => {
    const changed = changedOf(source);
    if (shown === null || changed === undefined || changed === null) return false;
    const names = Object.keys(changed).filter((name) => name !== DATA_KEY);
    if (verdict.changed !== changed || verdict.size !== names.length || verdict.of !== shown) {
      const same = names.length > 0 && names.every((name) => name in shown && sameData(changed[name], shown[name]));
      verdict = { changed, size: names.length, of: shown, same };
    }
    return verdict.same;
  };
  let held = false; // the model holds kernel data of a state the controls do not show: `shown` is drawn over it
  // the keys the controls showed lately (the student's changes and the kernel's), the latest HISTORY: data for one
  // of them is an answer the student has left, held until the current state's; any other is held LABELS_GRACE_MS
  const visited = new Map();
  const visit = (k) => {
    visited.delete(k);
    visited.set(k, true);
    if (visited.size > HISTORY) visited.delete(visited.keys().next().value);
  };
  const graceFor = (k) => {
    if (visited.has(k)) return;
    setTimeout(() => {
      if (!held || model.get(DATA_KEY) !== k) return;
      console.warn(`distlab picture: no controls showed the state of the kernel's data (${JSON.stringify(k)}); painted`);
      shown = null;
      shownId = null;
      held = false;
      painters.forEach((paint) => paint());
    }, LABELS_GRACE_MS);
  };
  // keep what is drawn over the kernel's data of set() `source` (the values before it where no payload is shown)
  const hold = (source) => {
    const changed = changedOf(source);
    if (!changed || !source || typeof source.previous !== "function") return false;
    const kept = shown === null ? {} : { ...shown };
    for (const name of Object.keys(changed)) {
      if (name !== DATA_KEY && !(name in kept)) kept[name] = source.previous(name);
    }
    shown = kept;
    held = true;
    return true;
  };
  const fromKernel = (source) => {
    const changed = changedOf(source);
    const size = changed ? Object.keys(changed).filter((name) => name !== DATA_KEY).length : 0;
    if (changed && verdict.changed === changed && verdict.size === size && verdict.of === shown) return; // judged
    if (!current() && hold(source)) {
      verdict = { changed, size, of: shown, same: true }; // no painter runs for this set()
      graceFor(model.get(DATA_KEY));
      return;
    }
    if (!confirms(source)) { shown = null; shownId = null; }
    held = false; // the model's data is the state's shown now: painted, or the payload drawn is that same data
  };
  // the model's data is that of the state the controls show now while a payload or held data is drawn: paint it
  const catchUp = () => {
    if (shown === null || !held || !model.get(DATA_KEY) || !current()) return;
    shown = null;
    shownId = null;
    held = false;
    painters.forEach((paint) => paint());
  };
  const based = (map) => {
    expect = map;
    pinned = new Set(expect.values());
    evict();
    if (events.based) events.based(pinned);
  };
  const onMessage = (msg, buffers) => {
    if (msg && msg.prefetch_base !== undefined && msg.fill >= fill) {
      limit = msg.limit || limit;
      fill = msg.fill;
      const forget = msg.prefetch_base === "" && Object.keys(msg.expect || {}).length === 0;
      kept = forget && msg.keep === true && (kept || expect.size > 0);
      if (!kept) {
        based(new Map(Object.entries(msg.expect || {})));
        home = new Set(msg.home || []);
        rebaseOn(msg.prefetch_base, msg.seen);
        pricedAt = msg.inputs;
      }
    } else if (msg && msg.prefetch !== undefined && msg.id !== undefined) {
      if (msg.fill > fill) { // its base came before this view: the neighbourhood as its messages come
        fill = msg.fill;
        pricedAt = msg.inputs;
        expect = new Map();
        pinned = new Set();
        home = new Set();
        if (events.based) events.based(pinned);
        // the state this view was made at (undefined: the state once its controls have loaded)
        rebase(controls.length ? key() : undefined);
      }
      if (msg.fill === fill) {
        expect.set(msg.prefetch, msg.id);
        pinned.add(msg.id);
        if (msg.home === true) home.add(msg.prefetch); // (the map names them too; a view made after it learns here)
      }
      if (cache.has(msg.id)) drop(msg.id);
      const payload = withBuffers(msg, buffers || []);
      cache.set(msg.id, payload);
      sizes.set(msg.id, payloadBytes(payload));
      bytes += sizes.get(msg.id);
      if (events.stored) events.stored(msg.id, msg, buffers || []);
      evict();
    }
    count();
  };
  // a payload's disabled states of the app's controls, applied in the browser at once (not sent back: the kernel sets
  // the same when the change reaches it)
  const applyDisabled = (payload) => {
    (payload.control_disabled || []).forEach((disabled, i) => {
      if (disabled !== null && disabled !== undefined && controls[i]) controls[i].set("disabled", disabled);
    });
  };
  // whether the change to key `k` continues the walk from the map's base (and note it): the first change to any
  // offset of one control, then one step further the same way each time, or straight back to the base from a `home`
  // state (the walk starts afresh)
  const along = (k) => {
    if (typeof baseKey !== "string") { // no map yet: where the kernel's first one finds the student is unknown
      walk.broken = true;
      return false;
    }
    if (walk.broken) return false;
    if (k === baseKey && walk.control !== -1 && home.has(walk.at)) {
      rebase(baseKey);
      return true;
    }
    const step = offsetFrom(controls, baseKey, k);
    const further = walk.control === -1 ||
      (step !== null && step.control === walk.control && Math.sign(step.offset) === Math.sign(walk.offset) &&
        Math.abs(step.offset) === Math.abs(walk.offset) + 1);
    if (step === null || !further) {
      walk.broken = true;
      return false;
    }
    walk = { control: step.control, offset: step.offset, broken: false, at: k };
    return true;
  };
  const onControl = (changed) => {
    const k = key();
    if (k === last) return;
    last = k;
    visit(k);
    // a change the kernel made (ipywidgets applies the kernel's state under _state_lock: its own, or a change made
    // in another page on the same kernel, echoed): the kernel's own data follows; only the student's changes are
    // looked up. A map kept past the kernel's "forget" goes now: its keys name only the student's changes from its
    // base; and the walk ends (the controls got here by a change that is not this student's step: a turn back to
    // the base from here need not reach it), until the kernel's next map
    const counted = changes.last !== k;
    changes.last = k;
    if (changed && changed._state_lock) {
      if (kept) based(new Map());
      kept = false;
      walk.broken = true;
      catchUp();
      return;
    }
    if (counted) { // the student's change: its count goes to the kernel in the same message (set before it is sent)
      changes.count += 1;
      changes.keys.set(changes.count, k);
      changes.keys.delete(changes.count - HISTORY);
      if (changed && typeof changed.set === "function") changed.set(CHANGE_COUNT, `${changes.view}:${changes.count}`);
    }
    if (!along(k) || !atPriced()) return catchUp();
    const id = expect.get(k);
    const hit = id === undefined ? undefined : cache.get(id);
    if (hit === undefined) return catchUp();
    cache.delete(id); // the most recently used now
    cache.set(id, hit);
    shown = hit;
    shownId = id;
    held = false;
    hits += 1;
    applyDisabled(hit);
    root.setAttribute("data-drawn-from", "cache");
    root.setAttribute("data-cache-hits", String(hits));
    painters.forEach((paint) => paint());
  };
  // registered before the picture's own painter: the kernel's data replaces the cached one before it paints
  model.on(KERNEL_DATA, fromKernel);
  model.on("msg:custom", onMessage);
  const refs = model.get("controls") || [];
  const inputRefs = model.get("inputs") || [];
  const load = (ref) => model.widget_manager.get_model(String(ref).replace(/^IPY_MODEL_/, ""));
  Promise.all([...refs, ...inputRefs].map(load))
    .then((models) => {
      controls = models.slice(0, refs.length);
      inputs = models.slice(refs.length);
      last = key();
      visit(last);
      if (changes.last === null) {
        changes.last = last;
        changes.keys.set(0, last);
      }
      if (baseKey === undefined) rebase(last);
      controls.forEach((m) => m.on("change", onControl));
    })
    .catch((exc) => console.warn("distlab picture: controls not found, no cache", exc));
  count();
  const stop = () => {
    model.off(KERNEL_DATA, fromKernel);
    model.off("msg:custom", onMessage);
    controls.forEach((m) => m.off("change", onControl));
  };
  return { view, stop, shownId: () => shownId, payload: (id) => cache.get(id) };
}

