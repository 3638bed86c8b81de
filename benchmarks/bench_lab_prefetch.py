"""Training lab's prefetch (issue 32), kernel side: after a change, the time until every state one control change away
has been priced and sent to the browser's cache (distlab.widgets.prefetch), the longest turn it held the event loop,
what it sends, and the latency of a second change made while it fills (the time from the change's message being
ready for the loop to the end of its handler: it waits for the turn under way, then runs).

Inside an asyncio event loop, as a kernel runs callbacks; each message is JSON-encoded (as the comm would) and
dropped. The browser side (change -> changed pixels through JupyterLab) is bench_browser_pictures.py.

    python benchmarks/bench_lab_prefetch.py
"""

from __future__ import annotations

import asyncio
import json
import time

from _timing import report, summarize

#: (control, the two neighbouring values alternated)
CHANGES = [
    ("seq_len", (16384, 8192)),
    ("fabric", ("ib-xdr", "ib-ndr")),
    ("tp", (8, 4)),
    ("zero", (3, 2)),
    ("model", None),  # the next model in the dropdown and back
]
ROUNDS = 10
SECOND_AFTER_S = 0.1


async def _run() -> dict:
    from distlab.widgets.common import neighbour_values
    from distlab.widgets.training_lab import TrainingLabApp

    app = TrainingLabApp()
    sent = {"messages": 0, "bytes": 0}

    def send(message) -> None:
        sent["messages"] += 1
        sent["bytes"] += len(json.dumps(message))

    app.picture.send = send
    loop = asyncio.get_running_loop()

    async def settle() -> None:
        while app.prefetcher.future is None or not app.prefetcher.future.done():
            await asyncio.sleep(0.005)

    await settle()
    ready, turns, seconds, neighbours, sizes = [], [], [], [], []
    for name, pair in CHANGES:
        widget = getattr(app, name)
        values = pair or (neighbour_values(widget)[0], widget.value)
        for i in range(ROUNDS):
            app.prefetcher.longest_turn_s = 0.0
            sent.update(messages=0, bytes=0)
            t0 = time.perf_counter()
            widget.value = values[i % 2]
            await settle()
            ready.append(time.perf_counter() - t0)
            turns.append(app.prefetcher.longest_turn_s)
            neighbours.append(len(app.prefetcher.sent))
            sizes.append(sent["bytes"])
            # a second change while the kernel refills: the first change again, SECOND_AFTER_S later
            widget.value = values[(i + 1) % 2]
            await asyncio.sleep(SECOND_AFTER_S)
            done = loop.create_future()
            asked = time.perf_counter()

            def handle(widget=widget, value=values[i % 2], done=done, asked=asked) -> None:
                widget.value = value
                done.set_result(time.perf_counter() - asked)

            loop.call_soon(handle)
            seconds.append(await done)
            await settle()
    app.close()
    return {"ready": ready, "turns": turns, "second": seconds, "neighbours": neighbours, "bytes": sizes}


def main() -> None:
    out = asyncio.run(_run())
    print(report("lab prefetch: change -> every neighbour sent", summarize(out["ready"])))
    print(report("lab prefetch: longest turn holding the loop", summarize(out["turns"]), 16))
    print(report("lab prefetch: a second change during the refill (wait + handler)", summarize(out["second"]), 16))
    print(
        f"lab prefetch: {min(out['neighbours'])}-{max(out['neighbours'])} neighbours per state, "
        f"{min(out['bytes']) / 1e3:.0f}-{max(out['bytes']) / 1e3:.0f} kB sent per change"
    )


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
