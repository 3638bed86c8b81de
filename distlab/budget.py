"""Time and cost to train: days, GPU-hours and dollars of a whole training run (Lesson 12 §2).

A run of D tokens at a throughput of X tokens/s lasts D / X seconds; on n GPUs it uses n x D / X GPU-seconds,
and it costs GPU-hours x the price of one GPU-hour. The rule of thumb behind a first estimate: a dense
transformer of N parameters spends 6 x N x D FLOPs (Kaplan et al. 2020, Sec. 2.1; distlab.training.model_flops),
so the time is 6 N D / (n x achieved FLOP/s per GPU) (Narayanan et al. 2021, Eq. 4, which counts 8 N D with full
recomputation; distlab.training.training_days). 6ND leaves attention out; the step model (training.estimate)
counts it, and its tokens/s is what a plan's days are computed from.

The one assumption of this module is the price: PRICE_PER_GPU_HOUR_USD, an assumed rental price for one data-centre
GPU for one hour, not a quote (prices vary by provider, contract and year). Every lesson prices with it; pass
price_per_gpu_hour to use another.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._arguments import finite_result
from .errors import ConfigurationError
from .units import FLOP_PER_SECOND, format_count, positive, positive_int

__all__ = [
    "PRICE_PER_GPU_HOUR_USD",
    "SECONDS_PER_DAY",
    "required_tokens_per_s",
    "days_to_train",
    "gpu_hours",
    "training_cost",
    "required_share_of_peak",
    "TrainingBudget",
    "training_budget",
]

#: The assumed price of one GPU for one hour, in US dollars: an assumption stated once, not a quote.
PRICE_PER_GPU_HOUR_USD = 2.0
SECONDS_PER_DAY = 86400.0


def _positive_result(what: str, result: float) -> float:
    """`result`, finite (finite_result) and above zero: inputs so small that their product underflows to 0 get our
    error instead of a zero budget."""
    result = finite_result(what, result)
    if not result > 0.0:
        raise ConfigurationError(f"{what}: the inputs are too small to give a number above zero (it underflows to 0)")
    return result


def required_tokens_per_s(tokens, days) -> float:
    """The throughput (tokens/s, whole cluster) that trains `tokens` tokens in `days` days: D / (days x 86,400 s).
    Lesson 12 §2.

    >>> round(required_tokens_per_s(1e12, 50))  # 1e12 / 4.32e6 s
    231481
    """
    d = positive(tokens, "", "tokens")
    return _positive_result("required tokens/s", d / (positive(days, "", "days") * SECONDS_PER_DAY))


def days_to_train(tokens, tokens_per_s) -> float:
    """Days to train on `tokens` tokens at `tokens_per_s` (the whole cluster's): D / X / 86,400. Lesson 12 §2.

    >>> days_to_train(8.64e9, 1e5)  # 86,400 s
    1.0
    """
    d = positive(tokens, "", "tokens")
    return _positive_result("training days", d / positive(tokens_per_s, "", "tokens_per_s") / SECONDS_PER_DAY)


def gpu_hours(gpus, days) -> float:
    """GPU-hours of a run: GPUs x days x 24 (every GPU of the job is paid for the whole time). Lesson 12 §2.

    >>> gpu_hours(256, 50)  # 256 x 1,200 h
    307200.0
    """
    return _positive_result("GPU-hours", positive_int(gpus, "gpus") * positive(days, "", "days") * 24.0)


def training_cost(hours, price_per_gpu_hour=PRICE_PER_GPU_HOUR_USD) -> float:
    """US dollars of `hours` GPU-hours at `price_per_gpu_hour` (default: the stated assumption
    PRICE_PER_GPU_HOUR_USD). Lesson 12 §2.

    >>> training_cost(307200)  # at 2 $ per GPU-hour
    614400.0
    """
    h = positive(hours, "", "hours")
    return _positive_result("cost", h * positive(price_per_gpu_hour, "", "price_per_gpu_hour"))


def required_share_of_peak(params, tokens, gpus, days, peak_flops) -> float:
    """The share of peak each GPU must sustain to finish in `days`, by the 6ND rule:
    6 N D / (n x peak x days x 86,400 s) (Kaplan et al. 2020; Narayanan et al. 2021, Eq. 4). It counts no
    attention, so a real plan needs more than this (the step model's MFU counts attention). Lesson 12 §2.

    >>> round(required_share_of_peak(70.55e9, 1e12, 256, 50, 989.4e12), 3)  # 4.233e23 / 1.094e24
    0.387
    """
    from .training import model_flops

    flops = model_flops(params, tokens)
    n = positive_int(gpus, "gpus")
    available = n * positive(peak_flops, FLOP_PER_SECOND, "peak_flops") * positive(days, "", "days") * SECONDS_PER_DAY
    return _positive_result("share of peak", flops / available)


@dataclass(frozen=True)
class TrainingBudget:
    """A whole run of one configuration: tokens, GPUs, throughput, and what it costs. Lesson 12 §2."""

    tokens: float
    gpus: int
    tokens_per_s: float
    price_per_gpu_hour: float
    days: float
    gpu_hours: float
    cost_usd: float

    def within(self, days=None, cost_usd=None) -> bool:
        """True when the run takes at most `days` days and costs at most `cost_usd` dollars (None: no limit)."""
        return (days is None or self.days <= days) and (cost_usd is None or self.cost_usd <= cost_usd)

    def summary(self) -> str:
        return (
            f"{format_count(self.tokens)} tokens at {self.tokens_per_s:,.0f} tokens/s on {self.gpus:,} GPUs:\n"
            f"    {self.days:.1f} days, {self.gpu_hours:,.0f} GPU-hours, ${self.cost_usd:,.0f} "
            f"at ${self.price_per_gpu_hour:g} per GPU-hour (an assumed price)"
        )


def training_budget(step, tokens, price_per_gpu_hour=PRICE_PER_GPU_HOUR_USD) -> TrainingBudget:
    """Days, GPU-hours and dollars of training on `tokens` tokens with the configuration `step` (a
    training.StepEstimate: its tokens/s and GPUs). Lesson 12 §2.

    >>> from distlab import training
    >>> step = training.estimate('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096,
    ...                          zero=3, efficiency=0.5)
    >>> b = training_budget(step, 8 * 4096 * 86400 / step.step_time_s)  # one day of steps
    >>> round(b.days, 6), round(b.gpu_hours, 6), round(b.cost_usd, 6)
    (1.0, 192.0, 384.0)
    """
    rate = getattr(step, "tokens_per_s", None)
    gpus = getattr(step, "gpus", None)
    if rate is None or gpus is None:
        raise ConfigurationError(
            f"step={type(step).__name__} must be a training.StepEstimate (training.estimate's result)"
        )
    days = days_to_train(tokens, rate)
    hours = gpu_hours(gpus, days)
    price = positive(price_per_gpu_hour, "", "price_per_gpu_hour")
    return TrainingBudget(float(tokens), int(gpus), float(rate), price, days, hours, training_cost(hours, price))
