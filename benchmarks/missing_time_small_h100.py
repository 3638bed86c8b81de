"""Issue 30: the time the step model leaves out of the small H100 runs, per step, per microbatch and per layer, and the
host (CPU) time per kernel that would be needed for kernel dispatch to set the pace (RESULTS.md, 2026-11-29 session
14). Prints the table; changes nothing.

    python benchmarks/missing_time_small_h100.py

missing = measured step - predicted step. The model's compute per microbatch t_mb = matmul + attention core +
element-wise (distlab.step.compute); "layer" = t_mb / layers of the busiest stage (the logits and loss spread over
them). Host dispatch can only lengthen a step where the CPU takes longer to issue a layer's kernels than the GPU takes
to run them (the CPU otherwise runs ahead on the stream), so the last column is the CPU time per kernel at which
dispatch would explain the whole gap: (t_mb + missing per microbatch) / layers / kernels per layer.

KERNELS: kernels per layer and microbatch, forward + backward, ESTIMATED from the modules each engine runs (not traced):
Megatron-Core r0.8 / NeMo with Transformer Engine (TELayerNormColumnParallelLinear x 2, TERowParallelLinear x 2,
TEDotProductAttention, two bias-dropout-adds: ~11 forward, ~22 backward; TP with sequence parallelism and
--tp-comm-overlap adds the userbuffers' gathers / reduce-scatters and copies, ~12 more); llm-foundry MPT on Composer
FSDP1 with flash_attn_fn (its unpad / pad index and gather kernels, FSDP's all-gather, cast and divide);
torchtitan FSDP2 (eager: each norm, rotary and SwiGLU op; compile: Inductor's fused kernels).
"""

from __future__ import annotations

from distlab import validation
from distlab.step import compute
from distlab.step.config import step_config

RUNS = (
    "megatron-core-r0.8-h100-1.7b",
    "megatron-core-r0.8-h100-7.1b",
    "megatron-core-r0.8-h100-16b",
    "megatron-core-r0.8-h100-32b",
    "mpt-7b-h100_80gb-512gpu-seq2048-noac",
    "mpt-7b-h100_80gb-128gpu-seq2048-noac",
    "mpt-7b-h100_80gb-8gpu-seq8192-ac",
    "torchtitan-h100-8gpu-llama31-8b-compile",
    "torchtitan-h100-128gpu-llama31-8b-compile",
    "torchtitan-h100-8gpu-llama31-8b-eager",
    "dgxc-h100-llama31-8b-8gpu-bf16",
    "mpt-13b-h100_80gb-512gpu-seq2048-ac",
    "mpt-7b-a100_80gb-8gpu-seq8192-ac",
)
# estimated kernels per layer and microbatch, forward + backward (see the docstring); recomputation adds the forward's
KERNELS = {
    "megatron-core-r0.8-h100-1.7b": 33,
    "megatron-core-r0.8-h100-7.1b": 45,
    "megatron-core-r0.8-h100-16b": 45,
    "megatron-core-r0.8-h100-32b": 45,
    "mpt-7b-h100_80gb-512gpu-seq2048-noac": 50,
    "mpt-7b-h100_80gb-128gpu-seq2048-noac": 50,
    "mpt-7b-h100_80gb-8gpu-seq8192-ac": 60,
    "torchtitan-h100-8gpu-llama31-8b-compile": 40,
    "torchtitan-h100-128gpu-llama31-8b-compile": 40,
    "torchtitan-h100-8gpu-llama31-8b-eager": 70,
    "dgxc-h100-llama31-8b-8gpu-bf16": 33,
    "mpt-13b-h100_80gb-512gpu-seq2048-ac": 60,
    "mpt-7b-a100_80gb-8gpu-seq8192-ac": 60,
}


def row(run_id: str) -> dict:
    """The run's measured and predicted step, the model's compute per microbatch by part and the missing time."""
    run = validation.run(run_id)
    est = validation.predict(run)
    model, keywords = est.step_inputs
    c = step_config(model, **keywords)
    parts = [float(f(c)) for f in (compute.matmul_seconds, compute.attention_core_seconds, compute.elementwise_seconds)]
    t_mb, m, layers = sum(parts), int(c.m), int(c.layers_stage)
    measured, predicted = float(validation.measured_step_time(run)), float(est.step_time_s)
    missing = measured - predicted
    kernels = KERNELS[run_id]
    return dict(
        id=run_id,
        measured=measured,
        predicted=predicted,
        error=100.0 * (predicted / measured - 1.0),
        missing_ms=1e3 * missing,
        m=m,
        layers=layers,
        tokens_mb=int(c.tokens_mb),
        matmul_ms=1e3 * parts[0],
        core_ms=1e3 * parts[1],
        elementwise_ms=1e3 * parts[2],
        layer_ms=1e3 * t_mb / layers,
        missing_mb_ms=1e3 * missing / m,
        missing_layer_ms=1e3 * missing / (m * layers),
        implied_over_model=(measured - (predicted - m * t_mb)) / (m * t_mb),
        kernels=kernels,
        cpu_per_kernel_us=1e6 * (t_mb + missing / m) / layers / kernels,
    )


def main() -> None:
    head = (
        f"{'run':44s} {'meas s':>7s} {'pred s':>7s} {'err %':>6s} {'miss ms':>8s} {'m':>2s} {'L':>3s} {'tok/mb':>6s}"
        f" {'mm ms':>7s} {'core':>6s} {'elem':>6s} {'GPU/L':>7s} {'miss/mb':>8s} {'miss/L':>7s} {'impl/mod':>8s}"
        f" {'k/L':>4s} {'CPU us/k':>8s}"
    )
    print(head)
    for run_id in RUNS:
        r = row(run_id)
        print(
            f"{r['id']:44s} {r['measured']:7.3f} {r['predicted']:7.3f} {r['error']:+6.1f} {r['missing_ms']:8.1f}"
            f" {r['m']:2d} {r['layers']:3d} {r['tokens_mb']:6d} {r['matmul_ms']:7.1f} {r['core_ms']:6.1f}"
            f" {r['elementwise_ms']:6.1f} {r['layer_ms']:7.2f} {r['missing_mb_ms']:8.2f} {r['missing_layer_ms']:7.3f}"
            f" {r['implied_over_model']:8.3f} {r['kernels']:4d} {r['cpu_per_kernel_us']:8.0f}"
        )


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
