"""Graded questions of lesson 11b, long runs: long context (ring attention and Ulysses), failures and checkpoints,
and the batch in the large (the second part of lesson 11, whose questions ask about the schedules after 1F1B and
FSDP). Every expected value is computed by distlab."""

from __future__ import annotations

from .. import batch, failures, production
from .questions import NumericQuestion

__all__ = ["CP_DEGREE", "BIG_GPUS", "LOSS_NATS", "QUESTIONS", "SAVE_S", "BATCH_TOKENS"]

#: Q1: Ulysses with tensor parallelism.
CP_MODEL, CP_TP = "llama3.1-70b", 8
#: Q2: causal load balancing.
CP_DEGREE = 8
#: Q3: a larger cluster at Llama 3's failure rate, and its checkpoint's save time (seconds).
BIG_GPUS = 131072
SAVE_S = 30.0
#: Q4: the critical batch, and the batch (tokens) that data parallelism doubles.
LOSS_NATS = 2.0
BATCH_TOKENS = 4e6


def _q1():
    return max(cp for cp in range(1, 1025) if not production.ulysses_limit(CP_MODEL, cp, CP_TP))


def _explain_q1():
    return (
        f"Ulysses gives each GPU whole heads of the ones its TP rank holds: 64 heads / tp {CP_TP} = "
        f"{64 // CP_TP} per TP rank, so cp <= {64 // CP_TP}; the ring has no such limit"
    )


def _q2():
    return float(production.causal_work_per_rank(CP_DEGREE, load_balanced=False).max() * CP_DEGREE)


def _explain_q2():
    shares = production.causal_work_per_rank(CP_DEGREE, load_balanced=False)
    return (
        f"with 2cp = {2 * CP_DEGREE} chunks, the last rank's two hold keys after everyone else's: "
        f"{float(shares.max()):.4f} of the work = (2cp - 1)/cp^2, {float(shares.max()) * CP_DEGREE:.4f} = 2 - 1/cp "
        f"times the fair 1/cp; the zig-zag layout gives every rank exactly 1/cp"
    )


def _mtbf_s(interruptions=419):
    return failures.job_mtbf(BIG_GPUS, failures.failure_rate_per_gpu_hour(interruptions))


def _q3():
    return failures.young_interval(SAVE_S, _mtbf_s()) / 60.0


def _explain_q3():
    rate = failures.failure_rate_per_gpu_hour()
    return (
        f"Llama 3: 419 unexpected interruptions / (16,384 GPUs x 54 x 24 h) = {rate:.3g} per GPU-hour; on "
        f"{BIG_GPUS:,} GPUs 1 / (N lambda) = {_mtbf_s() / 60:.1f} minutes between failures; Young (1974): "
        f"sqrt(2 x {SAVE_S:g} s x {_mtbf_s():.0f} s) = {_q3():.2f} minutes between checkpoints"
    )


def _q3_hints():
    return {
        _mtbf_s() / 60 / _q3(): "is the time between failures itself: checkpoint much more often, every "
        "sqrt(2 x save time x MTBF)",
        (_mtbf_s(466) / _mtbf_s()) ** 0.5: "counts all 466 interruptions; 47 of them were planned maintenance, not "
        "failures",
        BIG_GPUS / 16384: "scales the wrong way: more GPUs fail more often, so the time between failures shrinks",
        0.5**0.5: "leaves out the 2 in Young's sqrt(2 x save time x MTBF)",
    }


def _steps(batch_tokens):
    return batch.steps_and_examples(batch_tokens, batch.critical_batch_tokens(LOSS_NATS), 1.0)[0]


def _q4():
    return _steps(BATCH_TOKENS) / _steps(2 * BATCH_TOKENS)


def _explain_q4():
    crit = batch.critical_batch_tokens(LOSS_NATS)
    return (
        f"Kaplan et al. 2020, Eq. 5.3: B_crit = B_* / L^(1/alpha_B) = 2e8 / {LOSS_NATS:g}^(1/0.21) = "
        f"{crit / 1e6:.2f} million tokens; McCandlish et al. 2018: S = S_min (1 + B_crit / B), so "
        f"(1 + {crit / BATCH_TOKENS:.3f}) / (1 + {crit / (2 * BATCH_TOKENS):.3f}) = {_q4():.3f} times fewer steps, "
        f"not 2: the batch is already near the critical one"
    )


