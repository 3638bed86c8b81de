"""What Lesson 7's training lab shows for a state of its controls: the options it offers, the estimate and the text at
each node count, and the picture's data (distlab.widgets.browser.LabPicture) for every node count at once.

A state is a plain dict {control name: value} of the lab's controls (CONTROLS) plus "chosen_batch", the batch the
student chose (the batch dropdown may show a larger one at a node count that does not offer it: batch_at). Every
function here reads only the state, never a widget: the app (distlab.widgets.training_lab) prices its current state
with them, and prices the states one control change away (neighbour_state) with the same calls, so the browser's
cache of those (distlab.widgets.prefetch, issue 32) holds exactly what the app would show there.
"""

from __future__ import annotations

from typing import TypeGuard

from .._words import counted
from .. import hardware, memory_recipes, moe, training, triage, validation
from ..errors import DistlabError
from ..moe import step as moe_step
from ..step_parts import MEMORY_COMPONENTS, MEMORY_LABELS, STEP_LABELS as STEP_PARTS
from ..units import format_bytes, format_rate, format_seconds
from .filling import attempt, remembered, remembered_estimate

__all__ = [
    "FABRICS",
    "NODE_COUNTS",
    "PENDING",
    "BATCHES",
    "SEQS",
    "EFFICIENCY_OPTIONS",
    "MEMORY_AXIS",
    "TP_SIZES",
    "PP_SIZES",
    "CP_SIZES",
    "MICRO_BATCHES",
    "CHUNKS",
    "ZERO_LABELS",
    "EP_SIZES",
    "ETP_OPTIONS",
    "IMBALANCES",
    "CAPACITY_OPTIONS",
    "CONTROLS",
    "valid_batches",
    "valid_imbalances",
    "batch_at",
    "config",
    "cluster",
    "estimate",
    "describe",
    "price",
    "picture_data",
    "payload_steps",
    "neighbour_state",
]

FABRICS = ["ethernet-100g", "ethernet-200g", "ethernet-400g", "ib-hdr", "ib-ndr", "ib-xdr"]
NODE_COUNTS = [1, 2, 4, 8, 16, 32, 64, 128]
BATCHES = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
SEQS = [1024, 2048, 4096, 8192, 16384]
#: The compute model: the calibrated one (distlab.efficiency, Lesson 7 §8) or a fixed share of peak (§1).
EFFICIENCY_OPTIONS = [("calibrated", None)] + [(f"fixed {p}%", p / 100) for p in (30, 40, 50, 60, 70, 80)]
#: The text under the picture at a node count still being priced (in a kernel, for a moment after a change).
PENDING = "pricing this node count ..."
#: The memory axis reaches at most this many times the GPU's capacity.
MEMORY_AXIS = 2
TP_SIZES = [1, 2, 4, 8]
PP_SIZES = [1, 2, 4, 8, 16]
CP_SIZES = [1, 2, 4, 8, 16]
MICRO_BATCHES = [1, 2, 4, 8]
CHUNKS = [1, 2, 4, 5, 10, 20]
ZERO_LABELS = [("plain DP", 0), ("ZeRO-1", 1), ("ZeRO-2", 2), ("ZeRO-3", 3)]
#: Expert parallelism of the mixture-of-experts models (distlab.moe; Lesson 10): EP sizes, and expert TP either
#: the attention's TP (Megatron's default) or none.
EP_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
ETP_OPTIONS = [("= TP", None), ("1", 1)]
#: The routing knobs of an MoE model (training.estimate's moe_imbalance and capacity_factor; Lesson 10 §3): the
#: busiest EP rank's token copies over the mean (offered up to min(ep, experts / top_k), its bound), and either
#: dropless routing or expert buffers padded to a capacity factor (GShard's; the imbalance then does not apply).
IMBALANCES = [1.0, 1.1, 1.25, 1.5, 2.0]
CAPACITY_OPTIONS = [("dropless", None), ("1.0", 1.0), ("1.25", 1.25), ("1.5", 1.5), ("2.0", 2.0)]
#: The lab's controls that the physics reads, in the order of the app's `_controls` (the node count is the picture's
#: own slider: every count is priced at once).
CONTROLS = (
    "model",
    "node",
    "fabric",
    "global_batch",
    "seq_len",
    "tp",
    "pp",
    "micro_batch_size",
    "schedule",
    "chunks",
    "zero",
    "recompute",
    "sequence_parallel",
    "efficiency",
    "memory_recipe",
    "cp",
    "ep",
    "etp",
    "moe_imbalance",
    "capacity_factor",
)

