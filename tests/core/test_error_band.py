"""The step model's error band (issue 30: every prediction with its validated error): validation.error_band, and
`distlab estimate` printing it."""

from __future__ import annotations

import json

import pytest

from distlab import cli, validation
from distlab.errors import ConfigurationError


def _moe(run: dict) -> bool:
    """A mixture-of-experts run, read from the data: its model names distlab.moe's catalog or has experts."""
    return any(key in run["distlab"]["model"] for key in ("moe_catalog", "experts"))


def _by_hand(family: str | None, precision: str | None, moe: bool = False) -> list[float]:
    """|error| % of the validation rows of a GPU family (None: every GPU) and precision (None: any), dense or MoE,
    read from the published-runs data and the comparison rows: the band's runs, selected without error_band's code."""
    runs = {r["id"]: r for r in validation.load_runs("validation")}
    out = []
    for row in validation.compare("validation").rows:
        if row.status != "predicted":
            continue
        run = runs[row.id]
        if _moe(run) != moe:
            continue
        name = validation.run_cluster(run).accelerator.name.lower()
        if family and not (name == family or name.startswith(family + "-")):
            continue
        if precision is not None and run["distlab"]["estimate"].get("precision", "mixed") != precision:
            continue
        out.append(abs(row.error_percent))
    return out


@pytest.mark.parametrize("gpu, family", [("h100-sxm", "h100"), ("a100-80gb", "a100")])
def test_the_band_is_the_mean_error_of_the_validation_runs_of_that_gpu_and_precision(gpu, family):
    errors = _by_hand(family, "mixed")
    band = validation.error_band(gpu, "mixed")
    assert band.matched and band.runs == len(errors) >= validation.MIN_BAND_RUNS
    assert band.percent == pytest.approx(sum(errors) / len(errors), rel=1e-12)
    assert f"{len(errors)} published {family.upper()} runs in mixed precision" in band.scope


def test_an_unvalidated_kind_borrows_a_wider_band_and_says_so():
    """No A100 run in FP8 is in the validation set (the A100 has no FP8 tensor cores): the band is the A100 runs' in
    any precision, and it says FP8 is unvalidated there."""
    band = validation.error_band("a100-80gb", "fp8")
    errors = _by_hand("a100", None)
    assert not band.matched and band.runs == len(errors)
    assert band.percent == pytest.approx(sum(errors) / len(errors), rel=1e-12)
    assert "no A100 run in fp8 precision has been validated yet" in band.scope


def test_fp8_on_h100_has_its_own_band_from_the_fp8_validation_runs():
    """NVIDIA's DGX Cloud FP8 recipes (dgxc-benchmarking, five H100 runs) are validation runs: H100 FP8 gets the mean
    |error| over exactly those runs."""
    errors = _by_hand("h100", "fp8")
    band = validation.error_band("h100-sxm", "fp8")
    assert band.matched and band.runs == len(errors) >= validation.MIN_BAND_RUNS
    assert band.percent == pytest.approx(sum(errors) / len(errors), rel=1e-12)


def test_around_scales_the_band_to_the_step_time():
    # 10% of 8 s in the step's own unit; 5.62% of 17.722 s = 0.996 s, two significant digits: never '± 997 ms'
    band = validation.ErrorBand(10.0, 5, "test", True)
    assert band.around(8.0) == "8 s ± 0.8 s"
    assert validation.ErrorBand(5.62, 29, "test", True).around(17.722) == "17.7 s ± 1.0 s"
    assert band.around(0.0123) == "12.3 ms ± 1.2 ms"


@pytest.mark.parametrize("bad", [None, "", "   ", 3])
def test_bad_input_gets_our_error_naming_the_parameter(bad):
    with pytest.raises(ConfigurationError, match="accelerator="):
        validation.error_band(bad)
    with pytest.raises(ConfigurationError, match="precision="):
        validation.error_band("h100-sxm", bad)


ARGS = ["--model", "llama2-7b", "--gpus", "16", "--global-batch", "64", "--zero", "1"]


