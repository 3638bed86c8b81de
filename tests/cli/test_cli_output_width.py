"""No line a `distlab` subcommand prints by default is wider than the kit's text limit (110 characters,
tests/lessons/test_output_width.py): a student runs the commands in a notebook cell or a terminal, and JupyterLab
breaks a longer line inside words and numbers (`distlab estimate`'s error band ran to 136-147 characters, `distlab
validate`'s summaries and sources to 378). Every subcommand the parser knows runs here with a typical argument
set; one the table below does not name fails, so a new subcommand gets its width checked too. The only line allowed
past the limit is one word (a web address), which no wrapping can break."""

from __future__ import annotations

import pytest

from distlab import cli

#: the widest text output line (tests/lessons/test_output_width.py; distlab.units.TEXT_WIDTH is 100 under it)
MAX_OUTPUT_WIDTH = 110

MODEL = ["--model", "llama2-7b", "--gpus", "64", "--global-batch", "512"]

#: a typical argument set per subcommand; the commands that build files (exercises, grade, the autograder and the
#: instructor pack) print their --help, their only output that needs no course folder
TYPICAL = {
    "collective": [
        ["--size", "1GB", "--gpus", "8", "--link", "nvlink4"],
        ["--size", "4 GiB", "--gpus", "64", "--link", "nvlink4", "--gpus-per-node", "8", "--inter-link", "ib-ndr"],
    ],
    "estimate": [MODEL, [*MODEL, "--tp", "1"]],
    "exercises": [["--help"]],
    "export": [
        ["--format", "megatron", *MODEL, "--best"],
        ["--format", "megatron", *MODEL, "--best", "--partial-recompute"],
    ],
    "grade": [["--help"]],
    "gradescope-autograder": [["--help"]],
    "instructor-pack": [["--help"]],
    "memory": [["--model", "llama2-7b"], ["--model", "llama2-70b", "--tp", "8", "--pp", "4", "--zero", "1"]],
    "mesh": [["--gpus", "64", "--tp", "8", "--pp", "2"]],
    "plan": [MODEL, [*MODEL, "--partial-recompute"]],
    "schedule": [[], ["--kind", "interleaved", "--chunks", "2"]],
    "triage": [[*MODEL, "--tp", "1"]],
    "validate": [[], ["--role", "all"]],
}


def _subcommands() -> list[str]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)


def _too_wide(text: str) -> list[str]:
    return [
        f"({len(line)} chars) {line}"
        for line in text.splitlines()
        if len(line) > MAX_OUTPUT_WIDTH and " " in line.strip()  # one word (an address) cannot be wrapped
    ]


def test_every_subcommand_has_a_typical_argument_set():
    assert sorted(TYPICAL) == _subcommands()


def test_the_check_catches_a_long_line_and_spares_a_long_address():
    assert _too_wide("x " * 60) and not _too_wide("    https://example.org/" + "a" * 120)


@pytest.mark.parametrize(
    "argv", [[name, *args] for name, sets in TYPICAL.items() for args in sets], ids=lambda argv: " ".join(argv)
)
def test_no_line_of_a_subcommands_default_output_is_too_wide(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse's help width, as in a notebook's terminal
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # --help
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 0, err
    found = _too_wide(out + err)
    assert not found, f"distlab {' '.join(argv)}: lines over {MAX_OUTPUT_WIDTH} characters:\n" + "\n".join(found)
