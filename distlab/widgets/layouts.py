"""The parallel layouts lesson 8's apps offer: every TP, PP, node count and micro-batch button or option a student
can pick runs beside the others (tp x pp fits the nodes' GPUs, dp x micro-batch divides the global batch), and the
one that would not is not offered, the control saying why (controls.offer_what_runs). Before, pp = 8 at 4 nodes
and tp = 1 at 64 nodes were offered and answered only with our error (review v20)."""

from __future__ import annotations

from .controls import offer_what_runs

__all__ = ["layout_refusal", "OffersWhatRuns"]


def layout_refusal(values: dict, gpus_per_node: int = 8, global_batch: int = 256) -> str | None:
    """Why the layout of `values` ({"nodes", "tp", "pp"[, "micro_batch_size"]}) cannot run on nodes of `gpus_per_node`
    GPUs with `global_batch` sequences, in the words of training.estimate's checks (step.checks: check_layout,
    check_batch); None where it can. The micro-batch is 1 where `values` has none (estimate's default)."""
    nodes, tp, pp = values["nodes"], values["tp"], values["pp"]
    b = values.get("micro_batch_size", 1)
    gpus, mp = gpus_per_node * nodes, tp * pp
    if gpus % mp:
        what = "is more than" if mp > gpus else "does not divide"
        return f"tp x pp = {tp} x {pp} = {mp} {what} the {gpus} GPUs of {nodes} nodes"
    dp = gpus // mp
    if global_batch % (dp * b):
        return (
            f"dp x micro-batch = {dp} x {b} = {dp * b} does not divide the global batch of {global_batch} sequences "
            "(each replica gets whole microbatches)"
        )
    return None


class OffersWhatRuns:
    """A lesson app mixin: the controls named in `layout_controls` offer only what runs beside the others (refusal:
    layout_refusal unless the app says otherwise, through controls.offer_what_runs), synced before each update; none
    moves, so the student's choices stand, and an option comes back once the others let it run."""

    layout_controls: tuple = ("nodes", "tp", "pp")
    _syncing = False

    def refusal(self, values: dict) -> str | None:
        """Why the state of `values` (the layout_controls' values) cannot run; None where it can."""
        return layout_refusal(values)

    def offer_what_runs(self) -> None:
        offer_what_runs(self, self.layout_controls, self.refusal)

    def _on_layout_change(self, change=None) -> None:
        if self._syncing:  # an option list being replaced
            return
        self.offer_what_runs()
        self.update(change)  # type: ignore[attr-defined]
