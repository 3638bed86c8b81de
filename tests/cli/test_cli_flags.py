"""One flag name per concept across the subcommands (issue 31): `distlab memory --seq-len` and `distlab estimate
--seq` named one sequence length twice, `plan --max-nodes-per-token` and `export --max-nodes` one routing limit, and
`export` lacked `--moe-imbalance`. The checks run over the argparse parsers themselves, so a new subcommand is held
to them too."""

from __future__ import annotations

import argparse
import itertools

import pytest

from distlab.cli import build_parser


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _visible(parser) -> dict[str, argparse.Action]:
    """--flag -> action, for the flags --help shows (hidden aliases left out)."""
    return {
        option: action
        for action in parser._actions
        if action.option_strings and action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--")
    }


SUBCOMMANDS = _subcommands()
VISIBLE = {name: _visible(p) for name, p in SUBCOMMANDS.items()}


def _word_prefix(short: str, long: str) -> bool:
    return long.startswith(short + "-")


def test_a_shorter_spelling_of_another_subcommands_flag_is_not_shown():
    # "--seq" against "--seq-len", "--max-nodes" against "--max-nodes-per-token": a flag whose name is the first words
    # of a flag in another subcommand names the same thing twice, unless one subcommand takes both (--tp and
    # --tp-overlap: two settings side by side)
    together = {(a, b) for flags in VISIBLE.values() for a, b in itertools.permutations(flags, 2)}
    every = {flag for flags in VISIBLE.values() for flag in flags}
    twice = sorted(
        (short, long)
        for short, long in itertools.permutations(every, 2)
        if _word_prefix(short, long) and (short, long) not in together
    )
    assert not twice, f"one concept, two names across subcommands: {twice}"


def test_each_flag_is_named_after_what_it_sets():
    # the flag's name is its destination's (--seq-len sets seq_len); the only exception: a choice between constants
    # stored in one destination (grade --container / --trusted set the sandbox)
    wrong = sorted(
        (name, flag, action.dest)
        for name, flags in VISIBLE.items()
        for flag, action in flags.items()
        if flag[2:].replace("-", "_") != action.dest and not isinstance(action, argparse._StoreConstAction)
    )
    assert not wrong, f"flags named apart from what they set: {wrong}"


MOE_ROUTING = ("--moe-imbalance", "--capacity-factor", "--max-nodes-per-token")


@pytest.mark.parametrize("name", sorted(n for n, flags in VISIBLE.items() if any(f in flags for f in MOE_ROUTING)))
def test_a_subcommand_with_moe_routing_takes_all_of_it(name):
    missing = [flag for flag in MOE_ROUTING if flag not in VISIBLE[name]]
    assert not missing, f"distlab {name} lacks {missing}"


@pytest.mark.parametrize(
    "argv, dest, value",
    [
        # the older spellings still parse, hidden from --help, into the one destination
        (
            ["estimate", "--model", "llama3.1-8b", "--gpus", "8", "--global-batch", "8", "--seq", "2048"],
            "seq_len",
            2048,
        ),
        (
            ["estimate", "--model", "llama3.1-8b", "--gpus", "8", "--global-batch", "8", "--seq-len", "2048"],
            "seq_len",
            2048,
        ),
        (
            [
                "export",
                "--format",
                "megatron",
                "--model",
                "deepseek-v3",
                "--gpus",
                "2048",
                "--global-batch",
                "8",
                "--max-nodes",
                "4",
            ],
            "max_nodes_per_token",
            4,
        ),
    ],
)
def test_an_older_spelling_still_reads(argv, dest, value):
    assert getattr(build_parser().parse_args(argv), dest) == value
