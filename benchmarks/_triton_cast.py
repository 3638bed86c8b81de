"""A fused FP8 cast-transpose kernel in Triton (only imported on a GPU machine by gpu_microbench.py's 'casts' part):
one read of a bf16 tile, its scaled e4m3 copy written in both layouts, optionally its amax folded in (delayed
scaling's single pass). What Transformer Engine's cast-transpose kernels do, written here to time a fused cast."""

import triton
import triton.language as tl


@triton.jit
def cast_transpose_kernel(x_ptr, out_ptr, outt_ptr, scale_ptr, amax_ptr, M, N,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, AMAX: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0).to(tl.float32)
    s = tl.load(scale_ptr)
    y = (x * s).to(tl.float8e4nv)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], y, mask=mask)
    tl.store(outt_ptr + rn[:, None] * M + rm[None, :], tl.trans(y), mask=tl.trans(mask))
    if AMAX:
        tl.atomic_max(amax_ptr, tl.max(tl.abs(x)))
