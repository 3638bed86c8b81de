"""What a lesson's "Things to try" list says a student will see is what its app shows. Each bullet of every such list
(every lesson notebook) is listed in CLAIMS with a check that builds the app, makes the move the bullet names and
asserts what it says; a bullet that only asks a question is listed with None. A bullet not listed fails, so a new or
reworded claim gets its check. Lesson 5 told the student that raising h from 4,096 to 16,384 makes compute grow 16x
and communication 4x; the app showed 729 us -> 10.4 ms (14.3x) and 712 us -> 2.28 ms (3.2x), since the attention
scores grow like h and the all-reduces' latency not at all; lesson 6 said that in the reversed order GPU 0's TP group
spans every node, and its 4 GPUs sit on 4 of the 8 (review v20)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def things_to_try() -> list[tuple[str, str]]:
    """(notebook name, bullet with its whitespace squashed) for each bullet of each "Things to try" list."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            text = "".join(cell["source"])
            at = text.lower().find("things to try")
            if cell["cell_type"] != "markdown" or at < 0:
                continue
            for bullet in re.findall(r"^\* .*(?:\n  .*)*", text[at:], re.M):
                found.append((path.name, " ".join(bullet.split())))
    return found


def _built(module: str, name: str, **kwargs):
    import importlib

    return getattr(importlib.import_module(f"distlab.widgets.{module}"), name)(**kwargs)


def _memory_bar_stays(bullet: str):
    app = _built("memory_wall", "MemoryWallApp", model="llama2-7b", gpu="h100-sxm", gpus=1, zero=0)
    first = app.result.total_bytes
    for gpus in (8, 64, 1024):
        app.gpus.value = gpus
        assert app.result.total_bytes == first
    app.close()


def _negative_size_explained(bullet: str):
    app = _built("memory_wall", "MemoryWallApp")
    app.model.value = "custom size"
    app.custom_params.value = -7.0
    assert app.error and "Traceback" not in app.error
    app.close()


def _ring_bytes_stay_time_changes(bullet: str):
    app = _built("collectives", "RingAllReduceApp", gpus=8, size="4 GB", link="nvlink4")
    nv = app.compute()
    app.link.value = "ib-ndr"
    ib = app.compute()
    assert ib.cost.bytes_sent_per_gpu == nv.cost.bytes_sent_per_gpu and ib.cost.time_s > nv.cost.time_s
    app.close()


def _bubble_shrinks_with_m(bullet: str):
    app = _built("pipeline", "BubbleGridApp", kind="1f1b", stages=8, microbatches=8)
    small = app.result.timeline.bubble_fraction
    app.microbatches.value = 64
    assert app.result.timeline.bubble_fraction < small / 4
    app.close()


def _gpipe_and_1f1b_same_bubble_not_memory(bullet: str):
    app = _built("pipeline", "BubbleGridApp", kind="gpipe", stages=4, microbatches=16)
    gpipe = app.result
    app.kind.value = "1f1b"
    assert app.result.timeline.bubble_fraction == pytest.approx(gpipe.timeline.bubble_fraction)
    assert app.result.memory.peak_bytes < gpipe.memory.peak_bytes
    app.close()


def _zb_h1_without_w_is_1f1b(bullet: str):
    app = _built("pipeline", "BubbleGridApp", kind="zb-h1", stages=8, microbatches=16, weight=0.0)
    zb = app.result.timeline.bubble_fraction
    app.kind.value = "1f1b"
    assert zb == pytest.approx(app.result.timeline.bubble_fraction)
    app.close()


def _interleaved_p4_m6_explained(bullet: str):
    app = _built("pipeline", "BubbleGridApp", kind="interleaved", stages=4, microbatches=6)
    assert app.result is None and "multiple of stages" in app.error
    app.close()


def _sixteen_stages_four_chunks_explained(bullet: str):
    app = _built("pipeline", "BubbleGridApp", kind="interleaved", stages=16, microbatches=16, model="llama2-7b")
    app.chunks.value = 4
    assert "chunks=4 does not divide the layers per stage [2, 2" in app.error
    app.close()


def _tp_orange_past_blue_on_ib(bullet: str):
    app = _built("tensor_parallel", "TensorParallelApp", tp=8, hidden=4096, seq_len=4096, link="nvlink4")
    app.link.value = "ib-ndr"
    assert app.result.comm_time_s > app.result.compute_time_s
    app.close()


def _tp_growth_with_h(bullet: str):
    app = _built("tensor_parallel", "TensorParallelApp", tp=8, hidden=4096, seq_len=4096, link="nvlink4")
    small = app.result
    app.hidden.value = 16384
    big = app.result
    bars = f"the bars about {big.compute_time_s / small.compute_time_s:.0f}× and {big.comm_time_s / small.comm_time_s:.0f}×"
    assert bars in bullet  # 14x and 3x (the bullet said 16x and 4x)
    assert big.comm_bytes_per_gpu / small.comm_bytes_per_gpu == pytest.approx(4)  # "the all-reduced bytes 4x"
    app.close()


