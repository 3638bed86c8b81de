"""Element-wise HBM traffic: the bytes the memory-bound kernels between the matmuls move (norms, activations,
residual adds, RoPE, softmax without flash attention, the cross-entropy loss, FP8 casts), counted kernel by kernel;
the step model prices them at MEMORY_TRAFFIC (distlab.efficiency) x these bytes / HBM bandwidth. Lesson 7 §8.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigurationError

__all__ = [
    "ATTENTION_KERNELS",
    "ELEMENTWISE_KERNELS",
    "FP8_SCALING",
    "FP8_CAST_BYTES",
    "FP8_GEMM_RATE",
    "fp8_scaling",
    "fp8_cast_bytes_array",
    "elementwise_bytes_per_token",
    "elementwise_bytes_array",
    "core_attention_bytes_array",
    "loss_bytes_per_token",
]

#: The attention implementations estimate() knows: 'flash' (FlashAttention, cuDNN/TE fused attention,
#: PyTorch SDPA: scores never stored) and 'unfused' (Megatron-LM 2021-2022: scores stored, softmax in HBM).
ATTENTION_KERNELS = ("flash", "unfused")
#: How the element-wise work between the matmuls runs (elementwise_bytes_per_token counts each one's HBM bytes):
#: 'fused' (Megatron-LM's fused kernels: LayerNorm/RMSNorm, bias-GeLU, SwiGLU, bias-dropout-add, scale-mask-softmax,
#: RoPE), 'compiled' (torch.compile's Inductor: one generated kernel per element-wise chain, counted as fused) and
#: 'eager' (PyTorch eager mode: one kernel per operator, so composite operators such as an RMSNorm computed in fp32,
#: a complex-number RoPE and SwiGLU's separate SiLU and product each read and write their tensors).
ELEMENTWISE_KERNELS = ("fused", "compiled", "eager")


def attention_name(attention) -> str:
    key = str(attention).strip().lower()
    if key not in ATTENTION_KERNELS:
        raise ConfigurationError(f"attention={attention!r}; valid: {', '.join(ATTENTION_KERNELS)}")
    return key


def kernels_name(kernels) -> str:
    key = str(kernels).strip().lower()
    if key not in ELEMENTWISE_KERNELS:
        raise ConfigurationError(f"kernels={kernels!r}; valid: {', '.join(ELEMENTWISE_KERNELS)}")
    return key


def _rotary(model) -> bool:
    """Whether the model's positions are rotary (RoPE): a recorded rotary base, or no position table with
    RMSNorm (the Llama family; the catalog's ALiBi models, BLOOM and MPT, use LayerNorm)."""
    if getattr(model, "rope_theta", None) is not None:
        return True
    return int(getattr(model, "position_embeddings", 0)) == 0 and getattr(model, "norm", "") == "rmsnorm"


def elementwise_bytes_per_token(
    model, seq_len, tp=1, sequence_parallel=False, attention="flash", kernels="fused", element_bytes=2.0
):
    """HBM bytes the memory-bound element-wise kernels of ONE layer's forward pass move per token, on one GPU,
    counted kernel by kernel (what each reads and writes; e = element_bytes, fp32 = 4 B). Lesson 7 §8.

    Per token; h-wide tensors divide by tp under sequence parallelism, the others (q = heads x d_head,
    kv = kv_heads x d_head, f = ffn, the a x s scores) always by tp:

        kernel                       fused / compiled            eager (one kernel per PyTorch operator)
        norm, x2                     read e h, write e h         LayerNorm the same (one native kernel);
                                                                 RMSNorm in fp32 (Meta's reference, torchtitan,
                                                                 torch.rms_norm): to-fp32 e+4, x^2 8, mean 4,
                                                                 x*rsqrt 8, to-bf16 4+e, *weight 2e: (28 + 4e) h
        residual add, x2             read 2e h, write e h; dropout's 1-byte mask h more (fused bias-dropout-add;
                                     eager's separate dropout kernel: 2e h + h)
        MLP activation               GeLU 2e f; SwiGLU 3e f      SwiGLU: SiLU 2e f + product 3e f = 5e f
        RoPE (rotary models)         2e (q + kv)                 complex fp32 product: (16 + 2e)(q + kv)
        GQA K/V repeat (kv < q)      none (read in place)        repeat_kv materialises K and V: 2e (kv + q)
        unfused attention            softmax 2e a s, dropout (2e + 1) a s, context permute 2e q; flash: none

    The backward moves about twice the forward's bytes (each kernel reads its output gradient and saved input,
    writes its input gradient): the step model prices 3 passes, 4 with full recomputation, at MEMORY_TRAFFIC x
    these bytes / HBM bandwidth; the unfused attention's part (core_attention_bytes_array) also 4 with selective
    recomputation, which runs the core again. 'compiled' (torch.compile) is counted as 'fused'.

    Llama 3.1 8B (h 4096, q 4096, kv 1024, f 14,336), bf16, flash, tp 1: fused 2 x 4e h + 2 x 3e h + 3e f +
    2e (q + kv) = 81,920 + 86,016 + 20,480 = 188,416 B; eager 2 x 36 h + 2 x 3e h + 5e f + 20 (q + kv) +
    2e (kv + q) = 344,064 + 143,360 + 102,400 + 20,480 = 610,304 B, 3.2x the fused count.

    >>> int(elementwise_bytes_per_token('llama3.1-8b', 8192)), int(elementwise_bytes_per_token('llama3.1-8b', 8192,
    ...     kernels='eager'))
    (188416, 610304)
    """
    from .models import model as catalog_model

    if isinstance(model, str):
        model = catalog_model(model)
    kind = kernels_name(kernels)
    flash = attention_name(attention) == "flash" if isinstance(attention, str) else attention
    return elementwise_bytes_array(
        model, seq_len, tp, sequence_parallel, flash, ELEMENTWISE_KERNELS.index(kind), element_bytes
    )


def elementwise_bytes_array(model, seq_len, tp, sequence_parallel, flash, kernels_code, element_bytes):
    """elementwise_bytes_per_token on NumPy arrays (broadcast; sequence_parallel and flash as 0/1 or booleans): the
    step model's and the planner's path. kernels_code indexes ELEMENTWISE_KERNELS. Lesson 7 §8.

    >>> from distlab import models
    >>> float(elementwise_bytes_array(models.model('llama3.1-8b'), 8192, 1, False, True, 2, 2.0))
    610304.0
    """
    from ._arguments import code_array, finite_result, number_array
    from .units import positive

    if not all(hasattr(model, a) for a in ("hidden", "heads", "ffn", "kv_heads", "dropout", "gated_mlp")):
        raise ConfigurationError(f"model={model!r} must be a TransformerModel (see distlab.models.model)")
    seq_len = number_array(seq_len, "seq_len", 1.0)
    tp = number_array(tp, "tp", 1.0)
    sequence_parallel = number_array(sequence_parallel, "sequence_parallel")
    flash = number_array(flash, "flash")
    kernels_code = code_array(kernels_code, "kernels_code", ELEMENTWISE_KERNELS)
    e = float(positive(element_bytes, "B", "element_bytes"))
    h, a, f = float(model.hidden), float(model.heads), float(model.ffn)
    d = float(getattr(model, "head_dim", model.hidden // model.heads))
    q, kv = a * d, float(model.kv_heads) * d
    mask = 1.0 if model.dropout else 0.0
    eager = np.asarray(kernels_code) == 2
    tp = np.asarray(tp, dtype=float)
    sp_div = np.where(np.asarray(sequence_parallel, dtype=bool), tp, 1.0)
    rms = getattr(model, "norm", "layernorm") == "rmsnorm"
    norm = np.where(eager & rms, (28.0 + 4.0 * e) * h, 2.0 * e * h)
    residual = 3.0 * e * h + mask * h + np.where(eager, mask * 2.0 * e * h, 0.0)
    replicated = 2.0 * norm + 2.0 * residual
    if model.gated_mlp:
        activation = np.where(eager, 5.0 * e * f, 3.0 * e * f)
    else:
        activation = np.full(np.shape(eager), 2.0 * e * f)
    rope = np.where(eager, 16.0 + 2.0 * e, 2.0 * e) * (q + kv) if _rotary(model) else 0.0
    repeat = np.where(eager, 2.0 * e * (kv + q), 0.0) if kv < q else 0.0
    split = activation + rope + repeat
    core = core_attention_bytes_array(model, seq_len, tp, flash, e)
    return finite_result("element-wise bytes", replicated / sp_div + split / tp + core)


def core_attention_bytes_array(model, seq_len, tp, flash, element_bytes):
    """HBM bytes per token of ONE layer's forward, on one GPU, that the unfused attention core's element-wise kernels
    move (NumPy broadcast; 0 with flash attention, whose kernel keeps the scores on chip): the scale-mask-softmax
    (read and write e per score), the attention dropout ((2e + 1) per score with its 1-byte mask) over the a x s
    scores, and the context layer's permute to [s, b, h] (2e q), split over tp. Part of elementwise_bytes_array's
    count; selective recomputation runs these kernels again in the backward with the QK^T and AV it recomputes
    (Megatron-LM's CoreAttention, checkpointed whole under --recompute-granularity selective: NVIDIA/Megatron-LM
    @877f6a1bd5 megatron/model/transformer.py, CoreAttention.forward and _checkpointed_attention_forward). Lesson 7 §8.

    GPT 22B (Korthikanti 2022: h 6144, a 64, dropout), s 2048, tp 8, bf16: (64 x 2048 x (4 + 5) + 4 x 6144) / 8
    = (1,179,648 + 24,576) / 8 = 150,528 B.

    >>> from distlab import models
    >>> m = models.model('gpt3-175b')  # a 96, d 128, dropout: (96 x 2048 x 9 + 4 x 12,288) / 8
    >>> float(core_attention_bytes_array(m, 2048, 8, False, 2.0)), float(core_attention_bytes_array(m, 2048, 8, True, 2.0))
    (227328.0, 0.0)
    """
    from ._arguments import finite_result, number_array
    from .units import positive

    e = float(positive(element_bytes, "B", "element_bytes"))
    a = float(model.heads)
    q = a * float(getattr(model, "head_dim", model.hidden // model.heads))
    mask = 1.0 if model.dropout else 0.0
    seq_len = np.asarray(number_array(seq_len, "seq_len", 1.0), dtype=float)
    tp = np.asarray(number_array(tp, "tp", 1.0), dtype=float)
    scores = a * seq_len * (2.0 * e + (2.0 * e + 1.0) * mask) + 2.0 * e * q
    core = np.where(np.asarray(number_array(flash, "flash"), dtype=bool), 0.0, scores) / tp
    return finite_result("element-wise bytes", core)


def loss_bytes_per_token(vocab, element_bytes=2.0) -> float:
    """HBM bytes the cross-entropy loss moves per token over a vocabulary of V logits (of element_bytes each), forward
    and backward together, counted kernel by kernel as Megatron-LM's vocab-parallel cross-entropy runs it on fp32
    logits (PyTorch's F.cross_entropy on upcast logits moves about as much). Lesson 7 §8.

        forward:  upcast (e + 4) V, max 4V, subtract 8V, exp 8V, sum 4V, normalise 8V      = (36 + e) V
        backward: scale the saved softmax by the loss gradient 8V, cast back (4 + e) V      = (12 + e) V

    Divided by tp (the vocabulary is split over the tensor-parallel GPUs); the step model charges it to the stage
    holding the logits, at MEMORY_TRAFFIC x these bytes / HBM bandwidth. Llama 3 8B, bf16: 52 x 128,256.

    >>> loss_bytes_per_token(128256)
    6669312.0
    """
    from ._arguments import finite_result
    from .units import positive

    e, v = positive(element_bytes, "B", "element_bytes"), positive(vocab, "", "vocab")
    return float(finite_result("loss bytes", (48.0 + 2.0 * e) * v))


#: How FP8 training scales each tensor before the cast (the named choice of estimate(fp8_scaling=...)): 'delayed'
#: (Transformer Engine's DelayedScaling: the scale from an amax history of earlier steps; what NVIDIA's NeMo/Megatron
#: recipes run on H100, fp8_amax_history_len 1024 in dgxc-benchmarking's configs), 'current' (tensorwise current
#: scaling: this tensor's own amax), 'blockwise' (one scale per 1 x 128 / 128 x 128 tile, as DeepSeek-V3) and 'mxfp8'
#: (Blackwell's block-scaled FP8, the OCP MX format: one E8M0 scale per 32 elements; Transformer Engine's MXFP8 recipe,
#: Megatron Bridge's 'fp8_mx').
FP8_SCALING = ("delayed", "current", "blockwise", "mxfp8")
#: HBM bytes per element of each FP8 GEMM operand the cast kernel moves (an assumption from what each kernel must read
#: and write, not a measurement): read the 16-bit tensor (2 B), write it in FP8 (1 B) and write its transpose (1 B:
#: Hopper's FP8 GEMMs take one operand layout, so the backward's GEMMs need the transposed copy; TE's cast-transpose),
#: the amax reduced in the same kernel: 4 B with delayed scaling. Current scaling needs this tensor's amax before the
#: cast: one more 2 B read, 6 B. Blockwise: the tile amax inside the cast kernel, plus one fp32 scale per 128
#: elements for each of the two copies: 4 + 8/128 B. Checked (not fitted) against a fused cast-transpose measured on
#: one H200 (published_runs.json microbenchmark distlab-h200-fp8-fused-cast-transpose): at 33-117 M elements it takes
#: 0.97-1.12 x MEMORY_TRAFFIC x these bytes / HBM bandwidth; below ~10 M elements it is launch-bound (2.5-3 x). MXFP8:
#: the 16-bit tensor read once (2 B), its row-wise and column-wise copies written (2 x 1 B: one cannot be derived from the
#: other, Transformer Engine's mxfp8.rst), each with one 1 B scale per 32 elements: 4 + 2/32 B.
FP8_CAST_BYTES = {"delayed": 4.0, "current": 6.0, "blockwise": 4.0 + 8.0 / 128.0, "mxfp8": 4.0 + 2.0 / 32.0}
#: Each recipe's FP8 GEMM rate over per-tensor FP8's at the same shapes (the catalog's FP8 GEMM figures are per-tensor
#: scaled: Bekman's MAMF rows run torch._scaled_mm with one scale per tensor). MXFP8: the 12 GEMMs of a layer (fprop,
#: dgrad, wgrad of QKV, attention output, MLP up and down; hidden 4,096, MLP 16,384, 15,872 tokens), operands quantized
#: before timing, 6.812 ms with per-tensor current scaling against 7.161 ms with MXFP8 on a B300: 0.951 (NVIDIA
#: Transformer Engine, docs/examples/gemm_profiling/gemm_profiling.rst, "Autocast vs Pre-quantized", Per-layer total;
#: published_runs.json microbenchmark "te-gemm-profiling-b300-mxfp8-vs-fp8cs"), taken on every Blackwell part (an
#: assumption: one GPU, one model's shapes). Delayed, current and blockwise: 1 (no published same-shape comparison is
#: recorded; TE's H200 run prices blockwise's GEMMs only with its casts). Lesson 7 §8.
FP8_GEMM_RATE = {"delayed": 1.0, "current": 1.0, "blockwise": 1.0, "mxfp8": 6.812 / 7.161}


def fp8_scaling(name) -> str:
    """The FP8 scaling recipe's name, checked against FP8_SCALING (our error naming the valid ones)."""
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in FP8_SCALING:
        raise ConfigurationError(f"fp8_scaling={name!r}; valid: {', '.join(FP8_SCALING)}")
    return key


def fp8_cast_bytes_array(model, tp, sequence_parallel, cast_bytes):
    """(forward, backward) HBM bytes per token of one layer's FP8 casts on one GPU (NumPy broadcast): cast_bytes
    (FP8_CAST_BYTES) x the elements cast. Forward: each weight GEMM's activation input, h (QKV), q (attention
    output), h (MLP up), f (MLP down); backward: each GEMM's output gradient, q + 2 kv, h, g f, h (g = 2 gated). The
    h-wide tensors split over tp under sequence parallelism, the others always. The weights' casts, once per step
    (or none with FP8 parameters), are left out. Lesson 7 §8.

    Llama 3.1 8B (h 4096, q 4096, kv 1024, f 14,336, gated), tp 1, delayed (4 B): forward (2 x 4096 + 4096 + 14,336)
    x 4 = 106,496 B; backward (6144 + 4096 + 28,672 + 4096) x 4 = 172,032 B.

    >>> from distlab import models
    >>> [float(x) for x in fp8_cast_bytes_array(models.model('llama3.1-8b'), 1, False, 4.0)]
    [106496.0, 172032.0]
    """
    from ._arguments import number_array

    h, f = float(model.hidden), float(model.ffn)
    d = float(getattr(model, "head_dim", model.hidden // model.heads))
    q, kv = float(model.heads) * d, float(model.kv_heads) * d
    g = 2.0 if model.gated_mlp else 1.0
    tp = np.asarray(number_array(tp, "tp", 1.0), dtype=float)
    sp = np.where(np.asarray(sequence_parallel, dtype=bool), tp, 1.0)
    forward = (2.0 * h) / sp + (q + f) / tp
    backward = (2.0 * h) / sp + (q + 2.0 * kv + g * f) / tp
    return cast_bytes * forward, cast_bytes * backward
