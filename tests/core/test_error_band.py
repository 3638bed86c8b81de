"""The step model's error band (issue 30: every prediction with its validated error): validation.error_band, and
`distlab estimate` printing it."""

from __future__ import annotations

import json

import pytest

from distlab import cli, validation
from distlab.errors import ConfigurationError


def _by_hand(family: str, precision: str | None) -> list[float]:
    """|error| % of the validation rows of a GPU family (and precision), read from the published-runs data and
    the comparison rows: the band's runs, selected without error_band's code."""
    runs = {r["id"]: r for r in validation.load_runs("validation")}
    out = []
    for row in validation.compare("validation").rows:
        if row.status != "predicted":
            continue
        run = runs[row.id]
        if not validation.run_cluster(run).accelerator.name.lower().startswith(family + "-"):
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
