"""The lesson 7 training calculator on mixture-of-experts models (issue 16): the catalog's MoE models and an EP
control, every number training.estimate's."""

from __future__ import annotations

import pytest

from distlab import moe, training
from distlab.widgets.training_lab import TrainingLabApp


@pytest.fixture(scope="module")
def app():
    a = TrainingLabApp()
    yield a
    import matplotlib.pyplot as plt

    plt.close(a.fig)


def test_moe_models_are_offered_and_ep_is_only_for_them(app):
    assert set(moe.MOE_MODELS) <= set(app.model.options)
    assert app.ep.disabled and app.etp.disabled  # the default model is dense
    app.model.value = "mixtral-8x7b"
    assert not app.ep.disabled and app.error is None
    app.model.value = "llama3.1-70b"
    assert app.ep.disabled and app.error is None and "ep" not in app.result.config


def test_ep_control_is_the_estimate_and_draws_the_all_to_all(app):
    app.model.value = "mixtral-8x7b"
    app.ep.value, app.etp.value = 8, 1
    want = training.estimate("mixtral-8x7b", "dgx-h100", nodes=32, fabric="ib-ndr", global_batch=256, seq_len=8192,
                             tp=4, pp=2, zero=2, recompute="selective", sequence_parallel=True,
                             memory_recipe="deepspeed", ep=8, etp=1)
    assert app.error is None and app.result.step_time_s == pytest.approx(want.step_time_s, rel=1e-12)
    assert want.ep_comm_s > 0
    assert app.time_bars.rects["EP all-to-all"][0].get_width() == pytest.approx(want.ep_comm_s)
    assert "ep=8 x etp=1" in app.status.value and "EP all-to-all" in app.status.value
    app.ep.value = 256  # Mixtral has 8 experts: our message, naming the valid sizes, in place of the result
    assert app.result is None and "valid ep: 1, 2, 4, 8" in app.error and "Traceback" not in app.status.value
    app.ep.value, app.etp.value = 1, None
    app.model.value = "llama3.1-70b"
