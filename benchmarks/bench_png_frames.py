"""CPU time to PNG-encode one frame the apps send (distlab.widgets.canvas.encode_png), against Pillow's encoder at
the same zlib level, on the frames lessons 3's and 10's matplotlib apps draw as their dropdowns move.

Every frame a matplotlib-drawn app sends (ipympl's blitted update, a frame cache's neighbour) is encoded in the
kernel's turn; per frame: median and p95 of the CPU time over every frame, each encoded 5 times, and the mean size.
"""

from __future__ import annotations

import io
import time

import numpy as np
from _timing import report, summarize


def frames() -> list[np.ndarray]:
    """The RGBA frames OverlapApp (lesson 3) and AllToAllApp (lesson 10) encode as each dropdown takes its first
    four options."""
    import distlab.widgets.canvas as canvas
    import distlab.widgets.framecache as framecache
    from distlab.widgets.data_parallel_zero import OverlapApp
    from distlab.widgets.mixture_of_experts import AllToAllApp

    seen: list[np.ndarray] = []
    encode = canvas.encode_png

    def capture(rgba):
        seen.append(np.array(rgba, copy=True))
        return encode(rgba)

    canvas.encode_png = framecache.encode_png = capture
    try:
        for kind in (OverlapApp, AllToAllApp):
            app = kind()
            app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
            app.fig.canvas.draw()
            for control in [w for w in vars(app).values() if hasattr(w, "options") and hasattr(w, "value")]:
                for option in list(control.options)[:4]:
                    control.value = option[1] if isinstance(option, tuple) else option
    finally:
        canvas.encode_png = framecache.encode_png = encode
    return seen


def pillow(rgba: np.ndarray, level: int) -> bytes:
    from PIL import Image

    with io.BytesIO() as out:
        Image.fromarray(rgba).save(out, format="png", compress_level=level)
        return out.getvalue()


def timed(encode, shots: list[np.ndarray], repeats: int = 5) -> tuple[list[float], float]:
    """CPU seconds per frame (each frame's mean over `repeats`) and the mean size in bytes."""
    samples, size = [], 0
    for rgba in shots:
        start = time.process_time()
        for _ in range(repeats):
            png = encode(rgba)
        samples.append((time.process_time() - start) / repeats)
        size += len(png)
    return samples, size / len(shots)


def main() -> None:
    from distlab.widgets.canvas import FRAME_COMPRESSION, encode_png

    shots = frames()
    ours, ours_size = timed(encode_png, shots)
    theirs, their_size = timed(lambda a: pillow(a, FRAME_COMPRESSION), shots)
    print(f"{len(shots)} frames of {shots[0].shape[1]} x {shots[0].shape[0]} pixels")
    print(report("PNG frame, distlab's encoder (CPU)", summarize(ours)) + f"  {ours_size / 1e3:.1f} kB a frame")
    pillows = summarize(theirs)
    print(f"{'PNG frame, Pillow at the same level (CPU)':<48} median {pillows['median_ms']:8.2f} ms   "
          f"p95 {pillows['p95_ms']:8.2f} ms   {their_size / 1e3:.1f} kB a frame (for comparison)")


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
