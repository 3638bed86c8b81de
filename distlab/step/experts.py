"""training.estimate's view of a model: an MoE model's step-model view with its expert parallelism checked, or the
dense model with the expert knobs refused (distlab.moe.step holds the checks). Lesson 10 §5.
"""

from __future__ import annotations

from ..errors import ConfigurationError
from ..moe.step import check_expert_parallel, is_moe, refuse_routing_for_dense, step_model

__all__ = ["expert_view"]


def expert_view(model, cl, s, tp, cp, pp, ep, etp, sp, routing) -> tuple:
    """(the model as the step model reads it, the ep/etp keywords, the routing record of the config): an MoE model's
    MoEStepModel with (ep, etp) checked, or the dense model, refusing expert knobs: training.estimate's view
    of a model. Lesson 10 §5.

    >>> from distlab import hardware, models
    >>> expert_view(models.model('llama2-7b'), hardware.cluster('dgx-h100', 1), 4096, 1, 1, 1, 1, None, False,
    ...             dict(moe_imbalance=1.0, capacity_factor=None, max_nodes_per_token=None))[1:]
    ({}, {})
    """
    if is_moe(model):
        g = cl.nvlink_domain
        ep, etp = check_expert_parallel(
            model, cl.gpus, tp=tp, cp=cp, pp=pp, ep=ep, etp=etp, sequence_parallel=sp, gpus_per_node=g
        )
        view = step_model(
            model,
            s,
            imbalance=routing["moe_imbalance"],
            capacity_factor=routing["capacity_factor"],
            max_nodes=routing["max_nodes_per_token"],
        ).checked(ep, etp, g)
        record = dict(
            moe_imbalance=view.imbalance, capacity_factor=view.capacity_factor, max_nodes_per_token=view.max_nodes
        )
        return view, dict(ep=ep, etp=etp), record
    if not (ep == 1 and etp is None):
        raise ConfigurationError(
            f"ep={ep!r}, etp={etp!r}: expert parallelism applies to mixture-of-experts models "
            f"(distlab.moe.MOE_MODELS); {model.name} is dense (valid: ep=1, etp=None)"
        )
    refuse_routing_for_dense(model.name, *routing.values())
    return model, {}, {}
