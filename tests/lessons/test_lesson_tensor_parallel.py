"""The graded questions of lesson 5: expected values computed by distlab agree with hand derivations and
published figures; wrong answers say what is wrong."""

from __future__ import annotations


import pytest

from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED
from distlab.lessons.variants import lesson_variant
from distlab.lessons import tensor_parallel as tpq
from distlab.lessons.questions import with_params

# the cases the lesson works (t = 4 for q1's quiz, a 4,096-token layer, a 131,072-token ring): the answer reading and
# the hints are checked on them; the questions ask other numbers (t = 8, 8,192 tokens, 262,144 tokens)
Q2_WORKED = with_params(tpq.q2, seq=4096)
Q3_WORKED = with_params(tpq.q3, seq=4096)
Q5_WORKED = with_params(tpq.q5, seq_len=131072)


def test_lesson_5_expected_values_by_hand():
    # q1: 3 x 4096 x 4096 / 8 (MIT 6.5940's quiz asks t = 4: 12,582,912, which the lesson works)
    assert tpq.q1.expected() == 6_291_456
    # q2, 8,192 tokens: 4 x 2 x 7/8 x (8192 x 4096 x 2 B) = 469,762,048 B (the lesson's 4,096: 234,881,024 B)
    assert tpq.q2.expected() == pytest.approx(469.762048)
    assert Q2_WORKED.expected() == pytest.approx(234.881024)
    # q3: 4 x (14 x 9.6 us + 117,440,512 B / 50e9 B/s) = 9.93 ms (the lesson's 4,096 tokens: 5.23522 ms)
    assert tpq.q3.expected() == pytest.approx(4 * (14 * 9.6e-6 + 117_440_512 / 50e9) * 1e3)
    assert Q3_WORKED.expected() == pytest.approx(4 * (14 * 9.6e-6 + 58_720_256 / 50e9) * 1e3)
    # q4: M = 2048 x 12288 x 2 B = 50,331,648 B; a ring all-reduce over 8 sends 2 x 7/8 M = 1.75 M per GPU.
    # (a) sequence parallelism divides the 10 s b h of norms and dropouts by t (Korthikanti et al. 2022, Table 2) and
    # sends 4 pairs (4 x 1.75 M) + the backward's 2 re-gathers (2 x 7/8 M) = 8.75 M = 440,401,920 B; (c) full
    # recomputation keeps only the layer input (cuts the duplicate too) but sends 6 x 1.75 M = 528,482,304 B;
    # (b) t = 16 and (d) ZeRO-3 leave the norms and dropouts whole on every GPU: a, the fewest bytes that cut it
    assert tpq.q4.expected() == "a"
    fixes, (dup, sent) = tpq._q4_fixes(8, 2048)
    assert fixes["a"][1] == 8.75 * 50_331_648 and fixes["c"][1] == 10.5 * 50_331_648 and sent == 7 * 50_331_648
    assert fixes["b"][0] == fixes["d"][0] == dup == 10 * 2048 * 12288
    # the prompt's numbers: s b h (10 + 24/t) = 2048 x 12288 x 13 B = 327 MB, of which 10 s b h = 252 MB replicated
    assert "327 MB" in tpq.q4.prompt and "252 MB" in tpq.q4.prompt
    # q5: 2 x 262144/64 x 8192 x 1 B = 64 MiB (the lesson's 131,072 tokens: 32 MiB)
    assert tpq.q5.expected() == pytest.approx(2**26 / 1e6)
    assert Q5_WORKED.expected() == pytest.approx(2**25 / 1e6)
    # q6: reduce-scatter + all-gather = the two halves of the ring all-reduce, and Megatron's backward re-gathers
    # the QKV and MLP-up inputs (half an all-reduce each): llama2-7b, t = 8, s = 4096, M = 33,554,432 B:
    # 4 x 1.75 M = 234,881,024 B without SP, 5 x 1.75 M = 293,601,280 B with it, 5/4: a
    assert tpq.q6.expected() == "a"
    assert tpq._layer(sequence_parallel=True).comm_bytes_per_gpu == 5 * 1.75 * 33_554_432
    # q7: compute 0.725 TFLOP / 989 TFLOP/s = 0.733 ms either way; the all-reduces go from
    # 4 x (14 x 3.4 us + 58,720,256 B / 450e9) = 0.712 ms to 4 x (14 x 9.6 us + 58,720,256 B / 50e9) = 5.24 ms: a
    nvlink = 4 * (14 * 3.4e-6 + 58_720_256 / 450e9) * 1e3
    assert f"{nvlink:.3g} ms" in tpq.q7.prompt and f"{Q3_WORKED.expected():.3g} ms" in tpq.q7.prompt
    assert tpq.q7.expected() == "a"