def _q4_hints():
    crit_alpha = 2e8 / LOSS_NATS**0.21  # the exponent alpha_B instead of 1/alpha_B

    def ratio(crit):
        return (1 + crit / BATCH_TOKENS) / (1 + crit / (2 * BATCH_TOKENS))

    return {
        2 / _q4(): "assumes perfect scaling; doubling the batch halves the steps only far below the critical batch",
        ratio(crit_alpha) / _q4(): "raises the loss to alpha_B instead of 1/alpha_B: the critical batch comes out "
        "near 170 million tokens",
        (2 / 1.5) / _q4(): "takes the batch to be the critical batch; work the critical batch out at this loss",
    }


q1 = NumericQuestion(
    name="q1",
    prompt=f"Llama-3.1-70B (64 query heads, 8 K/V heads) with tensor parallelism tp = {CP_TP}: the largest "
    "DeepSpeed-Ulysses context-parallel degree?",
    expected=_q1,
    explain=_explain_q1,
    unit="",
    noun="a degree",
    rel_tol=0.0,
    abs_tol=1e-9,
    hint_text="Tensor parallelism splits the heads first. Ulysses then gives every GPU of the context-parallel "
    "group whole query heads of the ones its TP rank holds; K/V heads may be replicated, query heads may not.",
    scale_hint={
        64 / _q1(): "forgets that tensor parallelism takes the heads first: each TP rank has 64 / 8",
        1 / _q1(): "divides the K/V heads: with grouped-query attention the few K/V heads can be replicated across "
        "the group; it is the query heads that must split whole",
    },
)

q2 = NumericQuestion(
    name="q2",
    prompt=f"Causal ring attention over cp = {CP_DEGREE} GPUs with the sequence cut into contiguous pieces: the "
    "busiest GPU does how many times its fair share (1/cp) of the attention work?",
    expected=_q2,
    explain=_explain_q2,
    unit="",
    noun="a ratio",
    rel_tol=1e-3,
    hint_text="Cut the causal score matrix into cp x cp blocks, one block row per GPU. Count the blocks GPU i "
    "computes (the diagonal block is only half full), then compare the last GPU's count with the average.",
    scale_hint={
        2 / _q2(): "is the limit for many GPUs; the last rank's own diagonal block is half empty too: 2 - 1/cp",
        1 / _q2(): "assumes equal pieces mean equal work: with a causal mask later queries attend to more keys, so "
        "the GPU holding the end of the sequence does the most",
    },
)

q3 = NumericQuestion(
    name="q3",
    prompt=f"At Llama 3's failure rate (419 unexpected interruptions in 54 days on 16,384 GPUs), a job on "
    f"{BIG_GPUS:,} GPUs stalls {SAVE_S:g} s to save each checkpoint. By Young's rule, how many minutes should "
    "it train between checkpoints?",
    expected=_q3,
    explain=_explain_q3,
    unit="min",
    noun="a time",
    hint_text="Two steps. First the job's mean time between failures: Llama 3's failures per GPU-hour, times "
    "the GPU count, inverted. Then Young's rule balances the time lost saving against the work lost at a failure.",
    scale_hint=_q3_hints(),
)

q4 = NumericQuestion(
    name="q4",
    prompt=f"Kaplan et al.'s critical batch grows as the loss falls (Sec. 5.1): B_crit(L) = B_* / L^(1/alpha_B), with "
    f"B_* = 2e8 tokens and alpha_B = 0.21. A run near a loss of {LOSS_NATS:g} nats trains with "
    f"{BATCH_TOKENS / 1e6:g} million tokens per step and doubles its data parallelism (and so its batch). The "
    "steps to a given loss follow S = S_min (1 + B_crit / B): by what factor do they fall?",
    expected=_q4,
    explain=_explain_q4,
    unit="",
    noun="a factor",
    rel_tol=0.005,
    hint_text="First the critical batch at this loss; mind the exponent, 1/alpha_B, nearly 5. Then compare "
    "the steps at the two batches: only their ratio matters, S_min cancels.",
    scale_hint=_q4_hints(),
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4)}
