"""Collectives simulated step by step: real NumPy data moves between simulated GPUs, every send recorded.

A CollectiveTrace holds the data, each step's sends and whose input every held chunk sums, so
the lesson's pictures and the tests are computed, not drawn. The four simulate_* functions build
their traces with one builder (`_trace`) from a list of phases, each a ring or star schedule.
With N = 1 nothing moves: zero bytes, zero steps, zero time. Sizes follow the nccl-tests
convention of distlab.collectives.cost. Taught in Lesson 2 §1 to §4 (notebooks/02_collectives.ipynb).
"""

from __future__ import annotations

import numbers

import numpy as np

from .._arguments import link_parameters, readonly, warn_renamed
from ..errors import ConfigurationError
from ..units import format_bytes

__all__ = [
    "CollectiveTrace",
    "MAX_TRACE_ENTRIES",
    "simulate_ring_all_reduce",
    "simulate_reduce_scatter",
    "simulate_all_gather",
    "simulate_parameter_server",
]

#: Largest steps x GPUs a trace records (memory guard: about 8 M entries per array).
MAX_TRACE_ENTRIES = 2**23


def _index_dtype(n: int):
    return np.int16 if n < 2**15 - 1 else np.int32


class CollectiveTrace:
    """The record of a simulated collective: data, every send, and whose data each chunk sums.

    Steps are numbered 0..steps-1. A *state* t in 0..steps is the situation before step t
    (t = 0: the start, t = steps: the end). Arrays with one row per step and one column
    per GPU use -1 for "nothing":

    - send_to[k, g], send_chunk[k, g]: where GPU g sends in step k, and which chunk
    - recv_from[k, g], recv_chunk[k, g]: from whom GPU g receives in step k, and which chunk
    - bytes_sent[k, g]: bytes GPU g sends in step k

    Contributors (the GPUs whose input a held chunk already sums) are stored compactly: in
    these algorithms they always form an arc of the ring of GPUs, {start, start+1, ...,
    start+length-1} mod N, and each step changes only the chunks received, so the trace
    keeps the initial arcs and, per step, the new arc of each received chunk. contributors(),
    contributor_arcs(), contributor_counts() and holds_matrix() expand a state on demand.
    Lesson 2 §3 reads one step by step; §4 animates it. Built by the simulate_* functions:

    >>> trace = simulate_ring_all_reduce([[1, 2, 3], [10, 20, 30], [100, 200, 300]])
    >>> trace.send_chunk[0].tolist(), sorted(trace.contributors(1, gpu=2, chunk=0))
    ([2, 0, 1], [1, 2])
    """

    def __init__(
        self,
        *,
        op,
        algorithm,
        initial,
        chunk_bounds,
        start0,
        length0,
        send_to,
        send_chunk,
        reduce_steps,
        phases,
        n_contributors,
        outputs_fn,
        server=None,
    ):
        self.op = op
        self.algorithm = algorithm
        self.gpus = int(initial.shape[0])
        self.n_contributors = int(n_contributors)
        self.server = server
        self.chunk_bounds = readonly(np.asarray(chunk_bounds, dtype=np.int64))
        self.n_chunks = len(self.chunk_bounds) - 1
        self.itemsize = int(initial.dtype.itemsize)
        self.chunk_nbytes = readonly(np.diff(self.chunk_bounds) * self.itemsize)
        self.size_bytes = float(initial.shape[1] * self.itemsize)
        self.steps = int(send_to.shape[0])
        self.phases = tuple(phases)  # (name, first step, number of steps)
        self.initial = readonly(initial.copy())
        self._start0 = start0
        self._length0 = length0
        self.reduce_steps = readonly(np.asarray(reduce_steps, dtype=bool))
        self.send_to = readonly(send_to)
        self.send_chunk = readonly(send_chunk)
        self.recv_from, self.recv_chunk, self._messages = _invert_sends(send_to, send_chunk, self.gpus)
        self._outputs_fn = outputs_fn
        self._run()

    # -- the simulation proper ---------------------------------------------------------
    def _run(self):
        dtype = _index_dtype(self.n_contributors)
        steps, gpus = self.recv_from.shape
        self.update_start = np.full((steps, gpus), -1, dtype=dtype)
        self.update_length = np.full((steps, gpus), -1, dtype=dtype)
        buffers = self.initial.copy()
        start = self._start0.astype(np.int64)
        length = self._length0.astype(np.int64)
        for k in range(steps):
            self._move_data(buffers, k)
            rows, chunks, new_start, new_length = self._merge_arcs(start, length, k)
            start[rows, chunks] = new_start
            length[rows, chunks] = new_length
            self.update_start[k, rows] = new_start
            self.update_length[k, rows] = new_length
        readonly(self.update_start)
        readonly(self.update_length)
        self.final = readonly(buffers)
        self._cache_arcs = (steps, start, length)
        self._cache_buffers = (steps, buffers)

    def _step_messages(self, k):
        """(senders, receivers, chunks) of step k as int64 arrays."""
        pointers, senders, receivers, chunks = self._messages
        part = slice(pointers[k], pointers[k + 1])
        return senders[part].astype(np.int64), receivers[part].astype(np.int64), chunks[part].astype(np.int64)

    def _move_data(self, buffers, k):
        """Every sender's chunk lands on its receiver at once (reads happen before writes)."""
        senders, receivers, chunks = self._step_messages(k)
        if senders.size == 0:
            return
        lo = self.chunk_bounds[chunks]
        lengths = self.chunk_bounds[chunks + 1] - lo
        total = int(lengths.sum())
        if total == 0:
            return
        first = np.cumsum(lengths) - lengths
        elements = np.repeat(lo - first, lengths) + np.arange(total)
        src = np.repeat(senders, lengths)
        dst = np.repeat(receivers, lengths)
        values = buffers[src, elements]
        if self.reduce_steps[k]:
            buffers[dst, elements] += values  # (dst, element) pairs are unique: one receive per GPU
        else:
            buffers[dst, elements] = values

    def _merge_arcs(self, start, length, k):
        """New contributor arcs of the chunks received in step k (union on reduce, copy otherwise)."""
        n = self.n_contributors
        src, rows, chunks = self._step_messages(k)
        a_s, l_s = start[src, chunks], length[src, chunks]
        if not self.reduce_steps[k]:
            return rows, chunks, a_s, l_s
        a_r, l_r = start[rows, chunks], length[rows, chunks]
        total = l_s + l_r
        receiver_follows = (a_s + l_s) % n == a_r
        sender_follows = (a_r + l_r) % n == a_s
        ok = (total <= n) & ((l_s == 0) | (l_r == 0) | receiver_follows | sender_follows)
        if not ok.all():  # a schedule bug: data summed twice or arcs that do not touch
            bad = int(np.nonzero(~ok)[0][0])
            raise RuntimeError(
                f"step {k}: GPU {rows[bad]} chunk {chunks[bad]} would sum {{{a_r[bad]}+{l_r[bad]}}} "
                f"with {{{a_s[bad]}+{l_s[bad]}}}: double counting or a non-ring schedule"
            )
        new_start = np.where(l_r == 0, a_s, np.where(l_s == 0, a_r, np.where(receiver_follows, a_s, a_r)))
        new_start = np.where((total == n) | (total == 0), 0, new_start)
        return rows, chunks, new_start, total

    @property
    def n(self) -> int:
        """Deprecated: the GPU count is `gpus`."""
        warn_renamed("CollectiveTrace.n", "CollectiveTrace.gpus")
        return self.gpus

    # -- bytes and time ------------------------------------------------------------------
    @property
    def bytes_sent(self) -> np.ndarray:
        """(steps, GPUs) bytes each GPU sends in each step."""
        chunk = np.maximum(self.send_chunk, 0)
        return np.where(self.send_chunk >= 0, self.chunk_nbytes[chunk], 0)

    @property
    def bytes_sent_by_gpu(self) -> np.ndarray:
        """Total bytes each GPU sends over the whole collective."""
        return self.bytes_sent.sum(axis=0)

    @property
    def bytes_received(self) -> np.ndarray:
        """(steps, GPUs) bytes each GPU receives in each step."""
        chunk = np.maximum(self.recv_chunk, 0)
        return np.where(self.recv_chunk >= 0, self.chunk_nbytes[chunk], 0)

    @property
    def bytes_received_by_gpu(self) -> np.ndarray:
        """Total bytes each GPU receives over the whole collective."""
        return self.bytes_received.sum(axis=0)

    def bytes_so_far(self, gpu) -> tuple[np.ndarray, np.ndarray]:
        """(sent, received) by `gpu` after each state t = 0 .. steps: cumulative sums, starting at 0.

        Lesson 2 §4 (the ring animation counts them step by step).
        """
        if isinstance(gpu, bool) or not isinstance(gpu, (int, np.integer)) or not 0 <= gpu < self.gpus:
            raise ConfigurationError(f"gpu={gpu!r} must be a GPU of this collective, 0 to {self.gpus - 1}")
        zero = np.zeros(1, dtype=np.int64)
        return (
            np.concatenate([zero, np.cumsum(self.bytes_sent[:, gpu])]),
            np.concatenate([zero, np.cumsum(self.bytes_received[:, gpu])]),
        )

    @property
    def bytes_sent_per_gpu(self) -> float:
        """Bytes sent by the busiest GPU (all GPUs alike in the ring; the server in a parameter server)."""
        return float(self.bytes_sent_by_gpu.max()) if self.steps else 0.0

    def time_s(self, link=None, *, bandwidth=None, latency=None) -> float:
        """Alpha-beta time of the recorded schedule: sum over steps of alpha + largest message / B."""
        bw, alpha = link_parameters(link, bandwidth, latency)
        if self.steps == 0:
            return 0.0
        return float(self.steps * alpha + self.bytes_sent.max(axis=1).sum() / bw)

    def phase(self, step: int) -> str:
        """Name of the phase a step belongs to ('reduce-scatter', 'all-gather', 'push', 'pull')."""
        step = self._check_step(step)
        for name, first, count in self.phases:
            if first <= step < first + count:
                return name
        raise AssertionError("unreachable")  # pragma: no cover

    # -- states ------------------------------------------------------------------------
    def _check_state(self, t) -> int:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral) or not 0 <= int(t) <= self.steps:
            raise ConfigurationError(f"state t={t!r} is out of range; valid: 0 (start) to {self.steps} (end)")
        return int(t)

    def _check_step(self, k) -> int:
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 <= int(k) < self.steps:
            raise ConfigurationError(f"step={k!r} is out of range; valid: 0 to {self.steps - 1}")
        return int(k)

    def _check_gpu_chunk(self, gpu, chunk):
        if isinstance(gpu, bool) or not isinstance(gpu, numbers.Integral) or not 0 <= gpu < self.gpus:
            raise ConfigurationError(f"gpu={gpu!r} is out of range; valid: 0 to {self.gpus - 1}")
        if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or not 0 <= chunk < self.n_chunks:
            raise ConfigurationError(f"chunk={chunk!r} is out of range; valid: 0 to {self.n_chunks - 1}")

    def contributor_arcs(self, t) -> tuple[np.ndarray, np.ndarray]:
        """(start, length), each (GPUs, chunks), of the contributor arcs in state t."""
        t = self._check_state(t)
        cached_t, start, length = self._cache_arcs
        if t < cached_t:
            cached_t, start, length = 0, self._start0.astype(np.int64), self._length0.astype(np.int64)
        else:
            start, length = start.copy(), length.copy()
        for k in range(cached_t, t):
            _, rows, chunks = self._step_messages(k)
            start[rows, chunks] = self.update_start[k, rows]
            length[rows, chunks] = self.update_length[k, rows]
        self._cache_arcs = (t, start, length)
        return start.copy(), length.copy()

    def contributor_counts(self, t) -> np.ndarray:
        """(GPUs, chunks): how many GPUs' inputs each held chunk sums in state t."""
        return self.contributor_arcs(t)[1]

    def contributors(self, t, gpu, chunk) -> frozenset:
        """The GPUs whose input GPU `gpu`'s copy of `chunk` sums in state t."""
        self._check_gpu_chunk(gpu, chunk)
        start, length = self.contributor_arcs(t)
        a, count = int(start[gpu, chunk]), int(length[gpu, chunk])
        return frozenset((a + i) % self.n_contributors for i in range(count))

    def holds_matrix(self, t, chunk=None) -> np.ndarray:
        """Booleans [gpu, contributor] for one chunk, or [gpu, chunk, contributor] for all, in state t."""
        start, length = self.contributor_arcs(t)
        n = self.n_contributors
        if chunk is not None:
            self._check_gpu_chunk(0, chunk)
            start, length = start[:, chunk], length[:, chunk]
        elif start.size * n > 2**24:
            raise ConfigurationError(
                f"holds_matrix for all {self.n_chunks} chunks of {self.gpus} GPUs would hold "
                f"{start.size * n:,} booleans; pass chunk= or use contributor_counts()"
            )
        offset = (np.arange(n) - start[..., None]) % n
        return offset < length[..., None]

    def buffers(self, t) -> np.ndarray:
        """(GPUs, elements): every GPU's buffer in state t (recomputed by replaying the steps)."""
        t = self._check_state(t)
        cached_t, data = self._cache_buffers
        if t < cached_t:
            cached_t, data = 0, self.initial.copy()
        else:
            data = data.copy()
        for k in range(cached_t, t):
            self._move_data(data, k)
        self._cache_buffers = (t, data)
        return data.copy()

    @property
    def outputs(self) -> list:
        """Each GPU's result: the whole buffer, or for reduce-scatter the GPU's own reduced chunk."""
        return self._outputs_fn(self)

    def __repr__(self) -> str:
        return (
            f"CollectiveTrace({self.algorithm} {self.op}, {self.gpus} GPUs, {self.n_chunks} chunks, "
            f"{self.steps} steps, {format_bytes(self.bytes_sent_per_gpu)} sent by the busiest GPU)"
        )


