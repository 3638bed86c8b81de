"""Run distlab's CLI keeping every estimate handed to export.export (the one written is the last): shared by the
export tests (test_cli_export_recipes, test_cli_plan_partial_recompute)."""

from __future__ import annotations

from distlab import cli, export


def exported(monkeypatch, argv):
    """(the CLI's exit code, every estimate export.export was given) for `argv`."""
    seen = []
    real = export.export

    def keep(est, fmt, gpus_per_node=8):
        seen.append(est)
        return real(est, fmt, gpus_per_node)

    monkeypatch.setattr(export, "export", keep)
    return cli.main(argv), seen