#: The lab's fixes for a configuration that does not fit, remembered per configuration (widgets.common.remembered;
#: its estimates, the variants' too, go through common.remembered_estimate): a configuration visited again is not
#: priced again. 1,024 lists of a few small dicts (about 0.6 kB pickled): the default lab's neighbourhood fill (52
#: states one change away, every node count) explains 186 configurations, which a table of 64 lost before the next.
_explain_infeasible = remembered(1024)(triage.explain_infeasible)


def valid_batches(s: dict, nodes: int) -> list:
    """The global batches the batch dropdown offers at `nodes`: multiples of dp x micro-batch (each replica gets
    whole microbatches), dp = GPUs / (tp x cp x pp); the smallest such multiple when no listed batch is one."""
    gpus = hardware.node(s["node"]).gpus_per_node * nodes
    step = max(1, gpus // (s["tp"] * s["cp"] * s["pp"])) * s["micro_batch_size"]
    return [b for b in BATCHES if b % step == 0] or [step]


def valid_imbalances(s: dict) -> list:
    """The load imbalances the imbalance dropdown offers: IMBALANCES up to min(ep, experts / top_k), the most the
    busiest of ep ranks can take (distlab.moe.step; with ep = 1 only 1); every one for a dense model."""
    if not moe_step.is_moe(s["model"]):
        return list(IMBALANCES)
    m = moe.model(s["model"])
    high = min(float(s["ep"]), m.experts / m.top_k)
    return [v for v in IMBALANCES if v <= high]


def valid_zero(s: dict) -> list:
    """The (label, stage) pairs the sharding buttons offer: the ZeRO stages the memory recipe's engine runs
    (memory_recipes.MemoryRecipe.zero_stages: Megatron's distributed optimizer is ZeRO-1 only, torchtitan's FSDP2 has
    no ZeRO-1). Offering the others let a student pick one estimate() refuses (review v16, the capstone's lab)."""
    stages = memory_recipes.memory_recipe(s["memory_recipe"]).zero_stages
    return [(label, z) for label, z in ZERO_LABELS if z in stages]


def nearest_zero(zero: int, offered: list) -> int:
    """The offered stage nearest `zero` (the more sharded one on a tie: ZeRO-1 becomes ZeRO-2 under FSDP2): where a
    recipe change leaves the sharding."""
    return min((z for _, z in offered), key=lambda z: (abs(z - zero), -z))


#: What a control shows while it is disabled: the value the step model then uses (training.estimate ignores
#: sequence_parallel at tp = 1 and chunks outside the interleaved schedule), the tooltip saying why, and a note
#: after its description (controls.show_what_applies).
INAPPLICABLE = {
    "sequence_parallel": (
        False,
        "sequence parallelism splits the TP group's LayerNorm and dropout work: off at tp = 1",
        "off: tp = 1",
    ),
    "chunks": (1, "chunks v apply to the interleaved schedule only: one chunk per stage here", ""),
}


def disabled_controls(s: dict) -> list:
    """Whether each CONTROLS control is disabled in state `s` (None: the lab never disables it): chunks apply to the
    interleaved schedule only, sequence parallelism to tp > 1, EP, expert TP and the capacity factor to an MoE model,
    the load imbalance to dropless routing with more than one offered value. The app's _sync_controls sets these; a
    cached change's payload carries them, so the browser applies them at once (browser_js/prefetch.js)."""
    moe_model = moe_step.is_moe(s["model"])
    rules = {
        "chunks": s["schedule"] != "interleaved",
        "sequence_parallel": s["tp"] == 1,
        "ep": not moe_model,
        "etp": not moe_model,
        "capacity_factor": not moe_model,
        "moe_imbalance": not moe_model or s["capacity_factor"] is not None or len(valid_imbalances(s)) == 1,
    }
    return [rules.get(name) for name in CONTROLS]


def batch_at(s: dict, nodes: int) -> int:
    """The global batch the lab uses at `nodes`: the chosen batch when that count offers it, else the next larger one
    it offers (what the batch dropdown shows when the slider goes there)."""
    batches = valid_batches(s, nodes)
    return min((b for b in batches if b >= s["chosen_batch"]), default=batches[-1])


def config(s: dict, nodes: int | None = None, shown_batch: int | None = None) -> dict:
    """training.estimate's keyword arguments in state `s` at `nodes` (its batch_at); with nodes None, the batch
    dropdown's `shown_batch`."""
    interleaved = s["schedule"] == "interleaved"
    return dict(
        global_batch=shown_batch if nodes is None else batch_at(s, nodes),
        seq_len=s["seq_len"],
        tp=s["tp"],
        cp=s["cp"],
        pp=s["pp"],
        chunks=s["chunks"] if interleaved else 1,
        micro_batch_size=s["micro_batch_size"],
        zero=s["zero"],
        recompute=s["recompute"],
        sequence_parallel=s["sequence_parallel"],
        schedule=s["schedule"],
        efficiency=s["efficiency"],
        memory_recipe=s["memory_recipe"],
        **(
            dict(ep=s["ep"], etp=s["etp"], moe_imbalance=s["moe_imbalance"], capacity_factor=s["capacity_factor"])
            if moe_step.is_moe(s["model"])
            else {}
        ),
    )


def cluster(s: dict, nodes: int) -> hardware.Cluster:
    return hardware.cluster(s["node"], nodes, s["fabric"])


def estimate(s: dict, nodes: int) -> training.StepEstimate:
    """training.estimate in state `s` at `nodes` (remembered per configuration)."""
    return remembered_estimate(s["model"], cluster(s, nodes), **config(s, nodes))


def price(s: dict, nodes: int) -> tuple:
    """(the estimate or our error, the text or our error or None) in state `s` at `nodes`."""
    result = attempt(estimate, s, nodes)
    if isinstance(result, DistlabError):
        return result, None
    return result, attempt(describe, s, result, nodes)


def payload_steps(s: dict):
    """A generator pricing state `s` one node count per step (each a few milliseconds: distlab.widgets.prefetch
    runs it in the kernel's idle turns); its return value is picture_data of every count."""
    results, texts = {}, {}
    for n in NODE_COUNTS:
        results[n], texts[n] = price(s, n)
        yield n
    return picture_data(s, results, texts)


def neighbour_state(s: dict, name: str, value) -> dict:
    """The state after the student sets control `name` to `value` in state `s`, as the app's _on_change and
    _sync_controls leave it: the batch picked becomes the chosen one, and an imbalance the new model or EP size no
    longer offers falls to the largest one it does."""
    t = {**s, name: value}
    if name == "global_batch":
        t["chosen_batch"] = value
    imbalances = valid_imbalances(t)
    if t["moe_imbalance"] not in imbalances:
        t["moe_imbalance"] = max(v for v in imbalances if v <= t["moe_imbalance"])
    zeros = valid_zero(t)
    if t["zero"] not in [z for _, z in zeros]:
        t["zero"] = nearest_zero(t["zero"], zeros)
    return shown_state(t, dict(zip(CONTROLS, disabled_controls(s))))


def shown_state(t: dict, disabled_before: dict) -> dict:
    """State `t` with each INAPPLICABLE control as the app shows it (widgets.common.show_what_applies): a control
    that was enabled before the change records its value as the student's choice ("chosen_<name>", kept in the
    state); it then shows that choice where it applies and the value the model uses where it does not."""
    disabled = dict(zip(CONTROLS, disabled_controls(t)))
    for name, (unused, *_) in INAPPLICABLE.items():
        key = f"chosen_{name}"
        if not disabled_before.get(name) or key not in t:
            t[key] = t[name]
        t[name] = unused if disabled[name] else t[key]
    return t


def no_effect_notes(s: dict, cl: hardware.Cluster, chunks: int) -> list[str]:
    """Why a choice the controls offer changes no number here (review v16: ib-xdr on a DGX H100 left every number
    as it was, unexplained): a fabric faster than the node's NICs runs at their rate; the interleaved schedule with
    one chunk per stage is 1F1B."""
    notes = []
    nic = cl.node.nic
    if cl.fabric is not None and cl.fabric.bandwidth > nic.bandwidth:
        notes.append(
            f"fabric {cl.fabric.name}: the {cl.node.name}'s own NICs ({nic.name}) send at most "
            f"{format_rate(nic.bandwidth)} per port, so it is priced as {nic.name} [hardware.Cluster.port_bandwidth]"
        )
    if s["schedule"] == "interleaved" and chunks == 1:
        notes.append("interleaved with one chunk per stage (v = 1) is 1F1B: raise chunks v to interleave")
    return notes


def band_line(s: dict, accelerator: str, precision: str, moe: bool = False) -> str:
    """The error band the step time carries, with where it comes from (validation.error_band). The band is the
    calibrated compute model's, measured on published runs; a fixed share of peak (Lesson 7 §1's simple model) was
    never validated, so its step time claims none (review v19: 'fixed 30%' printed the calibrated model's ±5.6%). A
    mixture-of-experts step (its all-to-all, its expert GEMMs) carries the MoE validation runs' band, never the dense
    runs' (validation.error_band's moe)."""
    band = validation.error_band(accelerator, precision, moe=moe).short()
    if s["efficiency"] is None:
        return "the model's error band " + band
    return (
        f"no error band: compute at a fixed {100 * s['efficiency']:g}% of peak is Lesson 7 §1's simple model, never "
        f"validated (the calibrated model's band: {band})"
    )


def describe(s: dict, est: training.StepEstimate, nodes: int) -> str:
    """The text under the picture at `nodes` in state `s`: configuration, step time, MFU, throughput, fit or why not."""
    c = est.config
    head = (
        f"dp={c['dp']} x tp={c['tp']}"
        + (f" x cp={c['cp']}" if c["cp"] > 1 else "")
        + f" x pp={c['pp']}"
        + (f" (v={c['chunks']})" if c["chunks"] > 1 else "")
        + (f", experts over ep={c['ep']} x etp={c['etp']}" if "ep" in c else "")
        + (_routing(c) if "ep" in c else "")
        + f" = {est.gpus} GPUs; global batch {c['global_batch']}: {counted(c['microbatches'], 'microbatch')}"
        + f" of {c['micro_batch_size']} per pipeline "
        "[training.estimate]"
    )
    parts = ", ".join(f"{name} {format_seconds(value)}" for name, value in est.parts().items() if value > 0)
    lines = [
        head,
        # a layout that cannot run takes no step: its time is what it would take (the picture draws no bar)
        ("step time" if est.feasible else "step time, were it to run,")
        + f" {format_seconds(est.step_time_s)}: {parts}",
        band_line(s, cluster(s, nodes).accelerator.name, c["precision"], moe="ep" in c),
        f"MFU {100 * est.mfu:.1f}%, {est.tokens_per_s:,.0f} tokens/s, {est.samples_per_s:.3g} samples/s; "
        f"scaling efficiency {100 * est.scaling_efficiency:.1f}%",
        f"memory per GPU {format_bytes(est.memory.total_bytes)} ({c['memory_recipe']} recipe): {est.memory.verdict()}",
        "compute " + est.compute_model.describe(),
        *no_effect_notes(s, cluster(s, nodes), c["chunks"]),
    ]
    if est.feasible:
        return "\n".join(lines)
    lines.append("NOT FEASIBLE: " + est.explain())
    if not est.fits:
        fixes = _explain_infeasible(s["model"], cluster(s, nodes), price=remembered_estimate, **config(s, nodes))
        good = [f for f in fixes if f["fits"]][:3]
        if good:
            lines.append(
                "would fit: "
                + "; ".join(
                    f"{f['change']} ({format_bytes(f['memory_per_gpu_bytes'])}, step {format_seconds(f['step_time_s'])})"
                    for f in good
                )
                + " [triage.explain_infeasible]"
            )
        elif fixes:
            best = min(fixes, key=lambda f: f["memory_per_gpu_bytes"])
            lines.append(
                f"no single change fits; the biggest saving: {best['change']} "
                f"(-{format_bytes(best['saves_bytes'])}) [triage.explain_infeasible]"
            )
    return "\n".join(lines)


def picture_data(s: dict, priced: dict, described: dict) -> dict:
    """The picture's data in state `s` from the estimates (or our errors) and texts priced so far, per node count:
    {"summaries", "errors", "frames"} for LabPicture.show_options (PENDING where a count is not priced yet)."""
    results = [priced.get(n) for n in NODE_COUNTS]
    texts = [described.get(n) for n in NODE_COUNTS]
    valid = [r for r in results if isinstance(r, training.StepEstimate)]
    frames: dict = {}
    if valid:
        acc = hardware.node(s["node"]).accelerator
        reserved = valid[0].memory.reserved_bytes
        step_parts = [p for p in STEP_PARTS if any(p in r.parts() for r in valid)]
        frames = {
            "memory_parts": [MEMORY_LABELS[k] for k in MEMORY_COMPONENTS],
            "memory": [
                [r.memory.parts()[k] / 1e9 for k in MEMORY_COMPONENTS] if isinstance(r, training.StepEstimate) else []
                for r in results
            ],
            # the axis holds every count's bar up to MEMORY_AXIS x the capacity (one node of a 70B model on
            # plain DP needs 1 TB: on its scale the capacity line would sit at the floor); taller bars are cut
            "memory_top": min(
                MEMORY_AXIS * acc.memory_bytes, max([acc.memory_bytes] + [r.memory.total_bytes for r in valid])
            )
            / 1e9,
            "capacity": acc.memory_bytes / 1e9,
            "capacity_label": f"{acc.name}: {format_bytes(acc.memory_bytes)} ({acc.memory_text()})",
            # what the verdict compares with: the capacity less the recipe's reserve (CUDA context, NCCL
            # buffers; distlab.memory_recipes), drawn as its own line so that a bar between the two reads "over"
            "usable": (acc.memory_bytes - reserved) / 1e9 if reserved else None,
            "usable_label": f"usable: {format_bytes(acc.memory_bytes - reserved)} ({format_bytes(reserved)} reserved)",
            "step_parts": step_parts,
            # no step-time bar for a layout that cannot run (over memory, or a pipeline that never fills): a
            # step it will never take is no answer (issue 31); the picture says so in its place
            "step": [[r.parts().get(p, 0.0) for p in step_parts] if _runs(r) else [] for r in results],
            "step_text": [
                [format_seconds(r.parts().get(p, 0.0)) for p in step_parts] if _runs(r) else [] for r in results
            ],
            "step_total": [format_seconds(r.step_time_s) if _runs(r) else "" for r in results],
            "memory_total": [
                format_bytes(r.memory.total_bytes) if isinstance(r, training.StepEstimate) else "" for r in results
            ],
            "fits": [bool(r.fits) if isinstance(r, training.StepEstimate) else False for r in results],
            "verdict": [_short_verdict(r) if isinstance(r, training.StepEstimate) else "" for r in results],
            # fits but cannot run (a pipeline that never fills): said under the verdict, the reason in the text
            "runs": [bool(r.feasible) if isinstance(r, training.StepEstimate) else False for r in results],
            "gpus": [r.gpus if isinstance(r, training.StepEstimate) else 0 for r in results],
        }
    summaries, errors = [], []
    for r, text in zip(results, texts):
        if r is None:
            summaries.append(PENDING)
            errors.append("")
        elif isinstance(r, DistlabError):
            summaries.append("")
            errors.append(str(r))
        elif isinstance(text, DistlabError):
            summaries.append("")
            errors.append(str(text))
        else:
            summaries.append(text or "")
            errors.append("")
    return {"summaries": summaries, "errors": errors, "frames": frames}


def _runs(result) -> TypeGuard[training.StepEstimate]:
    """Whether `result` is an estimate of a layout that runs (fits in memory, no other problem): only such a
    layout gets a step-time bar."""
    return isinstance(result, training.StepEstimate) and bool(result.feasible)


def _routing(c: dict) -> str:
    """How an MoE configuration routes: ' (dropless, busiest EP rank 1.5 x the mean)' or ' (capacity factor 1.25)'."""
    if c.get("capacity_factor") is not None:
        return f" (capacity factor {c['capacity_factor']:g})"
    return f" (dropless, busiest EP rank {c.get('moe_imbalance', 1.0):g} x the mean)"


def _short_verdict(est: training.StepEstimate) -> str:
    """The few words under the memory bar: 'fits, 12.3 GB free' or '40 GB over'."""
    headroom = est.memory.headroom_bytes
    if headroom is None:
        return "fits" if est.fits else "does not fit"
    return f"fits, {format_bytes(headroom)} free" if est.fits else f"{format_bytes(-headroom)} over"