def _tp_slider_stops_at_8_in_a_node(bullet: str):
    app = _built("tensor_parallel", "TensorParallelApp", tp=8, hidden=4096, seq_len=4096, link="nvlink4")
    assert max(app.tp.options) == 8
    app.link.value = "ib-ndr"
    assert max(app.tp.options) > 8
    app.close()


def _tp_attention_like_s_squared(bullet: str):
    from distlab import tensor
    from distlab.widgets.tensor_parallel import gpt_layer

    short, long = (tensor.tp_layer_cost(gpt_layer(4096, s), 8, seq_len=s, link="nvlink4") for s in (4096, 8192))
    assert long.comm_bytes_per_gpu == pytest.approx(2 * short.comm_bytes_per_gpu)
    attention = [tensor.layer_flops_array(0, 4096, 1, s, 8) for s in (4096, 8192)]  # the attention core alone
    assert attention[1] == pytest.approx(4 * attention[0])


def _mesh_tp16_warns(bullet: str):
    app = _built("parallelism_3d", "MeshApp", dp=4, tp=4, pp=4, gpus_per_node=8)
    app.tp.value = 16
    assert any("TP leaves the node" in w for w in app.result.warnings())
    app.close()


def _mesh_reversed_tp_spans_nodes(bullet: str):
    app = _built("parallelism_3d", "MeshApp", dp=4, tp=4, pp=4, gpus_per_node=8)
    app.order.value = "pp-dp-tp"
    lay = app.result
    nodes = {r // 8 for r in lay.group_of(0, "tp")}
    assert len(nodes) == lay.tp < lay.nodes  # 4 of the 8 nodes, one member on each (lesson 6 said every node)
    assert "each GPU of its TP group now sits on a different node" in bullet
    app.close()


#: Each bullet (its start, enough to name it) and its check; None for a bullet that asks and asserts nothing.
CLAIMS = {
    "7B, 1 to 1024 GPUs, plain DP": _memory_bar_stays,
    "Switch to ZeRO-1, ZeRO-2, ZeRO-3 at 8 GPUs": None,
    "Turn on activations for Llama-3.1-8B": None,
    "Type a negative size": _negative_size_explained,
    "N = 8: after step 7": None,
    "How many steps does N = 16 take?": None,
    "Change the link from `nvlink4` to `ib-ndr`": _ring_bytes_stay_time_changes,
    "Llama-2-7B on 8 H100s": None,
    "Llama-2-70B: how many GPUs": None,
    "Switch the fabric from `ib-ndr` to `nvlink4`": None,
    "1F1B, $p = 8$: drag $m$ from 8 to 64": _bubble_shrinks_with_m,
    "Switch between GPipe and 1F1B": _gpipe_and_1f1b_same_bubble_not_memory,
    "ZB-H1 with W : F = 0": _zb_h1_without_w_is_1f1b,
    "Interleaved with $p = 4$, $m = 6$": _interleaved_p4_m6_explained,
    "$p = 16$, Llama-2-7B, interleaved with $v = 4$": _sixteen_stages_four_chunks_explained,
    "Start at $t = 8$ on `nvlink4`": _tp_orange_past_blue_on_ib,
    "Raise $h$ from 4,096 to 16,384 on NVLink": _tp_growth_with_h,
    "The TP slider stops at $t = 8$": _tp_slider_stops_at_8_in_a_node,
    "Lengthen the sequence": _tp_attention_like_s_squared,
    "$T = 4$, $D = 4$, $P = 4$": None,
    "Raise $T$ to 16 with 8 GPUs per node": _mesh_tp16_warns,
    "Switch the order to `pp-dp-tp (reversed)`": _mesh_reversed_tp_spans_nodes,
    "Set 4 GPUs per node with $T = 2$": None,
}


def _claim(bullet: str):
    starts = [key for key in CLAIMS if bullet.startswith("* " + key)]
    return starts[0] if starts else None


def test_every_bullet_is_listed():
    unlisted = [f"{name}: {bullet}" for name, bullet in things_to_try() if _claim(bullet) is None]
    assert not unlisted, "add each to CLAIMS with a check of what it says (None if it asserts nothing):\n" + "\n".join(
        unlisted
    )


@pytest.mark.parametrize("key", [key for key, check in CLAIMS.items() if check is not None])
def test_the_app_shows_what_the_bullet_says(key):
    assert any(_claim(bullet) == key for _, bullet in things_to_try()), f"no bullet starts '{key}' any more"
    CLAIMS[key](next(bullet for _, bullet in things_to_try() if _claim(bullet) == key))