@pytest.mark.parametrize(
    "answer, status",
    [
        ("32 MiB", CORRECT),
        ("33.5 MB", CORRECT),
        (33554432e-6, CORRECT),
        ("33554432 B", CORRECT),
        (32, INCORRECT),
        (None, NOT_ATTEMPTED),
    ],
)
def test_ring_buffer_answers_with_units(answer, status):
    assert Q5_WORKED.check(answer).status == status


@pytest.mark.parametrize(
    "answer, words",
    [
        (234.881024 / 2, "counts only the two forward all-reduces"),
        (4 * 33.554432, "a ring all-reduce sends 2(N-1)/N x M per GPU"),
        (234.881024e6, "looks like bytes"),
    ],
)
def test_lesson_5_hints_name_the_usual_mistakes(answer, words):
    result = Q2_WORKED.check(answer)
    assert result.status == INCORRECT and words in result.message


def test_q3_forgetting_the_latency_is_named():
    bandwidth_only = 4 * 58_720_256 / 50e9 * 1e3
    assert "leaves out the latency" in Q3_WORKED.check(bandwidth_only).message


def test_six_to_eight_questions():
    # each one has a prompt, hint and solution and starts unanswered: tests/lessons/test_manifest.py
    assert 6 <= len(tpq.QUESTIONS) <= 8


@pytest.mark.parametrize(
    "q, answer, words",
    [
        (tpq.q4, "b", "norms and dropouts stay whole"),
        (tpq.q4, "c", "six, against the five"),
        (tpq.q4, "d", "model states"),
        (tpq.q6, "b", "gathers each again"),
        (tpq.q6, "c", "one of the two halves"),
        (tpq.q6, "d", "still reduced"),
        (tpq.q7, "b", "change compute too"),
        (tpq.q7, "c", "a quarter more bytes"),
        (tpq.q7, "d", "8x the FLOPs"),
    ],
)
def test_each_wrong_option_names_its_misconception(q, answer, words):
    result = q.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


# per-student variants (issue 15): every combination is well-posed, and the wrong-answer feedback follows the numbers
VARIED = ("q1", "q2", "q3", "q5")


@pytest.mark.parametrize("name", VARIED)
def test_every_variant_is_well_posed(name, assert_well_posed):
    assert_well_posed(tpq.QUESTIONS[name])


def test_the_tp_choices_divide_the_heads():
    from distlab import models

    for tp in tpq.Q1_VARIANTS["tp"] + tpq.LAYER_VARIANTS["tp"]:
        assert models.model(tpq.LAYER_MODEL).heads % tp == 0
    for tp in tpq.SP_VARIANTS["tp"]:
        assert models.model(tpq.SP_MODEL).heads % tp == 0


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_wrong_answers_say_why_in_every_variant(seed):
    from distlab import models

    qs = lesson_variant("tensor_parallel", seed)
    assert qs["q2"].params == qs["q3"].params  # "the same layer"
    q1 = qs["q1"]
    whole = 3 * 4096 * 4096
    assert q1.expected() == whole // q1.params["tp"]
    assert (
        "whole Q/K/V" in q1.check(whole).message and "one of the three" in q1.check(whole / 3 / q1.params["tp"]).message
    )
    q2 = qs["q2"]
    n, seq = q2.params["tp"], q2.params["seq"]
    m_mb = seq * models.model(tpq.LAYER_MODEL).hidden * 2 / 1e6
    assert q2.expected() == pytest.approx(4 * 2 * (n - 1) / n * m_mb)
    assert "two forward" in q2.check(2 * 2 * (n - 1) / n * m_mb).message
    assert "2(N-1)/N x M" in q2.check(4 * m_mb).message  # M per all-reduce instead of 2(N-1)/N M
    q3 = qs["q3"]
    bandwidth_only = 4 * 2 * (n - 1) / n * m_mb * 1e6 / 50e9 * 1e3
    assert q3.expected() == pytest.approx(bandwidth_only + 4 * 2 * (n - 1) * 9.6e-6 * 1e3)
    assert "leaves out the latency" in q3.check(bandwidth_only).message
    q5 = qs["q5"]
    buffer = 2 * q5.params["seq_len"] / q5.params["cp"] * q5.params["hidden"]
    assert q5.expected() == pytest.approx(buffer / 1e6)
    assert f"{buffer / 2**20:g} MiB" in q5.check(buffer / 2**20).message  # read MiB as MB


def test_seeds_draw_other_numbers():
    assert len({lesson_variant("tensor_parallel", s)["q2"].prompt for s in ("seed-1", "seed-7", "seed-3", "x")}) > 1
