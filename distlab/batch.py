"""Batch size in the large: the linear learning-rate scaling rule, warm-up, layer-wise trust ratios (LARS, LAMB)
and the critical batch size (Lesson 11b §3).

More data parallelism means a larger global batch (or smaller microbatches). Two results say how far that helps:

- Goyal et al. 2017, "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour", Sec. 2.1: "when the
  minibatch size is multiplied by k, multiply the learning rate by k" (with a gradual warm-up, Sec. 2.2);
  it held for ResNet-50 on ImageNet up to 8,192 images and broke down beyond (their Fig. 1).
- Goyal et al. 2017, Sec. 2.2, gradual warm-up: start from the small batch's rate and raise it by a constant
  amount every iteration until it reaches k times that rate after 5 epochs; then follow the usual schedule.
- You, Gitman and Ginsburg 2017, "Large Batch Training of Convolutional Networks" (LARS), Algorithm 1: each
  layer l gets its own local rate lambda_l = eta x ||w_l|| / (||grad L(w_l)|| + beta ||w_l||), eta the trust
  coefficient (0.001 in the paper), beta the weight decay; it trained AlexNet at batch 8K and ResNet-50 at 32K.
- You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes" (LAMB),
  Algorithm 2: the same layer-wise idea on Adam's update r = m / (sqrt(v) + eps): the layer moves by
  eta x phi(||x_l||) / ||r_l + lambda x_l|| x (r_l + lambda x_l), phi the identity in their experiments.
- McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", Sec. 2-3: with B_noise the gradient
  noise scale, the optimal step size at batch B is eps_max / (1 + B_noise / B) (Eq. 2.7), and reaching a given
  loss takes S = S_min (1 + B_noise / B) steps and E = E_min (1 + B / B_noise) examples (Eq. 2.11,
  (S/S_min - 1)(E/E_min - 1) = 1). The critical batch B_crit = E_min / S_min ~ B_noise: below it more
  batch buys almost proportionally fewer steps (perfect scaling); above it steps stop falling and
  examples (compute) grow.
- Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Eq. 5.2-5.3: for language models
  B_crit(L) ~ B_* / L^(1/alpha_B) with B_* ~ 2e8 tokens and alpha_B ~ 0.21, L the loss in nats.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._arguments import finite_result
from .errors import ConfigurationError
from .units import non_negative, positive

__all__ = [
    "KAPLAN_B_STAR_TOKENS",
    "KAPLAN_ALPHA_B",
    "scaled_learning_rate",
    "warmup_learning_rate",
    "lars_trust_ratio",
    "lamb_trust_ratio",
    "optimal_learning_rate",
    "steps_and_examples",
    "critical_batch_tokens",
    "BatchScaling",
    "batch_scaling",
]

#: Kaplan et al. 2020, Eq. 5.3 (fit to their Fig. 10): B_* ~ 2e8 tokens, alpha_B ~ 0.21.
KAPLAN_B_STAR_TOKENS = 2e8
KAPLAN_ALPHA_B = 0.21


def scaled_learning_rate(base_lr, base_batch, batch) -> float:
    """Goyal et al. 2017's linear scaling rule: lr = base_lr x batch / base_batch. Lesson 11b §3.

    Their reference: 0.1 for 256 images, so 3.2 for 8,192.

    >>> scaled_learning_rate(0.1, 256, 8192)
    3.2
    """
    lr = positive(base_lr, "", "base_lr")
    return finite_result(
        "scaled_learning_rate", lr * positive(batch, "", "batch") / positive(base_batch, "", "base_batch")
    )


def warmup_learning_rate(step, warmup_steps, peak_lr, start_lr=0.0) -> float:
    """Goyal et al. 2017's gradual warm-up (Sec. 2.2): the rate rises linearly from start_lr at step 0 to peak_lr at
    step warmup_steps, and stays at peak_lr after (the decay that follows is the ordinary schedule's). Goyal et al.
    start at the small batch's rate (0.1) and reach k x 0.1 after 5 epochs. Lesson 11b §3.

    Half way through their warm-up to 3.2 (batch 8,192, k = 32): 0.1 + (3.2 - 0.1) / 2.

    >>> round(warmup_learning_rate(2500, 5000, 3.2, start_lr=0.1), 12)
    1.65
    """
    t = non_negative(step, "", "step")
    warm = positive(warmup_steps, "", "warmup_steps")
    peak = positive(peak_lr, "", "peak_lr")
    start = non_negative(start_lr, "", "start_lr")
    if start > peak:
        raise ConfigurationError(
            f"start_lr={start:g} is above peak_lr={peak:g}: warm-up raises the rate; valid: 0 <= start_lr <= peak_lr"
        )
    return peak if t >= warm else finite_result("warm-up learning rate", start + (peak - start) * t / warm)


def _norms(weight_norm, other_norm, other: str) -> tuple[float, float]:
    return non_negative(weight_norm, "", "weight_norm"), non_negative(other_norm, "", other)


def lars_trust_ratio(weight_norm, grad_norm, trust_coefficient=0.001, weight_decay=0.0) -> float:
    """LARS's local learning-rate multiplier of one layer (You, Gitman and Ginsburg 2017, Algorithm 1):
    lambda = eta x ||w|| / (||g|| + beta x ||w||), eta the trust coefficient, beta the weight decay; the layer's
    step is the global rate x lambda x (g + beta w). A layer whose gradient is small against its weights gets a
    larger step, one whose gradient is large a smaller one. With a zero norm there is no ratio: 1 is returned (what
    implementations commonly do, e.g. for zero-initialised biases). Lesson 11b §3.

    A layer with ||w|| = 1 and ||g|| = 0.01 at eta = 0.001: 0.001 x 1 / 0.01 = 0.1.

    >>> lars_trust_ratio(1.0, 0.01)
    0.1
    """
    w, g = _norms(weight_norm, grad_norm, "grad_norm")
    eta = positive(trust_coefficient, "", "trust_coefficient")
    beta = non_negative(weight_decay, "", "weight_decay")
    if w == 0.0 or g + beta * w == 0.0:
        return 1.0
    return finite_result("LARS trust ratio", eta * w / (g + beta * w))


def lamb_trust_ratio(weight_norm, update_norm) -> float:
    """LAMB's layer-wise trust ratio (You et al. 2019, Algorithm 2, phi the identity): ||x|| / ||r + lambda x||,
    where r + lambda x is the layer's Adam update with weight decay (update_norm is its norm); the layer moves by
    the global rate x this ratio x (r + lambda x), so every layer's step is the same fraction of its weights.
    A zero norm returns 1, as implementations commonly do. Lesson 11b §3.

    A layer with ||x|| = 2 whose Adam update has norm 50: 2 / 50.

    >>> lamb_trust_ratio(2.0, 50.0)
    0.04
    """
    x, r = _norms(weight_norm, update_norm, "update_norm")
    if x == 0.0 or r == 0.0:
        return 1.0
    return finite_result("LAMB trust ratio", x / r)


def optimal_learning_rate(batch, noise_scale, max_lr) -> float:
    """McCandlish et al. 2018, Eq. 2.7: eps_opt(B) = eps_max / (1 + B_noise / B). Lesson 11b §3.

    Linear in B while B << B_noise (the scaling rule), flat at eps_max once B >> B_noise.

    >>> optimal_learning_rate(1000, 1000, 1.0)  # at B = B_noise: half the largest useful step
    0.5
    """
    b = positive(batch, "", "batch")
    noise = positive(noise_scale, "", "noise_scale")
    return finite_result("optimal_learning_rate", positive(max_lr, "", "max_lr") / (1.0 + noise / b))


def steps_and_examples(batch, critical_batch, min_steps) -> tuple[float, float]:
    """(steps, examples) to reach a fixed loss at batch B (McCandlish et al. 2018, Eq. 2.11, with
    B_noise = B_crit = E_min / S_min): S = S_min (1 + B_crit / B), E = S x B = E_min (1 + B / B_crit).
    Lesson 11b §3.

    At B = B_crit: twice the fewest steps and twice the fewest examples.

    >>> steps_and_examples(4e6, 4e6, 10_000)
    (20000.0, 80000000000.0)
    """
    b = positive(batch, "", "batch")
    crit = positive(critical_batch, "", "critical_batch")
    s_min = positive(min_steps, "", "min_steps")
    steps = s_min * (1.0 + crit / b)
    return finite_result("steps_and_examples", (steps, steps * b))


def critical_batch_tokens(loss) -> float:
    """Kaplan et al. 2020, Eq. 5.3: B_crit(L) ~ B_* / L^(1/alpha_B), in tokens, L the loss in nats (> 0).
    Lesson 11b §3.

    >>> round(critical_batch_tokens(2.0) / 1e6, 2)  # 2e8 / 2^(1/0.21) = 2e8 / 27.1: 7.4 million tokens
    7.37
    """
    loss_nats = positive(loss, "", "loss")
    if not 0.01 <= loss_nats <= 20:
        raise ConfigurationError(
            f"loss={loss_nats!r} nats: the fit covers language-model losses; valid: 0.01 <= loss <= 20"
        )
    return KAPLAN_B_STAR_TOKENS / loss_nats ** (1.0 / KAPLAN_ALPHA_B)


@dataclass(frozen=True)
class BatchScaling:
    """What growing the global batch by data parallelism buys (McCandlish et al. 2018). Lesson 11b §3.

    ``speedup`` = S(base) / S(batch): fewer steps; ``compute_cost`` = E(batch) / E(base): more examples;
    ``efficiency`` = speedup / (batch / base_batch): 1 is perfect (linear) scaling."""

    base_batch: float
    batch: float
    critical_batch: float
    speedup: float
    compute_cost: float

    @property
    def efficiency(self) -> float:
        return self.speedup / (self.batch / self.base_batch)

    def summary(self) -> str:
        return (
            f"batch {self.base_batch:.3g} -> {self.batch:.3g} (critical {self.critical_batch:.3g}): "
            f"{self.speedup:.3g}x fewer steps for {self.compute_cost:.3g}x the examples "
            f"({100 * self.efficiency:.1f}% of linear scaling)"
        )


def batch_scaling(base_batch, batch, critical_batch) -> BatchScaling:
    """Steps saved and compute spent going from base_batch to batch (McCandlish et al. 2018, Eq. 2.11). The
    limit of "more DP": past the critical batch each doubling saves ever fewer steps. Lesson 11b §3.

    >>> batch_scaling(1e6, 4e6, 4e6).speedup  # (1 + 4) / (1 + 1)
    2.5
    """
    b0 = positive(base_batch, "", "base_batch")
    b1 = positive(batch, "", "batch")
    crit = positive(critical_batch, "", "critical_batch")
    s0, e0 = steps_and_examples(b0, crit, 1.0)
    s1, e1 = steps_and_examples(b1, crit, 1.0)
    finite_result("batch / base_batch", b1 / b0)
    return BatchScaling(b0, b1, crit, *finite_result("batch_scaling", (s0 / s1, e1 / e0)))
