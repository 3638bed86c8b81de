"""Lesson 7's graded questions: expected values derived by hand here, feedback for typical mistakes.

Every question has a tested correct path and a tested wrong-answer path whose feedback names the mistake.
(tests/grading/test_build.py runs every exercise and solution notebook generically.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from distlab import models, training, validation
from distlab.lessons import training_lab as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED, with_params
from distlab.lessons.variants import lesson_variant
from distlab.widgets.training_lab import TrainingLabApp

P = models.model("llama3.1-70b").parameter_count()
TOKENS = 256 * 8192
PEAK = 989.4e12  # H100 SXM dense bf16, FLOP/s
#: PaLM (App. B) model FLOPs per token of Llama-3.1-70B at s = 8,192, derived in test_q1_is_palm_model_flops
PER_TOKEN = 481_442_660_352


def _estimate(batch=lesson.BATCH, seq=lesson.SEQ, **config):
    return training.estimate(
        lesson.MODEL, lesson.NODE, nodes=lesson.NODES, fabric="ib-ndr", global_batch=batch, seq_len=seq, **config
    )


def test_q1_is_palm_model_flops():
    # PaLM (App. B) per token: 6 x (80 layers x 855,654,400 + 128,256 x 8192) + 12 x 80 x 64 x 128 x 8192
    # = 6 x 69,503,025,152 + 64,424,509,440 = 417,018,150,912 + 64,424,509,440 = 481,442,660,352 FLOP;
    # x 2,097,152 tokens = 1.0097e18 FLOP = 1.010 EFLOP (6PT: 0.888 EFLOP, attention left out), which the lesson
    # prints; q1 asks a batch of 512: x 4,194,304 tokens = 2.019 EFLOP
    m = models.model("llama3.1-70b")
    assert m.params_per_layer() == 855_654_400 and m.vocab == 128_256 and m.heads * m.head_dim == 8192
    per_token = 6 * (80 * 855_654_400 + 128_256 * 8192) + 12 * 80 * 64 * 128 * 8192
    assert per_token == PER_TOKEN
    assert lesson.q1.expected() == pytest.approx(per_token * 2 * TOKENS / 1e18, rel=1e-12)
    assert lesson.q1.check(f"{per_token * 2 * TOKENS / 1e15} PFLOP").status == CORRECT
    wrong = lesson.q1.check(6 * P * 2 * TOKENS / 1e18)
    assert wrong.status == INCORRECT and "leaves attention out" in wrong.message
    assert "step_flops" not in lesson.q1.hint_text  # the hint guides; it does not name the answering call


def test_q2_exercise_1_as_written_fits_nowhere():
    # dp 256: 16 B x 70.55e9 = 1,129 GB of model states alone; tp 4 x pp 2 (no ZeRO): 1,129 / 8 = 141 GB; 80 GB GPUs
    assert 16 * P / 1e9 > 16 * P / 8 / 1e9 > 80
    assert lesson.q2.expected() == "neither" and lesson.q2.check("Neither").status == CORRECT
    for option, words in (("dp256", "replicates the whole model"), ("dp32-tp4-pp2", "141 GB"), ("both", "1.13 TB")):
        result = lesson.q2.check(option)
        assert result.status == INCORRECT and words in result.message, option


def test_q3_exercise_1_once_both_fit():
    flat = _estimate(**lesson.EX1_FITTED["dp256"])
    three_d = _estimate(**lesson.EX1_FITTED["dp32-tp4-pp2"])
    assert flat.fits and three_d.fits  # the prompt says both fit
    # the 3D layout pays a bubble of (p - 1)/m: m = 256 / (32 x 1) = 8, (2 - 1)/8 = 1/8 of its stage work, and TP
    # all-reduces; dp 256 has neither (invariants of the step model's parts)
    assert three_d.microbatches == 8 and three_d.bubble_s > 0 and three_d.tp_comm_s > 0
    assert flat.bubble_s == 0 and flat.tp_comm_s == 0
    assert lesson.q3.expected() == ("dp256" if flat.step_time_s < three_d.step_time_s else "dp32-tp4-pp2")
    assert lesson.q3.expected() == "dp256"
    wrong = lesson.q3.check("dp32-tp4-pp2")
    assert wrong.status == INCORRECT and "counts ZeRO-3's traffic" in wrong.message
    # "tie" is refused with the model's error: the steps differ by about a quarter (> the ~9 % validation error)
    assert 1.15 < three_d.step_time_s / flat.step_time_s < 1.4
    # the band lesson 7 prints and its planner ties with: the H100 mixed-precision runs' (validation.error_band)
    band = validation.error_band("h100-sxm", "mixed").percent
    assert f"model's {band:.1f}% validated error band on H100 runs" in lesson.q3.check("tie").message


def test_q4_bubble_added_is_p_minus_1_over_m():
    # pp = 4 (the lesson's table works pp = 8): dp = 256 / (8 x 4) = 8; m = 256 / (8 x 1) = 32; (4 - 1) / 32 = 9.375 %
    assert lesson.q4.expected() == pytest.approx(100 * 3 / 32, rel=1e-12)
    idle = lesson.q4.check(100 * 3 / 35)  # the idle share (p-1)/(m+p-1), not the time added
    assert idle.status == INCORRECT and "idle share" in idle.message


def test_q5_mfu_by_hand_from_q1_and_the_given_step():
    e = _estimate(**lesson.CONFIG)
    assert f"{e.step_time_s:.3f} s per step" in lesson.q5.prompt  # the step the student is given
    # MFU = F T / (t N peak), F = 481,442,660,352 FLOP per token (q1), T = 2,097,152 tokens
    by_hand = 100 * PER_TOKEN * TOKENS / (round(e.step_time_s, 3) * 256 * PEAK)
    assert lesson.q5.check(by_hand).status == CORRECT
    assert lesson.q5.expected() == pytest.approx(100 * e.mfu)
    six_pt = lesson.q5.check(100 * 6 * P * TOKENS / (e.step_time_s * 256 * PEAK))
    assert six_pt.status == INCORRECT and "leaves attention" in six_pt.message
    fp8 = lesson.q5.check(100 * PER_TOKEN * TOKENS / (e.step_time_s * 256 * 2 * PEAK))
    assert "FP8 peak" in fp8.message
    hfu = lesson.q5.check(100 * e.hfu)
    assert hfu.status == INCORRECT and "HFU" in hfu.message


def test_q6_design_accepts_any_layout_that_meets_both_constraints():
    # the constraints, applied here to the step model's estimates of the 20 layouts
    ok = {}
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8, 16):
            e = _estimate(tp=tp, pp=pp, **lesson.DESIGN)
            if e.memory.capacity_bytes - e.memory.total_bytes >= 10e9:
                ok[tp, pp] = e.step_time_s
    fastest = min(ok.values())
    # within the step model's validated error band of the fastest (5.6 % since session 21; 7.3 % since session 18 added 16 torchtitan H100
    # rows, all predicted too fast; 5.3 % since the causal attention backward is measured, 5.5 % since SP's backward
    # re-gathers are priced, issue 30; 5.8 % before, 6.4 % before FSDP's gradient path, planner.error_band_percent): a tie
    # since session 24 the band is the H100 dense runs' in mixed precision (validation.error_band, the lesson's
    # DESIGN_BAND): the overall mean now counts mixture-of-experts runs too, which this dense layout is not
    from distlab import validation

    band = validation.error_band("h100-sxm", "mixed")
    assert band.matched and "H100 runs in mixed precision" in band.scope
    accepted = {k for k, t in ok.items() if t <= (1 + band.percent / 100) * fastest}
    # tp 4 x pp 4 is 3.4 % slower than tp 8 x pp 1 since the re-gathers are priced (it was 6.0 %): inside the band;
    # tp 8 x pp 2 is 6.1 % slower: outside the 5.3 % band, inside the 7.3 % one since session 18, outside again the
    # 5.6 % one since torchtitan's 500 W H100 is priced at Meta's stated 800 TFLOP/s (session 21)
    assert accepted == {(8, 1), (4, 4)}
    assert list(lesson.q6.expected()) in [list(k) for k in accepted]
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8, 16):
            result = lesson.q6.check([tp, pp])
            assert (result.status == CORRECT) == ((tp, pp) in accepted), (tp, pp, result.message)
    assert lesson.q6.check("8, 1").status == lesson.q6.check((8, 1)).status


def test_q6_design_feedback_names_the_missed_constraint():
    # tp 4 x pp 2: 70.55e9 / 8 x (4 + 12/32) = 38.6 GB of model states, plus 45 GB of activations = 83.5 GB: inside
    # the H100's 79.11 GiB = 84.9 GB that CUDA sees, but 1.4 GB free, short of the question's 10 GB headroom
    result = lesson.q6.check([4, 2])
    assert (
        result.status == INCORRECT and "leaves only 1.4 GB free" in result.message and "activations" in result.message
    )
    # tp 1 x pp 1 replicates the model: 1.13 TB
    assert "does not fit" in lesson.q6.check([1, 1]).message
    # tp 4 x pp 8 fits but pays a deeper pipeline's bubble: 14 % slower than tp 8 x pp 1, beyond the band
    slow = lesson.q6.check([4, 8])
    assert slow.status == INCORRECT and "slower than the fastest layout" in slow.message and "bubble" in slow.message
    for bad, words in (([3, 1], "not a layout"), ("x", "could not be read"), ([8], "two numbers"), (7, "not a layout")):
        assert words in lesson.q6.check(bad).message, bad
    assert lesson.q6.check(None).status == NOT_ATTEMPTED


def test_q7_days_to_train_by_hand():
    e = _estimate(**lesson.CONFIG)
    # 2e12 tokens / 2,097,152 tokens per step = 953,674.3 steps; x t seconds / 86,400 s per day
    days = 2e12 / TOKENS * e.step_time_s / 86400
    assert lesson.q7.expected() == pytest.approx(days, rel=1e-12)
    assert lesson.q7.check(days).status == CORRECT
    assert "GPU-days" in lesson.q7.check(256 * days).message
    assert "in hours" in lesson.q7.check(24 * days).message
    assert "one token" in lesson.q7.check(days / 8192).message


def test_q8_tp_overlap_is_the_baseline_not_a_law():
    plain = _estimate(tp=8, pp=1, **lesson.DESIGN)
    overlapped = _estimate(tp=8, pp=1, tp_overlap=True, **lesson.DESIGN)
    # the "negligible" option's feedback claims more than a sixth of the step: check it on the model's numbers
    assert plain.tp_comm_s > plain.step_time_s / 6
    assert overlapped.tp_comm_s < 0.5 * plain.tp_comm_s
    assert lesson.q8.expected() == "overlap" and lesson.q8.check("overlap").status == CORRECT
    assert "all-or-nothing" in lesson.q8.check("never").message
    assert "intra-node myth" in lesson.q8.check("negligible").message


def test_all_questions_listed_answerable_and_explained():
    assert list(lesson.QUESTIONS) == ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"]
    for q in lesson.QUESTIONS.values():
        assert q.check(None).status == NOT_ATTEMPTED
        assert q.check(q.expected()).status == CORRECT
        assert q.hint().text and q.solution().text
        # no hint names the distlab call whose output is the answer
        assert not any(f in q.hint_text for f in ("estimate(", "plan(", "step_flops", ".mfu", "training."))


@pytest.mark.parametrize("name", ["q1", "q4", "q5", "q7"])
def test_every_variant_is_well_posed(name, assert_well_posed):
    assert_well_posed(lesson.QUESTIONS[name])


def test_every_variant_follows_the_step_model(every_variant):
    for q in every_variant(lesson.q1):
        b, s = q.params["batch"], q.params["seq"]
        assert q.expected() == pytest.approx(_estimate(b, s, **lesson.CONFIG).model_flops / 1e18)
        assert f"global batch {b} x {s} tokens" in q.prompt
    for q in every_variant(lesson.q4):
        e = _estimate(**{**lesson.CONFIG, "pp": q.params["pp"]})
        assert q.expected() == pytest.approx(100 * e.bubble_s / (e.compute_s + e.tp_comm_s))
        assert f"pp = {q.params['pp']}," in q.prompt


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_wrong_answers_say_why_in_every_variant(seed):
    qs = lesson_variant("training_lab", seed)
    q1 = qs["q1"]
    tokens = q1.params["batch"] * q1.params["seq"]
    # the 6PT rule of thumb for this variant's tokens (it leaves attention out), computed here from the catalog
    six_pt = 6 * models.model(lesson.MODEL).parameter_count() * tokens / 1e18
    assert "leaves attention out" in q1.check(six_pt).message
    q4 = qs["q4"]
    p = q4.params["pp"]
    m = _estimate(**{**lesson.CONFIG, "pp": p}).microbatches
    assert "idle share" in q4.check(100 * (p - 1) / (m + p - 1)).message  # (p-1)/(m+p-1) instead of the added time


def test_the_variant_pipelines_are_feasible():
    for pp in lesson.PP_VARIANTS:
        assert _estimate(**{**lesson.CONFIG, "pp": pp}).feasible
        assert with_params(lesson.q4, pp=pp).explain()


#: The lab's two-letter control labels and what each splits (the lesson's own terms: §1, §5 and Lesson 10).
ABBREVIATIONS = {
    "TP": "tensor parallelism",
    "PP": "pipeline parallelism",
    "CP": "context parallelism",
    "EP": "expert parallelism",
}


def test_the_paragraph_above_the_lab_explains_its_two_letter_controls():
    """Issue 31 (lesson 7 in Voila, its first screen): the lesson opens with the lab, before any theory, so the
    paragraph just above it is all a visitor has read. It named none of the lab's two-letter controls; now it must say
    what each one (read off the app's own labels) splits, and what the charts and the nodes slider show."""
    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "07_training_lab.ipynb").read_text("utf-8"))
    cells = nb["cells"]
    k = next(i for i, c in enumerate(cells) if c["cell_type"] == "code" and "TrainingLabApp()" in "".join(c["source"]))
    above = " ".join("".join(cells[k - 1]["source"]).split())
    app = TrainingLabApp()
    labels = {w.description for w in app._controls if re.fullmatch(r"[A-Z]{2}", w.description)}
    app.close()
    assert labels == set(ABBREVIATIONS)
    for label in sorted(labels):
        assert f"**{label}** ({ABBREVIATIONS[label]}" in above, label
    for shown in ("memory per GPU", "step time", "MFU", "**nodes** slider"):
        assert shown in above, shown