def _invert_sends(send_to, send_chunk, gpus):
    """recv_from / recv_chunk and the flat message list (step, sender, receiver, chunk).

    Checks that no GPU sends to itself and none receives two chunks in one step.
    """
    ks, senders = np.nonzero(send_to >= 0)  # row-major: sorted by step
    receivers = send_to[ks, senders]
    chunks = send_chunk[ks, senders]
    if np.any(receivers == senders):
        raise RuntimeError("a GPU sends to itself")  # pragma: no cover - schedule bug
    recv_from = np.full(send_to.shape, -1, dtype=send_to.dtype)
    recv_chunk = np.full(send_to.shape, -1, dtype=send_to.dtype)
    recv_from[ks, receivers] = senders
    recv_chunk[ks, receivers] = chunks
    if np.count_nonzero(recv_from >= 0) != ks.size:
        raise RuntimeError("a GPU receives two chunks in one step")  # pragma: no cover - schedule bug
    pointers = np.searchsorted(ks, np.arange(send_to.shape[0] + 1))
    dtype = send_to.dtype
    messages = (pointers, senders.astype(dtype), receivers.astype(dtype), chunks.astype(dtype))
    return readonly(recv_from), readonly(recv_chunk), messages


def _as_buffers(arrays, name: str, equal_length: bool = True):
    """Validate a list of per-GPU 1-D numeric arrays; returns the list as NumPy arrays and a dtype."""
    if (isinstance(arrays, np.ndarray) and arrays.ndim < 2) or not hasattr(arrays, "__len__"):
        raise ConfigurationError(
            f"{name} must be a list of N arrays, one per simulated GPU (or a 2-D array, one row per GPU)"
        )
    items = [np.asarray(a) for a in arrays]
    if not items:
        raise ConfigurationError(f"{name} is empty; give one array per GPU (at least 1 GPU)")
    for i, a in enumerate(items):
        if a.ndim != 1:
            raise ConfigurationError(f"{name}[{i}] has shape {a.shape}; each GPU's data must be a 1-D array")
        if a.dtype == bool or not np.issubdtype(a.dtype, np.number):
            raise ConfigurationError(f"{name}[{i}] has dtype {a.dtype}; expected integers or floats")
        if np.issubdtype(a.dtype, np.inexact) and not np.all(np.isfinite(a)):
            raise ConfigurationError(f"{name}[{i}] contains NaN or infinity")
    if equal_length:
        for i, a in enumerate(items):
            if a.shape[0] != items[0].shape[0]:
                raise ConfigurationError(
                    f"{name}[{i}] has {a.shape[0]} elements but {name}[0] has {items[0].shape[0]}; "
                    f"every GPU must hold an array of the same length"
                )
    dtype = np.result_type(*[a.dtype for a in items])
    return items, dtype


