"""Issue 30: calibration microbenchmarks measured on one GPU, for what no paper publishes at the shapes distlab's
validation runs use. Three steps; only `measure` needs a GPU (and only PyTorch, optionally CuPy, on that machine):

    python benchmarks/gpu_microbench.py shapes  benchmarks/gpu_shapes.json     # here: the runs' GEMM shapes
    python benchmarks/gpu_microbench.py measure benchmarks/gpu_shapes.json OUT.json   # on the GPU (about 4 minutes)
    python benchmarks/gpu_microbench.py compare OUT.json [OUT2.json ...]        # here: measured against the model

The files measured on 2026-11-29 (one H200, PyTorch 2.11.0+cu130) are in benchmarks/results/h200-2026-11-29-*.json
(the sweep: gemm, attention, elementwise, overlap; then --parts=sustained,layers,overlap,rowwise (with nvidia-smi's
clocks and power every 250 ms in the -smi.csv beside it), --parts=power,layers, --parts=logits and
--parts=fp8layers); RESULTS.md, session 13, reads them. The 'casts' part (a fused Triton cast-transpose,
benchmarks/_triton_cast.py) ran on 2026-11-30 (benchmarks/results/h200-2026-11-30-casts.json, Triton 3.6.0): what a
fused cast such as Transformer Engine's costs against the step model's price of a cast.

What `measure` times (CUDA events, the median of 3 repeats of a timed loop after warm-ups; operands rotated over
enough copies to exceed the L2 cache, as a training step's GEMMs read fresh operands):
- gemm: every distinct weight-GEMM shape (forward, input gradient, weight gradient) and logits GEMM of the
  calibration and validation runs on their own tensor-parallel split (benchmarks/gpu_shapes.json), bf16 torch.mm,
  and FP8 (float8_e4m3fn operands, per-tensor scales, bf16 out) through torch._scaled_mm with fast accumulation on
  and off (Transformer Engine accumulates the forward fast and the backward's gradients with split accumulators);
- attention: torch's scaled_dot_product_attention on its flash (FlashAttention-2) and cuDNN backends, causal and not,
  forward and backward, head dim 128, 16,384 tokens per batch, hidden 2048 (the setting of Shah et al. 2024 Figs. 5-6),
  at 512-16,384 tokens per sequence; FLOPs counted as the paper does (forward 4 s^2 a d per sequence, halved for
  causal; backward 2.5 x forward);
- elementwise: achieved HBM bandwidth of a copy, RMSNorm, SwiGLU, an FP8 amax + cast, each counted by the bytes it
  must read and write;
- overlap: an 8192^3 bf16 GEMM's slowdown while a copy kernel on a second stream holds a fixed number of thread
  blocks (a stand-in for a communication kernel's SMs and HBM traffic; NCCL runs one block per channel).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time

L2_BYTES = 120e6  # rotate operands over more than twice the H100/H200's 50-60 MB L2


def shapes(path: str) -> None:
    """Write the distinct (m, n, k) of every expressible calibration and validation run's GEMMs (distlab's own
    shapes: efficiency.layer_gemm_slowdown_array's docstring) with the runs that use each."""
    from distlab import validation

    found: dict[tuple, set] = {}
    for role in ("calibration", "validation"):
        for run in validation.load_runs(role):
            block = run["distlab"]
            if not block["expressible"]:
                continue
            model, cfg = validation.run_model(run), block["estimate"]
            tokens = cfg["micro_batch_size"] * cfg["seq_len"] // cfg.get("cp", 1)
            tp, h = cfg["tp"], model.hidden
            d = getattr(model, "head_dim", model.hidden // model.heads)
            q, kv, g = model.heads * d, model.kv_heads * d, 2 if model.gated_mlp else 1
            pairs = [((q + 2 * kv) // tp, h), (h, q // tp), (model.vocab // tp, h)]  # (n, k) after the tp split
            if getattr(model, "moe", None) is None:
                pairs += [(g * model.ffn // tp, h), (h, model.ffn // tp)]
            for n, k in pairs:
                for m_, n_, k_ in ((tokens, n, k), (tokens, k, n), (k, n, tokens)):
                    found.setdefault((int(m_), int(n_), int(k_)), set()).add(run["id"])
    rows = [{"m": m, "n": n, "k": k, "runs": sorted(r)} for (m, n, k), r in sorted(found.items())]
    with open(path, "w") as f:
        json.dump(rows, f, indent=0)
    print(f"{len(rows)} shapes -> {path}")


def _timer(torch, device):
    """time(fn, iters) -> seconds per call: CUDA events (median of 3 timed loops) or perf_counter on the CPU."""

    def run(fn, iters):
        for _ in range(2):
            fn(0)
        samples = []
        for _ in range(3):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for i in range(iters):
                    fn(i)
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / 1e3 / iters)
            else:
                t0 = time.perf_counter()
                for i in range(iters):
                    fn(i)
                samples.append((time.perf_counter() - t0) / iters)
        return statistics.median(samples)

    return run


def _iters(seconds_guess, floor=3, cap=200):
    return int(min(cap, max(floor, math.ceil(0.015 / max(seconds_guess, 1e-7)))))


def _gemm_rows(torch, device, timer, rows, deadline, log):
    out = []
    f8 = getattr(torch, "float8_e4m3fn", None)
    for row in rows:
        if time.time() > deadline:
            log("gemm: deadline reached, %d of %d shapes" % (len(out), len(rows)))
            break
        m, n, k = row["m"], row["n"], row["k"]
        flops = 2.0 * m * n * k
        copies = int(min(16, max(1, math.ceil(L2_BYTES / (2.0 * (m * k + k * n))))))
        a = [torch.randn(m, k, device=device, dtype=torch.bfloat16) for _ in range(copies)]
        b = [torch.randn(k, n, device=device, dtype=torch.bfloat16) for _ in range(copies)]
        iters = _iters(flops / 6e14)
        rec = {"m": m, "n": n, "k": k, "bf16_s": timer(lambda i: torch.mm(a[i % copies], b[i % copies]), iters)}
        if f8 is not None and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:
            a8 = [x.to(f8) for x in a]
            b8 = [x.t().contiguous().to(f8).t() for x in b]  # column-major, as _scaled_mm wants
            one = torch.ones((), device=device, dtype=torch.float32)
            for fast in (True, False):
                key = "fp8_fast_s" if fast else "fp8_s"
                try:
                    rec[key] = timer(
                        lambda i, fast=fast: torch._scaled_mm(
                            a8[i % copies], b8[i % copies], scale_a=one, scale_b=one,
                            out_dtype=torch.bfloat16, use_fast_accum=fast),
                        _iters(flops / 1.2e15),
                    )
                except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                    rec[key + "_error"] = repr(exc)[:200]
            del a8, b8
        del a, b
        out.append(rec)
    return out


def _attention_rows(torch, device, timer, deadline, log, seqs, total=16384, hidden=2048, d=128):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    functional = torch.nn.functional
    heads = hidden // d
    out = []
    for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
        for s in seqs:
            for causal in (True, False):
                if time.time() > deadline:
                    log("attention: deadline reached")
                    return out
                batch = max(1, total // s)
                q, k, v = (torch.randn(batch, heads, s, d, device=device, dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                grad = torch.randn(batch, heads, s, d, device=device, dtype=torch.bfloat16)
                fwd_flops = 4.0 * batch * s * s * heads * d / (2.0 if causal else 1.0)
                rec = {"backend": backend, "seq": s, "causal": causal, "batch": batch, "heads": heads, "d": d,
                       "fwd_flops": fwd_flops}
                try:
                    with sdpa_kernel(getattr(SDPBackend, backend)):
                        with torch.no_grad():
                            rec["fwd_s"] = timer(
                                lambda i: functional.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                _iters(fwd_flops / 3e14))

                        def both(i):
                            o = functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            torch.autograd.grad(o, (q, k, v), grad)

                        rec["fwd_bwd_s"] = timer(both, _iters(3.5 * fwd_flops / 3e14))
                except Exception as exc:  # noqa: BLE001
                    rec["error"] = repr(exc)[:300]
                out.append(rec)
                del q, k, v, grad
    return out


def _elementwise_rows(torch, device, timer, tokens=8192, hidden=4096, ffn=14336):
    functional = torch.nn.functional
    x = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    w = torch.ones(hidden, device=device, dtype=torch.bfloat16)
    gate = torch.randn(tokens, ffn, device=device, dtype=torch.bfloat16)
    up = torch.randn(tokens, ffn, device=device, dtype=torch.bfloat16)
    xb, gb = x.numel() * 2.0, gate.numel() * 2.0
    cases = {
        "copy_sm": (lambda i: torch.add(x, 0.0, out=y), 2 * xb),
        "copy_engine": (lambda i: y.copy_(x), 2 * xb),
        "rms_norm": (lambda i: functional.rms_norm(x, (hidden,), w, 1e-5), 2 * xb),
        "swiglu": (lambda i: functional.silu(gate) * up, 3 * gb),
    }
    f8 = getattr(torch, "float8_e4m3fn", None)
    if f8 is not None:
        cases["fp8_amax_cast"] = (lambda i: (x * (448.0 / x.abs().amax().float())).to(f8), xb + xb / 2)
    out = []
    for name, (fn, nbytes) in cases.items():
        try:
            t = timer(fn, 20)
            out.append({"kernel": name, "s": t, "min_bytes": nbytes, "gb_per_s": nbytes / t / 1e9})
        except Exception as exc:  # noqa: BLE001
            out.append({"kernel": name, "error": repr(exc)[:200]})
    return out


COPY_KERNEL = r"""
extern "C" __global__ void copy_passes(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                       long long n, int passes) {
    for (int p = 0; p < passes; ++p) {
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
             i += (long long)gridDim.x * blockDim.x) {
            dst[i] = src[i];
        }
    }
}
"""


def _overlap_rows(torch, log, size=8192, blocks_list=(8, 16, 32, 64)):
    import cupy

    kernel = cupy.RawKernel(COPY_KERNEL, "copy_passes")
    nbytes = 512 * 2**20
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    n16 = nbytes // 16
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    cp_stream = cupy.cuda.ExternalStream(side.cuda_stream)

    def launch(blocks, passes):
        with cp_stream:
            kernel((blocks,), (512,), (cupy.uint64(src.data_ptr()), cupy.uint64(dst.data_ptr()),
                                       cupy.int64(n16), cupy.int32(passes)))

    def gemm_loop(iters=30):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            torch.mm(a, b)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iters

    launch(8, 1)  # compile and load the kernel before anything is timed
    torch.cuda.synchronize()
    for _ in range(3):
        gemm_loop(5)
    alone = statistics.median(gemm_loop() for _ in range(3))
    out = [{"blocks": 0, "gemm_s": alone, "gemm_slowdown": 1.0}]
    for blocks in blocks_list:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(side)
        launch(blocks, 1)
        e1.record(side)
        e1.synchronize()
        one_pass = e0.elapsed_time(e1) / 1e3
        passes = max(1, math.ceil(3.0 * 30 * alone / one_pass))  # outlasts the GEMM loop
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            launch(blocks, passes)
            times.append(gemm_loop())
            torch.cuda.synchronize()
        beside = statistics.median(times)
        out.append({"blocks": blocks, "copy_gb_per_s_alone": 2 * nbytes / one_pass / 1e9, "gemm_s": beside,
                    "gemm_slowdown": beside / alone})
        log("overlap %d blocks: copy %.0f GB/s alone, GEMM x%.3f" % (blocks, 2 * nbytes / one_pass / 1e9,
                                                                        beside / alone))
    return out


LAYER_CASES = {
    # name: (hidden, heads, kv_heads, ffn, gated, norm, seq, micro_batch): the validation runs' layers at tp 1
    "mcore-1.7b": (2048, 16, 16, 8192, False, "layernorm", 4096, 1),
    "mcore-7.1b": (4096, 32, 32, 16384, False, "layernorm", 4096, 1),
    "mpt-7b-mb6": (4096, 32, 32, 16384, False, "layernorm", 2048, 6),
    "llama3-8b": (4096, 32, 8, 14336, True, "rmsnorm", 8192, 1),
    "llama3-70b-tp8": (8192, 8, 1, 3584, True, "rmsnorm", 8192, 1),
}


def _layer_step(torch, name, shape, layers, matmul=None, compiled=False):
    """A step function: forward + backward of `layers` pre-norm transformer layers of a LAYER_CASES shape (bf16
    weights and activations, SDPA causal attention, k and v repeated for grouped queries as torchtitan does; no RoPE,
    no dropout). matmul(x, w) runs each weight GEMM (None: x @ w in bf16); compiled: each layer through torch.compile."""
    functional = torch.nn.functional
    h, heads, kv_heads, ffn, gated, norm, seq, mb = shape
    d = h // heads if name != "llama3-70b-tp8" else 128
    qw, kvw = heads * d, kv_heads * d
    dev, bf = ("cuda" if torch.cuda.is_available() else "cpu"), torch.bfloat16
    mm = matmul or (lambda x, w: x @ w)

    def w(n_in, n_out):
        return (torch.randn(n_in, n_out, device=dev, dtype=bf) / n_in**0.5).requires_grad_()

    params = [(w(h, qw + 2 * kvw), w(qw, h), w(h, (2 if gated else 1) * ffn), w(ffn, h),
               torch.ones(h, device=dev, dtype=bf, requires_grad=True)) for _ in range(layers)]

    def normed(x, g):
        if norm == "rmsnorm":
            return functional.rms_norm(x, (h,), g, 1e-5)
        return functional.layer_norm(x, (h,), g, None, 1e-5)

    def block(x, wqkv, wo, wup, wdown, g):
        qkv = mm(normed(x, g), wqkv)
        q, k, v = qkv.split([qw, kvw, kvw], dim=-1)
        q = q.view(mb, seq, heads, d).transpose(1, 2)
        k = k.view(mb, seq, kv_heads, d).transpose(1, 2)
        v = v.view(mb, seq, kv_heads, d).transpose(1, 2)
        if kv_heads != heads:
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
        o = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + mm(o.transpose(1, 2).reshape(mb, seq, qw), wo)
        up = mm(normed(x, g), wup)
        if gated:
            gate, lin = up.chunk(2, dim=-1)
            act = functional.silu(gate) * lin
        else:
            act = functional.gelu(up, approximate="tanh")
        return x + mm(act, wdown)

    run = torch.compile(block) if compiled else block
    x0 = torch.randn(mb, seq, h, device=dev, dtype=bf, requires_grad=True)
    grad = torch.randn(mb, seq, h, device=dev, dtype=bf)

    def step():
        y = x0
        for p in params:
            y = run(y, *p)
        y.backward(grad)

    return step


def _time_layers(torch, step, layers, rec, sustained=False):
    """Fill rec with the step's time per layer (the median of 3 loops of 3 steps after 3 warm-ups), optionally burst
    against settled, and the CUDA kernel time per layer by kernel name (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(3):
        e0.record()
        for _ in range(3):
            step()
        e1.record()
        e1.synchronize()
        samples.append(e0.elapsed_time(e1) / 1e3 / 3 / layers)
    rec["layer_s"] = statistics.median(samples)
    if sustained and torch.cuda.is_available():
        burst, settled, trace = _burst_and_settled(torch, step, seconds=4.0)
        rec.update(burst_layer_s=burst / layers, settled_layer_s=settled / layers, trace_us=trace)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = {}
    for evt in prof.key_averages():
        t = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0.0)
        if t and evt.count:
            kernels[evt.key[:120]] = [t / 1e6 / layers, evt.count]
    rec["kernels"] = kernels


def _layer_rows(torch, log, layers=4):
    """Each LAYER_CASES stack in eager PyTorch with cuDNN attention: wall time per layer, and the CUDA kernel time per
    class from torch.profiler (the 1.7B and 8B stacks also burst against settled under the power cap)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = []
    for name, shape in LAYER_CASES.items():
        rec = {"case": name, "layers": layers, "shape": list(shape)}
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            step = _layer_step(torch, name, shape, layers)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION if dev == "cuda" else SDPBackend.MATH):
                _time_layers(torch, step, layers, rec, sustained=name in ("mcore-1.7b", "llama3-8b"))
        except Exception as exc:  # noqa: BLE001
            rec["error"] = repr(exc)[:300]
        log("layer %s: %s ms" % (name, "%.3f" % (1e3 * rec["layer_s"]) if "layer_s" in rec else rec.get("error")))
        out.append(rec)
        torch.cuda.empty_cache()
    return out


def _fp8_cast(torch, t, dtype):
    """Current (per-tensor) scaling: the tensor's own amax maps to the format's largest value; (tensor, 1 / scale)."""
    scale = torch.finfo(dtype).max / t.abs().amax().float().clamp(min=1e-12)
    return (t.float() * scale).to(dtype), scale.reciprocal()


def _float8_matmul(torch):
    """x @ w with both operands cast to FP8 e4m3 and the output gradient to e5m2, each with its own amax (current
    scaling), as Transformer Engine's and torchao's current-scaling recipes run a linear: the forward with fast
    accumulation, the input and weight gradients with split accumulation; each GEMM's operands cast (and transposed
    where the FP8 GEMM needs the other layout) just before it. Returns matmul(x, w)."""
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2

    class Float8Matmul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            shape = x.shape
            x2 = x.reshape(-1, shape[-1])
            xq, sx = _fp8_cast(torch, x2, e4)
            wtq, sw = _fp8_cast(torch, w.t().contiguous(), e4)  # (n, k) row-major: (k, n) column-major
            out = torch._scaled_mm(xq, wtq.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16,
                                   use_fast_accum=True)
            ctx.save_for_backward(x2, w)
            ctx.shape = shape
            return out.reshape(*shape[:-1], w.shape[1])

        @staticmethod
        def backward(ctx, g):
            x2, w = ctx.saved_tensors
            g2 = g.reshape(-1, g.shape[-1])
            gq, sg = _fp8_cast(torch, g2, e5)
            wq, swb = _fp8_cast(torch, w, e4)
            dx = torch._scaled_mm(gq, wq.t(), scale_a=sg, scale_b=swb, out_dtype=torch.bfloat16, use_fast_accum=False)
            xtq, sxt = _fp8_cast(torch, x2.t().contiguous(), e4)
            gtq, sgt = _fp8_cast(torch, g2.t().contiguous(), e5)
            dw = torch._scaled_mm(xtq, gtq.t(), scale_a=sxt, scale_b=sgt, out_dtype=torch.bfloat16,
                                  use_fast_accum=False)
            return dx.reshape(ctx.shape), dw

    return Float8Matmul.apply


FP8_LAYER_CASES = ("llama3-8b", "llama3-70b-tp8")


def _fp8_layer_rows(torch, log, started, budget_s, layers=4):
    """bf16 against FP8 (current scaling) layer stacks, eager and through torch.compile (which fuses the casts and
    amax reductions into the neighbouring element-wise kernels, as Transformer Engine's cast-transpose kernels do)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = []
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for name in FP8_LAYER_CASES:
        for compiled in (False, True):
            for precision in ("bf16", "fp8"):
                if time.time() - started > budget_s:
                    log("fp8 layers: deadline reached")
                    return out
                rec = {"case": name, "precision": precision, "compiled": compiled, "layers": layers,
                       "shape": list(LAYER_CASES[name])}
                t0 = time.time()
                try:
                    mm = _float8_matmul(torch) if precision == "fp8" else None
                    step = _layer_step(torch, name, LAYER_CASES[name], layers, matmul=mm, compiled=compiled)
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION if dev == "cuda" else SDPBackend.MATH):
                        _time_layers(torch, step, layers, rec)
                except Exception as exc:  # noqa: BLE001
                    rec["error"] = repr(exc)[:400]
                rec["wall_s"] = time.time() - t0
                log("fp8 layers %s %s %s: %s" % (name, precision, "compiled" if compiled else "eager",
                                                  "%.3f ms" % (1e3 * rec["layer_s"]) if "layer_s" in rec
                                                  else rec.get("error")))
                out.append(rec)
                torch.cuda.empty_cache()
    return out


def _sustained_rows(torch, log, seconds=8.0, size=8192):
    """An 8192^3 bf16 GEMM back to back for `seconds`: the rate in each half-second window (clocks settle under
    sustained load; a short benchmark reports the first windows)."""
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * size**3
    out, start = [], time.time()
    while time.time() - start < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        n = 0
        while n < 400:
            torch.mm(a, b)
            n += 1
            if n % 50 == 0 and e0.query() is False and time.time() - start > seconds:
                break
        e1.record()
        e1.synchronize()
        t = e0.elapsed_time(e1) / 1e3
        out.append({"t": time.time() - start, "tflops": flops * n / t / 1e12})
    log("sustained: first %.0f, last %.0f TFLOP/s" % (out[0]["tflops"], out[-1]["tflops"]))
    return out


def _rowwise_rows(torch, timer, shapes_mnk):
    """FP8 with row-wise scales (a scale per row of A and per column of B, what torchao's float8 rowwise recipe runs)
    against per-tensor scales, same shapes."""
    f8 = torch.float8_e4m3fn
    out = []
    for m, n, k in shapes_mnk:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16).to(f8)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).to(f8).t()
        sa = torch.ones(m, 1, device="cuda", dtype=torch.float32)
        sb = torch.ones(1, n, device="cuda", dtype=torch.float32)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        rec = {"m": m, "n": n, "k": k}
        for key, (x, y) in (("tensorwise_s", (one, one)), ("rowwise_s", (sa, sb))):
            try:
                rec[key] = timer(lambda i, x=x, y=y: torch._scaled_mm(a, b, scale_a=x, scale_b=y,
                                                                      out_dtype=torch.bfloat16, use_fast_accum=True),
                                 _iters(2.0 * m * n * k / 1.2e15))
            except Exception as exc:  # noqa: BLE001
                rec[key + "_error"] = repr(exc)[:200]
        out.append(rec)
    return out


def _burst_and_settled(torch, fn, seconds=5.0, window=0.25):
    """(burst, settled) seconds per call of fn: burst = 3 calls after 1 s idle (clocks at their idle maximum);
    settled = the median window over the last 2 s of `seconds` of back-to-back calls (under the power cap)."""
    fn()
    torch.cuda.synchronize()
    time.sleep(1.0)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(3):
        fn()
    e1.record()
    e1.synchronize()
    burst = e0.elapsed_time(e1) / 1e3 / 3
    per_window = max(1, int(window / burst))
    windows, start = [], time.time()
    while time.time() - start < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(per_window):
            fn()
        e1.record()
        e1.synchronize()
        windows.append((time.time() - start, e0.elapsed_time(e1) / 1e3 / per_window))
    settled = statistics.median(t for at, t in windows if at > seconds - 2.0)
    return burst, settled, [round(t * 1e6, 1) for _, t in windows]


def _power_rows(torch, log):
    """Burst against settled (power-capped) time of a GEMM, causal attention forward + backward and a layer stack."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    functional = torch.nn.functional
    out = []
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    burst, settled, trace = _burst_and_settled(torch, lambda: torch.mm(a, b))
    out.append({"what": "gemm 8192^3 bf16", "flops": 2.0 * 8192**3, "burst_s": burst, "settled_s": settled,
                "trace_us": trace})
    log("power: gemm burst %.0f settled %.0f TFLOP/s" % (2 * 8192**3 / burst / 1e12, 2 * 8192**3 / settled / 1e12))
    del a, b
    for backend in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
        for seq in (2048, 8192):
            batch, heads, d = 16384 // seq, 16, 128
            q, k, v = (torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            grad = torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16)

            def both():
                o = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                torch.autograd.grad(o, (q, k, v), grad)

            flops = 3.5 * 2.0 * batch * seq * seq * heads * d
            try:
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    burst, settled, trace = _burst_and_settled(torch, both)
                out.append({"what": "%s causal seq %d fwd+bwd" % (backend, seq), "flops": flops, "burst_s": burst,
                            "settled_s": settled, "trace_us": trace})
                log("power: %s %d burst %.0f settled %.0f TFLOP/s" % (backend, seq, flops / burst / 1e12,
                                                                      flops / settled / 1e12))
            except Exception as exc:  # noqa: BLE001
                out.append({"what": backend, "error": repr(exc)[:300]})
            del q, k, v, grad
    return out


LOGIT_CASES = {"mcore-1.7b": (4096, 2048, 131072), "mcore-7.1b-tp2": (4096, 4096, 65536),
               "llama3-8b": (8192, 4096, 128256), "mpt-7b-mb6": (12288, 4096, 50368)}


def _logit_rows(torch, timer, log):
    """The logits GEMM and the cross-entropy loss on fp32-upcast logits (PyTorch's F.cross_entropy, as Megatron-LM's
    unfused vocab-parallel loss runs on fp32), forward + backward: time, and kernel time by class from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    functional = torch.nn.functional
    out = []
    for name, (tokens, h, vocab) in LOGIT_CASES.items():
        x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = (torch.randn(vocab, h, device="cuda", dtype=torch.bfloat16) / h**0.5).requires_grad_()
        target = torch.randint(0, vocab, (tokens,), device="cuda")

        def step(i=0):
            loss = functional.cross_entropy((x @ w.t()).float(), target)
            loss.backward()

        rec = {"case": name, "tokens": tokens, "hidden": h, "vocab": vocab}
        try:
            rec["fwd_bwd_s"] = timer(step, 5)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            rec["kernels"] = {e.key[:120]: [(getattr(e, "device_time_total", 0.0) or 0.0) / 1e6, e.count]
                              for e in prof.key_averages() if e.count}
        except Exception as exc:  # noqa: BLE001
            rec["error"] = repr(exc)[:300]
        log("logits %s: %.2f ms" % (name, 1e3 * rec.get("fwd_bwd_s", float("nan"))))
        out.append(rec)
        del x, w, target
        torch.cuda.empty_cache()
    return out


def _cast_rows(torch, timer, log, shapes=((8192, 4096), (8192, 14336), (4096, 14336), (1024, 8192))):
    """FP8 casts, bytes moved against time: the amax (torch.linalg.vector_norm, one read), a fused Triton
    cast-transpose (one read, two 1-byte writes: current scaling's second pass), the same with the amax folded in
    (delayed scaling's single pass), and PyTorch's eager ops for the same work."""
    import triton

    from _triton_cast import cast_transpose_kernel

    e4 = torch.float8_e4m3fn
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: Triton's interpreter (TRITON_INTERPRET=1)
    out = []
    for m, n in shapes:
        x = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
        y = torch.empty(m, n, device=dev, dtype=e4)
        yt = torch.empty(n, m, device=dev, dtype=e4)
        scale = torch.ones(1, device=dev, dtype=torch.float32)
        amax = torch.zeros(1, device=dev, dtype=torch.float32)
        elems = float(m * n)
        rec = {"m": m, "n": n}

        def fused(bm, bn, with_amax):
            grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
            return lambda i: cast_transpose_kernel[grid](x, y, yt, scale, amax, m, n, BLOCK_M=bm, BLOCK_N=bn,
                                                         AMAX=with_amax)

        try:
            rec["amax_s"] = timer(lambda i: torch.linalg.vector_norm(x, float("inf")), 20)
            for with_amax, key in ((False, "cast_transpose_s"), (True, "cast_transpose_amax_s")):
                rec[key] = min(timer(fused(bm, bn, with_amax), 20) for bm, bn in ((64, 64), (32, 128), (128, 64)))
            rec["eager_s"] = timer(lambda i: ((x * (448.0 / x.abs().amax().float())).to(e4),
                                              (x.t().contiguous() * 1.0).to(e4)), 10)
            rec["gb_per_s"] = {
                "amax": 2 * elems / rec["amax_s"] / 1e9,
                "cast_transpose": 4 * elems / rec["cast_transpose_s"] / 1e9,
                "cast_transpose_amax": 4 * elems / rec["cast_transpose_amax_s"] / 1e9,
                "current_scaling_total": 6 * elems / (rec["amax_s"] + rec["cast_transpose_s"]) / 1e9,
            }
        except Exception as exc:  # noqa: BLE001
            rec["error"] = repr(exc)[:400]
        log("casts %d x %d: %s" % (m, n, rec.get("gb_per_s", rec.get("error"))))
        out.append(rec)
        del x, y, yt
    return out


def measure(shapes_path: str, out_path: str, budget_s: float = 240.0, tiny: bool = False, parts=None) -> None:
    """Time everything the module docstring lists; write what finished to out_path after each part."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.time()
    result: dict = {"device": device, "torch": torch.__version__, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                                        time.gmtime())}

    def log(msg):
        print("[%6.1f s] %s" % (time.time() - started, msg), flush=True)

    def save():
        with open(out_path, "w") as f:
            json.dump(result, f, indent=0)

    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        result["gpu"] = {"name": props.name, "sms": props.multi_processor_count, "memory": props.total_memory}
        import subprocess

        try:
            result["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,power.limit,clocks.max.sm,clocks.max.mem,driver_version",
                 "--format=csv"], capture_output=True, text=True, timeout=20).stdout
        except Exception as exc:  # noqa: BLE001
            result["nvidia_smi"] = repr(exc)
    timer = _timer(torch, device)
    with open(shapes_path) as f:
        rows = json.load(f)
    if tiny:
        rows = [{"m": 64, "n": 48, "k": 32}, {"m": 32, "n": 32, "k": 32}]
    squares = [{"m": s, "n": s, "k": s} for s in (512, 1024, 2048, 4096, 8192, 16384)] if not tiny else []
    big = [{"m": 8192, "n": 8192, "k": 8192}, {"m": 2048, "n": 2048, "k": 13312}] if not tiny else []
    parts = parts or ("gemm", "attention", "elementwise", "overlap")
    log("parts: %s" % ", ".join(parts))
    if "gemm" in parts:
        result["gemm"] = _gemm_rows(torch, device, timer, big + squares + rows, started + 0.55 * budget_s, log)
    save()
    seqs = (512, 1024, 2048, 4096, 8192, 16384) if not tiny else (64,)
    total = 16384 if not tiny else 128
    jobs = {
        "attention": lambda: _attention_rows(torch, device, timer, started + 0.8 * budget_s, log, seqs, total),
        "elementwise": lambda: _elementwise_rows(torch, device, timer, *((256, 128, 256) if tiny else ())),
        "overlap": lambda: _overlap_rows(torch, log),
        "layers": lambda: _layer_rows(torch, log),
        "sustained": lambda: _sustained_rows(torch, log),
        "power": lambda: _power_rows(torch, log),
        "logits": lambda: _logit_rows(torch, timer, log),
        "fp8layers": lambda: _fp8_layer_rows(torch, log, started, 0.9 * budget_s),
        "casts": lambda: _cast_rows(torch, timer, log),
        "rowwise": lambda: _rowwise_rows(torch, timer, [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048),
                                                        (8192, 6144, 4096), (8192, 28672, 4096), (8192, 4096, 14336)]),
    }
    for part in parts:
        if part == "gemm" or (device != "cuda" and part in ("overlap", "layers", "sustained", "rowwise", "power", "logits", "casts")):
            continue
        log(part)
        try:
            result[part] = jobs[part]()
        except Exception as exc:  # noqa: BLE001
            result[part + "_error"] = repr(exc)[:300]
        save()
    result["wall_s"] = time.time() - started
    save()
    log("done")


def _classes(kernels: dict) -> dict:
    """CUDA kernel time by class (GEMM, attention, the rest) from a torch.profiler table of the raw file."""
    out = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for name, (seconds, _count) in kernels.items():
        low = name.lower()
        if any(t in low for t in ("fmha", "flash", "attn", "cudnn", "sdpa")):
            out["attention"] += seconds
        elif any(t in low for t in ("gemm", "nvjet", "sm90", "xmma", "cutlass")):
            out["gemm"] += seconds
        else:
            out["other"] += seconds
    return out


def _model_layer(shape, kernels="fused", layers=(8, 4), precision="mixed"):
    """distlab's compute per layer (matmul, attention core, element-wise seconds) of a LAYER_CASES shape on one H200
    (cuDNN attention): the difference of two layer counts, so the logits and loss drop out."""
    import dataclasses

    from distlab import hardware, training
    from distlab.models import TransformerModel
    from distlab.step import compute
    from distlab.step.config import step_config

    h, heads, kv, ffn, gated, norm, seq, mb = shape
    tp = 1 if heads * 128 == h else h // (heads * 128)  # a tensor-parallel shard: heads of 128
    node = dataclasses.replace(hardware.node("dgx-h100"), accelerator=hardware.accelerator("h200"))
    parts = []
    for count in layers:
        model = TransformerModel(name="layer", layers=count, hidden=h, heads=heads * tp, kv_heads=kv * tp, ffn=ffn * tp,
                                 vocab=32000, gated_mlp=gated, norm=norm, seq_len=seq, source="gpu_microbench",
                                 dropout=False, biases=False, position_embeddings=0)
        est = training.estimate(model, hardware.cluster(node, 1, "ib-ndr"), global_batch=mb * 8 // tp, seq_len=seq,
                                dp=8 // tp, tp=tp, micro_batch_size=mb, kernels=kernels, attention_kernel="cudnn",
                                memory_recipe="megatron", precision=precision,
                                **({"fp8_scaling": "current"} if precision == "fp8" else {}))
        model_, keywords = est.step_inputs
        c = step_config(model_, **keywords)
        parts.append([float(f(c)) for f in (compute.matmul_seconds, compute.attention_core_seconds,
                                             compute.elementwise_seconds)])
    return [(a - b) / (layers[0] - layers[1]) for a, b in zip(*parts)]


def compare(paths) -> None:
    """Print measured rates against distlab's model of them: each GEMM's share of peak against
    efficiency.gemm_efficiency (before the fitted TRAINING_MATMUL_SHARE), the attention rates, and the layer stacks'
    time per layer against the step model's compute per layer (distlab.step.compute)."""
    from distlab import efficiency, hardware

    acc = hardware.accelerator("h200")
    peak = acc.peak("bf16")
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        print("==", path, result.get("gpu"), result.get("torch"))
        if result.get("gemm"):
            print("%6s %6s %6s %8s %8s %8s %8s" % ("m", "n", "k", "bf16", "model", "fp8", "fp8fast"))
        for r in result.get("gemm", []):
            flops = 2.0 * r["m"] * r["n"] * r["k"]
            share = flops / r["bf16_s"] / peak
            model = efficiency.gemm_efficiency(acc, r["m"], r["n"], r["k"])
            fp8 = flops / r["fp8_s"] / (2 * peak) if "fp8_s" in r else float("nan")
            fast = flops / r["fp8_fast_s"] / (2 * peak) if "fp8_fast_s" in r else float("nan")
            print("%6d %6d %6d %8.3f %8.3f %8.3f %8.3f" % (r["m"], r["n"], r["k"], share, model, fp8, fast))
        for r in result.get("attention", []):
            if "fwd_s" not in r:
                print(r)
                continue
            fwd = r["fwd_flops"] / r["fwd_s"] / peak
            bwd = 2.5 * r["fwd_flops"] / (r["fwd_bwd_s"] - r["fwd_s"]) / peak
            print("%-16s s=%5d causal=%d fwd %.3f bwd %.3f of peak" % (r["backend"], r["seq"], r["causal"], fwd, bwd))
        for r in result.get("layers", []):
            got = _classes(r.get("kernels", {}))
            model = _model_layer(r["shape"])
            print("layer %-15s measured %6.3f ms (GEMM %6.3f, attention %5.3f, other %5.3f) | model %6.3f ms (GEMM %6.3f,"
                  " attention %5.3f, element-wise %5.3f) | measured / model %.3f" % (
                      r["case"], 1e3 * r["layer_s"], 1e3 * got["gemm"], 1e3 * got["attention"], 1e3 * got["other"],
                      1e3 * sum(model), 1e3 * model[0], 1e3 * model[1], 1e3 * model[2], r["layer_s"] / sum(model)))
            if "settled_layer_s" in r:
                print("      burst %.3f ms, settled under the power cap %.3f ms" % (1e3 * r["burst_layer_s"],
                                                                                 1e3 * r["settled_layer_s"]))
        for r in result.get("power", []):
            if "flops" in r:
                print("%-40s burst %5.0f settled %5.0f TFLOP/s" % (r["what"], r["flops"] / r["burst_s"] / 1e12,
                                                                   r["flops"] / r["settled_s"] / 1e12))
        for r in result.get("fp8layers", []):
            if "layer_s" not in r:
                print(r)
                continue
            got = _classes(r.get("kernels", {}))
            model = _model_layer(r["shape"], "compiled" if r["compiled"] else "eager",
                                 precision="fp8" if r["precision"] == "fp8" else "mixed")
            print("%-15s %-4s %-8s measured %6.2f ms (GEMM %5.2f, attention %5.2f, other %5.2f) | model %6.2f ms (%s)" % (
                r["case"], r["precision"], "compiled" if r["compiled"] else "eager", 1e3 * r["layer_s"],
                1e3 * got["gemm"], 1e3 * got["attention"], 1e3 * got["other"], 1e3 * sum(model),
                ", ".join("%.2f" % (1e3 * x) for x in model)))
        for r in result.get("casts", []):
            if "amax_s" in r:
                _print_cast(r, acc.memory_bandwidth)
        for key in ("elementwise", "overlap", "rowwise", "logits", "sustained"):
            for r in result.get(key, []):
                if key == "logits":
                    got = _classes(r.get("kernels", {}))
                    print("logits+loss %-15s %.2f ms (GEMM %.2f, other %.2f)" % (
                        r["case"], 1e3 * r["fwd_bwd_s"], 1e3 * got["gemm"], 1e3 * (got["other"] + got["attention"])))
                else:
                    print(key, r)


def _print_cast(r, hbm) -> None:
    """One cast row: measured time against the step model's price, MEMORY_TRAFFIC x FP8_CAST_BYTES / HBM bandwidth."""
    from distlab.efficiency import MEMORY_TRAFFIC
    from distlab.elementwise import FP8_CAST_BYTES

    elements = r["m"] * r["n"]
    price = {k: MEMORY_TRAFFIC * FP8_CAST_BYTES[k] * elements / hbm for k in ("current", "delayed")}
    current, delayed = r["amax_s"] + r["cast_transpose_s"], r["cast_transpose_amax_s"]
    print("cast %5d x %5d: current %6.1f us (model %6.1f, x %.2f), delayed %6.1f us (model %6.1f, x %.2f), eager %6.1f us"
          % (r["m"], r["n"], 1e6 * current, 1e6 * price["current"], current / price["current"], 1e6 * delayed,
             1e6 * price["delayed"], delayed / price["delayed"], 1e6 * r["eager_s"]))


if __name__ == "__main__":
    verb = sys.argv[1] if len(sys.argv) > 1 else "--help"
    if verb == "shapes":
        shapes(sys.argv[2])
    elif verb == "measure":
        named = [a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--parts=")]
        measure(sys.argv[2], sys.argv[3], tiny="--tiny" in sys.argv, parts=named[0] if named else None)
    elif verb == "compare":
        compare(sys.argv[2:])
    else:
        print(__doc__)
