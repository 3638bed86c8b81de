"""Layers per pipeline stage and the message one stage sends the next (Lesson 4 §5, §7).

Per microbatch each boundary carries b s h e bytes forward (the activation) and the same back (its
gradient), e = ``element_bytes``. Sources: Narayanan et al. 2021 (Sec. 2.2, 4.1).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .._arguments import deprecated_alias, renamed_keyword
from ..errors import ConfigurationError
from ..memory import message_bytes
from ..units import BYTES, positive, positive_int

__all__ = ["split_layers", "boundary_message_bytes"]


@renamed_keyword(stages="pp")
def split_layers(layers, pp, split=None) -> tuple[int, ...]:
    """Layers per stage: an explicit ``split`` (p positive ints summing to layers) or an even
    split where the remainder goes one layer each to the FIRST stages (the first stage's
    embedding lookup is cheap; the last stage also runs the output layer and the loss). Lesson 4 §5.

    >>> split_layers(10, 4)
    (3, 3, 2, 2)
    """
    n = positive_int(layers, "layers")
    p = positive_int(pp, "stages")
    if p > n:
        raise ConfigurationError(f"stages={p} exceeds layers={n}: every stage needs at least one layer; valid: 1..{n}")
    if split is None:
        base, extra = divmod(n, p)
        return tuple(base + 1 if s < extra else base for s in range(p))
    if isinstance(split, (str, bytes)) or not isinstance(split, (Sequence, np.ndarray)):
        raise ConfigurationError(f"split={split!r} must be a list of {p} layer counts")
    values = [positive_int(x, f"split[{i}]") for i, x in enumerate(split)]
    if len(values) != p:
        raise ConfigurationError(f"split has {len(values)} entries but stages={p}; give {p} layer counts")
    if sum(values) != n:
        raise ConfigurationError(f"split={values} adds up to {sum(values)} layers, not layers={n}")
    return tuple(values)


def boundary_message_bytes(micro_batch_size, seq_len, hidden, element_bytes=2) -> float:
    """Bytes one stage sends the next per microbatch: b x s x h x element_bytes (the forward
    activation; the backward sends a gradient of the same size the other way), validated;
    distlab.memory.message_bytes computes it. Lesson 4 §7.

    >>> boundary_message_bytes(1, 4096, 8192)  # 64 MiB
    67108864.0
    """
    b = positive_int(micro_batch_size, "micro_batch_size")
    s = positive_int(seq_len, "seq_len")
    h = positive_int(hidden, "hidden")
    e = positive(element_bytes, BYTES, "element_bytes")
    return float(message_bytes(b, s, h, e))


#: Deprecated name of boundary_message_bytes (also accepts the old bytes_per_element=).
activation_bytes = deprecated_alias(
    renamed_keyword(bytes_per_element="element_bytes")(boundary_message_bytes),
    "pipeline.activation_bytes",
    "pipeline.boundary_message_bytes",
)
