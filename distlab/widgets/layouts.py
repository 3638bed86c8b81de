"""The parallel layouts lesson 8's apps offer: every TP, PP, node count and micro-batch button or option a student
can pick runs beside the others (tp x pp fits the nodes' GPUs, dp x micro-batch divides the global batch), and the
one that would not is not offered, the control saying why (controls.offer_what_runs). Before, pp = 8 at 4 nodes
and tp = 1 at 64 nodes were offered and answered only with our error (review v20). The rules are the step model's
own (step.checks.check_layout and check_batch, which training.estimate calls): one home, the words of its error."""

from __future__ import annotations

import functools

from .. import hardware, models
from ..errors import ConfigurationError
from ..step.checks import check_batch, check_layout
from .controls import offer_what_runs

__all__ = ["layout_refusal", "OffersWhatRuns"]


@functools.lru_cache(maxsize=64)
def _layout_cluster(node: str, nodes: int) -> hardware.Cluster:
    """hardware.cluster(node, nodes), built once per count (a refusal is asked for every option of every control)."""
    return hardware.cluster(node, nodes)


def layout_refusal(
    values: dict, model: str = "llama3.1-70b", node: str = "dgx-h100", global_batch: int = 256
) -> str | None:
    """Why the layout of `values` ({"nodes", "tp", "pp"[, "micro_batch_size"]}) of `model` cannot run on `nodes`
    nodes `node` with `global_batch` sequences: the message of training.estimate's own checks (step.checks:
    check_layout, then check_batch with one chunk, 1F1B, no context parallelism); None where it runs. The micro-batch
    is 1 where `values` has none (estimate's default). Lesson 8 §2."""
    tp, pp = values["tp"], values["pp"]
    shape = models.model(model) if isinstance(model, str) else model
    try:
        dp = check_layout(shape, _layout_cluster(node, values["nodes"]), None, tp, pp, 1)[0]
        check_batch(shape, global_batch, None, values.get("micro_batch_size", 1), 1, "1f1b", dp, pp, 1, False)
    except ConfigurationError as refused:
        return str(refused)
    return None


class OffersWhatRuns:
    """A lesson app mixin: the controls named in `layout_controls` offer only what runs beside the others (refusal:
    layout_refusal unless the app says otherwise, through controls.offer_what_runs), synced before each update; none
    moves, so the student's choices stand, and an option comes back once the others let it run."""

    layout_controls: tuple = ("nodes", "tp", "pp")
    layout_model_control: str | None = None
    _syncing = False

    def refusal(self, values: dict) -> str | None:
        """Why the state of `values` (the layout_controls' values) cannot run; None where it can."""
        return layout_refusal(values, self.layout_model())

    def layout_model(self) -> str:
        """The model whose layouts the controls offer: the value of the app's layout_model_control where it names
        one, else the app's MODEL."""
        if self.layout_model_control:
            return getattr(self, self.layout_model_control).value
        return getattr(self, "MODEL", "llama3.1-70b")

    def offer_what_runs(self) -> None:
        offer_what_runs(self, self.layout_controls, self.refusal)

    def _on_layout_change(self, change=None) -> None:
        if self._syncing:  # an option list being replaced
            return
        self.offer_what_runs()
        self.update(change)  # type: ignore[attr-defined]
