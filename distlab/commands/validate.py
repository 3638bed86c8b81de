"""distlab validate: predicted against published measured step times, with the error (distlab.validation)."""

from __future__ import annotations

import json

from ..errors import ConfigurationError
from ..units import wrap_text

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "validate"
HELP = (
    "how good is the step model: training.estimate() out of the box against published measured training runs "
    "(step time, signed error, mean and max |error| per role), with the sources cited"
)


def add_arguments(cmd) -> None:
    cmd.add_argument(
        "--role",
        default="validation",
        choices=("calibration", "validation", "reference", "all"),
        help="which runs: calibration (Narayanan et al. 2021 Table 1, may be fitted to), validation "
        "(default: other published runs, never fitted to), reference (reported, not asserted), all",
    )
    cmd.add_argument(
        "--json",
        action="store_true",
        help="print a JSON object: rows (id, source, where, role, tier, measured_s, predicted_s, "
        "error_percent, status, reason), summary per role, tiers, sources",
    )
    cmd.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="also save the predicted-vs-measured figure (log-log, y = x, +-5%% and +-15%% bands) to FILE",
    )


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def _summary_line(name: str, stats: dict) -> str:
    others = ", ".join(f"{status} {n}" for status, n in sorted(stats["status_counts"].items()) if status != "predicted")
    if stats["scored"]:
        text = (
            f"{name}: {stats['scored']} of {stats['runs']} runs scored, mean |error| "
            f"{stats['mean_abs_error_percent']:.1f}%, max |error| {stats['max_abs_error_percent']:.1f}% "
            f"({stats['max_abs_error_run']})"
        )
    else:
        text = f"{name}: none of {stats['runs']} runs scored"
    if stats["priced"] > stats["scored"]:
        text += (
            f" [all {stats['priced']} priced, over memory or not: mean |error| "
            f"{stats['mean_abs_error_percent_priced']:.1f}%, max {stats['max_abs_error_percent_priced']:.1f}%]"
        )
    return text + (f"; not scored: {others}" if others else "")


def _sources(runs) -> list[dict]:
    seen = {}
    for r in runs:
        cite = r["distlab"]["cite"]
        if cite not in seen:
            seen[cite] = {"cite": cite, "title": r["source"]["title"], "url": r["url"]}
    return list(seen.values())


def run(args) -> int:
    from .. import validation

    comparison = validation.compare(args.role)
    sources = _sources(validation.load_runs(args.role))
    if args.plot:
        from ..plots.validation import predicted_vs_measured_figure

        try:
            predicted_vs_measured_figure([r.to_dict() for r in comparison.rows]).savefig(args.plot, bbox_inches="tight")
        except (OSError, ValueError) as exc:  # a folder that does not exist, an unknown file extension
            raise ConfigurationError(f"--plot {args.plot!r}: the figure could not be written ({exc})") from None
    if args.json:
        print(json.dumps({**comparison.to_dict(), "sources": sources}, indent=2))
        return 0
    print(f"Predicted (training.estimate, out of the box) against published measured step time; role: {args.role}")
    print("error = (predicted - measured) / measured; mean and max |error| count only the runs priced that fit.")
    print("A row with no status was predicted; the others say why not.")
    width = max(len(r.id) for r in comparison.rows)
    print(f"{'run':<{width}}  {'measured s':>10}  {'predicted s':>11}  {'error':>7}  status")
    for r in comparison.rows:
        error = "-" if r.error_percent is None else f"{r.error_percent:+.1f}%"
        status = "" if r.status == "predicted" else f"{r.status}: {r.reason}"
        row = f"{r.id:<{width}}  {_seconds(r.measured_s):>10}  {_seconds(r.predicted_s):>11}  {error:>7}  {status}"
        print(wrap_text(row.rstrip(), indent=" " * 8))  # a reason on indented lines under the run's
    for priced, label, words in (
        (True, "power-capped, priced at the cap", "the model prices them at the peaks stated for the part at that "
         "cap (the runs' hardware sources); what a cap does to HBM and links is not modelled"),
        (False, "power-capped", "distlab does not model the cap (it holds no sourced measurement of a cap's effect on "
         "the part), so their error includes it"),
    ):  # fmt: skip
        capped = validation.power_capped_runs(args.role, priced=priced)
        if capped:
            print(
                wrap_text(
                    f"{label} ({len(capped)} runs: {', '.join(capped)}): their GPUs ran below the part's TDP; {words}"
                )
            )
    print()
    for role, stats in comparison.summary.items():
        print(wrap_text(_summary_line(role, stats)))
    for tier, stats in comparison.tiers.items():
        print(wrap_text("  validation, " + _summary_line(tier, stats), indent="      "))
    for key, words in (
        ("gpu", "GPU"),
        ("precision", "precision"),
        ("engine", "engine (by memory recipe)"),
        ("model", "model"),
    ):
        for value, stats in (comparison.groups or {}).get(key, {}).items():
            print(wrap_text(f"  validation by {words}, " + _summary_line(value, stats), indent="      "))
    print()
    print("sources:")
    for s in sources:
        # the address on a line of its own: wrap_text never breaks inside a word, and an address is one word
        print(wrap_text(f"  {s['cite']}: {s['title']}.", indent="      "))
        print("\n".join(f"      {url}" for url in s["url"].split(" ; ")))
    print(
        wrap_text(
            "Each run's citation, table and row, quote, mapping and assumptions: distlab/data/published_runs.json "
            "(distlab.validation.run(id))."
        )
    )
    return 0
