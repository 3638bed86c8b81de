"""What the subcommands print reads right: the help names every choice the catalog holds, a count of one takes the
singular, and `distlab validate` prints each priced run on one line (a student review of session 22 found `--node`'s
help naming 3 of the 6 nodes, "1 microbatches", and every one of validate's 84 rows breaking its status onto a line of
its own)."""

from __future__ import annotations

import re

import pytest

from distlab import cli, hardware, validation

#: a count of one followed by a plural noun the commands print
ONE_PLURAL = re.compile(r"\b1 (microbatches|stages|chunks|layers|runs|GPUs|nodes)\b")


@pytest.mark.parametrize("command", ["estimate", "plan", "export", "triage"])
def test_the_help_names_every_catalog_node_and_fabric(capsys, command):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps inside hyphenated names
    for name in hardware.NODES:
        assert name in text, name
    for name, link in hardware.LINKS.items():
        assert (name in text) == (link.kind == "inter-node"), name


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--model", "llama2-7b", "--gpus", "64", "--global-batch", "64", "--tp", "1", "--pp", "1"],
        ["triage", "--model", "llama2-7b", "--gpus", "64", "--global-batch", "64", "--tp", "1", "--pp", "1"],
        ["schedule", "--kind", "1f1b", "--stages", "1", "--microbatches", "1"],
        ["memory", "--model", "mixtral-8x7b", "--dp", "8", "--ep", "8"],
    ],
)
def test_a_count_of_one_takes_the_singular(capsys, argv):
    cli.main(argv)
    out = capsys.readouterr().out
    assert out.strip()
    assert not ONE_PLURAL.search(out), ONE_PLURAL.search(out).group(0)
    if argv[0] in ("estimate", "schedule", "memory"):
        assert re.search(r"\b1 microbatch\b", out)


def test_validate_prints_each_priced_run_on_one_line(capsys):
    assert cli.main(["validate", "--role", "all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for r in validation.compare("all").rows:
        if r.status != "predicted":
            continue
        (line,) = [x for x in lines if x.startswith(r.id + " ")]
        assert line.rstrip().endswith(f"{r.error_percent:+.1f}%"), line
    assert not any(x.strip() == "predicted" for x in lines)