def test_estimate_prints_the_step_time_with_its_band(capsys):
    assert cli.main(["estimate", *ARGS]) == 0
    # the band's line, wrapped at the kit's text width (units.wrap_text): its first line and the indented ones after it
    out = capsys.readouterr().out.splitlines()
    start = [i for i, x in enumerate(out) if x.startswith("step time") and "±" in x]
    band = validation.error_band("h100-sxm", "mixed")
    assert len(start) == 1
    whole = out[start[0]]
    for x in out[start[0] + 1 :]:
        if not x.startswith(" "):
            break
        whole += " " + x.strip()
    assert "published H100 runs in mixed precision" in whole, whole
    assert cli.main(["estimate", *ARGS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["error_band_percent"] == pytest.approx(band.percent) and data["error_band_runs"] == band.runs


def test_a_mixture_of_experts_step_gets_the_mixture_of_experts_runs_band():
    """Megatron Bridge 26.06's MoE runs (Qwen3, DeepSeek-V3, gpt-oss on GB200, GB300 and H100) are validation runs:
    an MoE step's band is their mean |error|, never the dense runs'. H100 has one MoE run, in FP8 (fewer than
    MIN_BAND_RUNS), so an H100 FP8 MoE step gets every MoE run's band, unmatched, and says so."""
    every = _by_hand(None, None, moe=True)
    assert len(_by_hand("h100", "fp8", moe=True)) < validation.MIN_BAND_RUNS <= len(every)
    band = validation.error_band("h100-sxm", "fp8", moe=True)
    assert not band.matched and not band.dense_for_moe and band.runs == len(every)
    assert band.percent == pytest.approx(sum(every) / len(every), rel=1e-12)
    assert f"{len(every)} published mixture-of-experts validation runs of every GPU and precision" in band.scope
    assert "no H100 mixture-of-experts run in fp8 precision has been validated yet" in band.scope
    gb200 = _by_hand("gb200", "fp8", moe=True)  # four MXFP8 runs: their own band
    mine = validation.error_band("gb200", "fp8", moe=True)
    assert mine.matched and mine.runs == len(gb200) >= validation.MIN_BAND_RUNS
    assert mine.percent == pytest.approx(sum(gb200) / len(gb200), rel=1e-12)
    dense = _by_hand("h100", "fp8")  # the dense band leaves the MoE runs out
    assert validation.error_band("h100-sxm", "fp8").percent == pytest.approx(sum(dense) / len(dense), rel=1e-12)
    with pytest.raises(ConfigurationError, match="moe="):
        validation.error_band("h100-sxm", "fp8", moe="yes")


def test_without_mixture_of_experts_runs_an_moe_step_borrows_the_dense_band_and_says_so(monkeypatch):
    """Before any MoE run was validated (session 23): an MoE step got the dense runs' band, unmatched, saying why."""
    dense_only = tuple(r for r in validation._scored_validation_runs() if not r[2])
    monkeypatch.setattr(validation, "_scored_validation_runs", lambda: dense_only)
    dense, moe = validation.error_band("h100-sxm", "fp8"), validation.error_band("h100-sxm", "fp8", moe=True)
    assert dense.matched and not dense.dense_for_moe
    assert not moe.matched and moe.dense_for_moe and (moe.percent, moe.runs) == (dense.percent, dense.runs)
    assert "no mixture-of-experts run has been validated yet" in moe.scope
    assert moe.short().endswith("(dense models: no mixture-of-experts run validated yet)")


def test_mixture_of_experts_runs_make_their_own_band(monkeypatch):
    # three H100 FP8 MoE runs at 20, 30 and 40 % (the real ones left out): the MoE band is their mean, the dense band
    # without them
    runs = tuple(r for r in validation._scored_validation_runs() if not r[2])
    fake = (*runs, ("h100", "fp8", True, 20.0), ("h100", "fp8", True, 30.0), ("h100", "fp8", True, 40.0))
    monkeypatch.setattr(validation, "_scored_validation_runs", lambda: fake)
    moe = validation.error_band("h100-sxm", "fp8", moe=True)
    assert moe.matched and not moe.dense_for_moe and (moe.runs, moe.percent) == (3, pytest.approx(30.0))
    assert "H100 mixture-of-experts runs in fp8 precision" in moe.scope
    dense = [e for f, p, m, e in runs if (f, p, m) == ("h100", "fp8", False)]
    assert validation.error_band("h100-sxm", "fp8").percent == pytest.approx(sum(dense) / len(dense))


MOE_LAYOUT = ["--model", "qwen3-235b-a22b", "--gpus", "256", "--global-batch", "2048", "--seq-len", "4096"]


def test_the_cli_gives_an_moe_step_the_moe_runs_band(capsys):
    args = [*MOE_LAYOUT, "--tp", "2", "--pp", "8", "--chunks", "4", "--schedule", "interleaved"]
    assert cli.main(["estimate", *args, "--sequence-parallel", "--ep", "32", "--etp", "1", "--precision", "fp8"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    every = len(_by_hand(None, None, moe=True))
    assert f"mean |error| on {every} published mixture-of-experts validation runs of every GPU and precision" in out
    assert "no H100 mixture-of-experts run in fp8 precision has been validated yet" in out
    assert "dense runs' band" not in out
    assert cli.main(["plan", *MOE_LAYOUT, "--precision", "fp8"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no mixture-of-experts run has been validated" not in out and "error band of ±" in out
    # the ties are called within the band of the runs it is borrowed from, named (not "runs like these")
    words = "mixture-of-experts validation runs of every GPU and precision (none of this plan's kind validated yet)"
    assert words in out and "like these" not in out
    assert cli.main(["estimate", "--model", "llama3.1-8b", "--gpus", "8", "--global-batch", "8"]) == 0
    assert "mixture-of-experts" not in capsys.readouterr().out