def _check_trace_size(steps: int, gpus: int):
    if steps * gpus > MAX_TRACE_ENTRIES:
        raise ConfigurationError(
            f"a trace of {steps} steps x {gpus} GPUs is too large to record "
            f"(limit {MAX_TRACE_ENTRIES:,} entries); use collective_cost() for the numbers"
        )


def _ring_schedule(n, steps, chunk_of):
    """send_to / send_chunk for `steps` ring steps: GPU g sends chunk_of(k, g) to (g+1) mod N."""
    dtype = _index_dtype(n)
    k = np.arange(steps)[:, None]
    g = np.arange(n)[None, :]
    send_to = np.broadcast_to((g + 1) % n, (steps, n)).astype(dtype)
    send_chunk = (chunk_of(k, g) % n).astype(dtype)
    return send_to, send_chunk


def _split_bounds(length: int, n: int) -> np.ndarray:
    """Chunk boundaries with np.array_split semantics (the first length % n chunks one longer)."""
    base, extra = divmod(length, n)
    sizes = np.full(n, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


def _own_arcs(n, chunks):
    """Every GPU's every chunk holds just its own input: arc {g}."""
    start = np.broadcast_to(np.arange(n)[:, None], (n, chunks)).copy()
    return start, np.ones((n, chunks), dtype=np.int64)


def _stack(items, dtype, steps: int) -> np.ndarray:
    """(GPUs, elements): the validated per-GPU arrays in one array, once the trace size is known to fit."""
    _check_trace_size(steps, len(items))
    return np.stack([a.astype(dtype, copy=False) for a in items])


def _reduce_scatter_chunk(k, g):
    """Ring reduce-scatter, step k: GPU g sends chunk (g-k-1) mod N."""
    return g - k - 1


def _all_gather_chunk(k, g):
    """Ring all-gather, step k (counted within the phase): GPU g sends chunk (g-k) mod N."""
    return g - k


def _whole_chunk(send_to):
    """send_chunk for a schedule that sends whole arrays: chunk 0 wherever a GPU sends, else -1."""
    return np.where(send_to >= 0, 0, -1).astype(send_to.dtype)


def _whole_buffers(trace) -> list:
    return [row.copy() for row in trace.final]


def _own_chunks(trace) -> list:
    bounds = trace.chunk_bounds
    return [trace.final[g, bounds[g] : bounds[g + 1]].copy() for g in range(trace.gpus)]


def _trace(op, algorithm, data, bounds, arcs, phases, outputs_fn=_whole_buffers, server=None) -> CollectiveTrace:
    """The one CollectiveTrace builder: `phases` is [(name, (send_to, send_chunk), reduces), ...] in order.

    Each phase's schedule has one row per step; `reduces` says whether its receivers add (reduce)
    or overwrite (gather). arcs = (start, length), each (GPUs, chunks): whose input every chunk
    holds at the start.
    """
    names, schedules, reduces = zip(*phases)
    counts = [send_to.shape[0] for send_to, _ in schedules]
    firsts = np.cumsum([0] + counts[:-1])
    return CollectiveTrace(
        op=op,
        algorithm=algorithm,
        initial=data,
        chunk_bounds=bounds,
        start0=arcs[0],
        length0=arcs[1],
        send_to=np.concatenate([send_to for send_to, _ in schedules]),
        send_chunk=np.concatenate([send_chunk for _, send_chunk in schedules]),
        reduce_steps=np.repeat(reduces, counts),
        phases=tuple((name, int(first), count) for name, first, count in zip(names, firsts, counts)),
        n_contributors=data.shape[0],
        outputs_fn=outputs_fn,
        server=server,
    )


def simulate_ring_all_reduce(arrays) -> CollectiveTrace:
    """Ring all-reduce of N equal-length arrays (one per simulated GPU), step by step. Lesson 2 §3.

    Each array is split into N chunks (np.array_split). Reduce-scatter, steps k = 0..N-2:
    GPU i sends chunk (i-k-1) mod N to (i+1) mod N, which adds it to its own; afterwards
    GPU i holds the full sum of chunk i. All-gather, steps N-1..2N-3: GPU i sends chunk
    (i-k) mod N (k counted within the phase), which the receiver overwrites. Each GPU sends
    2(N-1) chunks: 2(N-1)/N x M bytes when N divides the length (Patarasuk & Yuan 2009).

    >>> trace = simulate_ring_all_reduce([[1, 2, 3, 4], [10, 20, 30, 40]])
    >>> trace.outputs[1].tolist(), trace.steps, trace.phases
    ([11, 22, 33, 44], 2, (('reduce-scatter', 0, 1), ('all-gather', 1, 1)))
    """
    items, dtype = _as_buffers(arrays, "arrays")
    n = len(items)
    data = _stack(items, dtype, 2 * (n - 1))
    return _trace(
        "all-reduce",
        "ring",
        data,
        _split_bounds(data.shape[1], n),
        _own_arcs(n, n),
        [
            ("reduce-scatter", _ring_schedule(n, n - 1, _reduce_scatter_chunk), True),
            ("all-gather", _ring_schedule(n, n - 1, _all_gather_chunk), False),
        ],
    )


def simulate_reduce_scatter(arrays) -> CollectiveTrace:
    """Ring reduce-scatter: the reduce-scatter half of simulate_ring_all_reduce. Lesson 2 §1.

    N-1 steps; GPU i ends with the sum of chunk i (its `outputs[i]`); each GPU sends
    (N-1)/N x M bytes, M being the whole input array (the nccl-tests size convention).

    >>> [out.tolist() for out in simulate_reduce_scatter([[1, 2], [10, 20]]).outputs]
    [[11], [22]]
    """
    items, dtype = _as_buffers(arrays, "arrays")
    n = len(items)
    data = _stack(items, dtype, n - 1)
    return _trace(
        "reduce-scatter",
        "ring",
        data,
        _split_bounds(data.shape[1], n),
        _own_arcs(n, n),
        [
            ("reduce-scatter", _ring_schedule(n, n - 1, _reduce_scatter_chunk), True),
        ],
        outputs_fn=_own_chunks,
    )


def simulate_all_gather(shards) -> CollectiveTrace:
    """Ring all-gather: GPU g starts with shard g, everyone ends with all shards concatenated. Lesson 2 §1.

    Step k = 0..N-2: GPU i sends chunk (i-k) mod N to (i+1) mod N. Shards may differ in
    length (as np.array_split chunks do). Each GPU sends (N-1)/N x M bytes for equal shards,
    M being the whole gathered buffer (the nccl-tests size convention).

    >>> simulate_all_gather([[1], [2, 3]]).outputs[0].tolist()
    [1, 2, 3]
    """
    items, dtype = _as_buffers(shards, "shards", equal_length=False)
    n = len(items)
    _check_trace_size(n - 1, n)
    bounds = np.concatenate(([0], np.cumsum([a.shape[0] for a in items]))).astype(np.int64)
    data = np.zeros((n, int(bounds[-1])), dtype=dtype)
    for g, a in enumerate(items):
        data[g, bounds[g] : bounds[g + 1]] = a
    start = np.where(np.eye(n, dtype=bool), np.arange(n)[None, :], 0)
    length = np.eye(n, dtype=np.int64)  # GPU g holds only chunk g, which is its own data
    return _trace(
        "all-gather",
        "ring",
        data,
        bounds,
        (start, length),
        [
            ("all-gather", _ring_schedule(n, n - 1, _all_gather_chunk), False),
        ],
    )


def simulate_parameter_server(arrays, server=0) -> CollectiveTrace:
    """Parameter-server all-reduce: workers push to the server, it sums and sends back. Lesson 2 §2.

    The server is GPU `server`, one of the N. Push, steps 0..N-2: worker (server+k+1) mod N
    sends its whole array (one chunk) to the server, which adds it; pull, steps N-1..2N-3:
    the server sends the sum to worker (server+k+1) mod N. One message per step: the
    server's link carries them one at a time. The server sends and receives (N-1) x M
    (`bytes_sent_by_gpu[server]`), each worker M: the busiest load grows linearly with N.

    >>> trace = simulate_parameter_server([[1, 2], [10, 20], [100, 200]])
    >>> trace.outputs[2].tolist(), trace.bytes_sent_by_gpu.tolist()
    ([111, 222], [32, 16, 16])
    """
    items, dtype = _as_buffers(arrays, "arrays")
    n = len(items)
    if isinstance(server, bool) or not isinstance(server, numbers.Integral) or not 0 <= int(server) < n:
        raise ConfigurationError(f"server={server!r} is not a GPU index; valid: 0 to {n - 1}")
    server = int(server)
    data = _stack(items, dtype, 2 * (n - 1))
    dtype_i = _index_dtype(n)
    push_to, pull_to = np.full((n - 1, n), -1, dtype=dtype_i), np.full((n - 1, n), -1, dtype=dtype_i)
    workers = (server + 1 + np.arange(n - 1)) % n
    push_to[np.arange(n - 1), workers] = server  # step k: worker (server+k+1) mod N sends to the server
    pull_to[np.arange(n - 1), server] = workers  # and the server sends the sum back to it
    arcs = (np.arange(n)[:, None].copy(), np.ones((n, 1), dtype=np.int64))  # one chunk: the whole array
    return _trace(
        "all-reduce",
        "parameter-server",
        data,
        np.array([0, data.shape[1]]),
        arcs,
        [
            ("push", (push_to, _whole_chunk(push_to)), True),
            ("pull", (pull_to, _whole_chunk(pull_to)), False),
        ],
        server=server,
    )
