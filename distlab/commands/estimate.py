"""distlab estimate: one configuration's step-time breakdown, MFU, throughput and memory (distlab.training)."""

from __future__ import annotations

import json

from ..units import wrap_text
from ._configuration import (
    activation_offload,
    add_activation_offload_argument,
    add_cluster_arguments,
    add_compute_arguments,
    add_fp8_attention_argument,
    add_config_arguments,
    add_moe_routing_arguments,
    cluster,
    compute_options,
    config,
    moe_routing,
)
from .._words import counted

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "estimate"
HELP = "step time breakdown, MFU, throughput and memory per GPU of one parallel configuration"


def add_arguments(cmd) -> None:
    add_cluster_arguments(cmd)
    add_config_arguments(cmd)
    cmd.add_argument("--ep", type=int, default=1, help="expert-parallel degree (mixture-of-experts models, default 1)")
    cmd.add_argument("--etp", type=int, default=None, help="expert tensor-parallel degree, 1 or tp (MoE; default tp)")
    add_moe_routing_arguments(cmd)
    add_compute_arguments(cmd)
    add_fp8_attention_argument(cmd)
    add_activation_offload_argument(cmd)
    cmd.add_argument(
        "--json",
        action="store_true",
        help="print a JSON object: step_time_s, mfu, tokens_per_s, memory_per_gpu_bytes, fits, the "
        "configuration, breakdown_s and memory",
    )


def run(args) -> int:
    from .. import training, triage, validation

    cl = cluster(args)
    kwargs = dict(config(args), ep=args.ep, etp=args.etp, **moe_routing(args))
    kwargs.update(compute_options(args))
    kwargs.update(activation_offload(args))  # the default passes nothing: the estimate stays as it was
    est = training.estimate(args.model, cl, **kwargs)
    band = validation.error_band(cl.accelerator.name, est.config["precision"], moe="ep" in est.config)
    if args.json:
        data = est.to_dict()
        data["error_band_percent"] = band.percent
        data["error_band_runs"] = band.runs
        data["error_band_scope"] = band.scope
        if not est.fits:
            data["fixes"] = triage.explain_infeasible(args.model, cl, **kwargs)
        print(json.dumps(data, indent=2))
        return 0
    c = est.config
    print(f"{c['model']} on {cl.describe()}")
    print(
        f"dp={c['dp']} tp={c['tp']} pp={c['pp']}"
        + (f" v={c['chunks']}" if c["chunks"] > 1 else "")
        + (f" ep={c['ep']} etp={c['etp']}" if "ep" in c else "")
        + f", {counted(c['microbatches'], 'microbatch')} of {c['micro_batch_size']} x {c['seq_len']} tokens, ZeRO-{c['zero']}, "
        f"recompute {c['recompute']}"
        + (f" ({c['recompute_layers']} layers per stage chunk)" if "recompute_layers" in c else "")
        + f", {c['schedule']}"
        + (", sequence parallel" if c["sequence_parallel"] else "")
    )
    print(est.summary())
    print(wrap_text(f"step time {band.around(est.step_time_s)}: the model's error band, {band.scope}"))
    if not est.fits:
        print("single changes that would save memory:")
        print(triage.format_fixes(triage.explain_infeasible(args.model, cl, **kwargs)))
    return 0
