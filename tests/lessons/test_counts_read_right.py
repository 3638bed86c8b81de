"""A count of one reads in the singular wherever a student reads it: every lesson, solution and exercise notebook's
markdown, code comments and saved outputs. A student review (session 22) found "1 microbatches" in the kit's printed
text; distlab._words.counted writes a count and its noun. "p - 1 stages" (a formula, not a count of one) is not one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for folder in ("notebooks", "solutions", "exercises") for p in (ROOT / folder).glob("*.ipynb"))

#: "1" standing alone (no digit, decimal point or arithmetic before it) followed by a plural noun
ONE_PLURAL = re.compile(
    r"(?<![-−+×x/*] )(?<![\d.,])\b1 (microbatches|stages|chunks|layers|runs|GPUs|nodes|forwards|backwards|"
    r"configurations|replicas|experts|steps|tokens|sequences|buckets|days|layouts)\b"
)


def _texts(path: Path):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        yield "".join(cell["source"])
        for output in cell.get("outputs", []):
            yield "".join(output.get("text", ""))
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/"):
                    yield "".join(value)


def test_the_search_finds_a_count_of_one_with_a_plural_noun():
    assert ONE_PLURAL.search("dp=8, 1 microbatches of 4 x 8192 tokens")
    assert ONE_PLURAL.search("at most 1 stages")
    assert not ONE_PLURAL.search("crosses p - 1 stages") and not ONE_PLURAL.search("1 microbatch of")
    assert not ONE_PLURAL.search("21 stages") and not ONE_PLURAL.search("0.1 days")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_count_of_one_reads_in_the_singular(path):
    found = [m.group(0) for text in _texts(path) for m in ONE_PLURAL.finditer(text)]
    assert not found, f"{path.name}: {found}"


# --- a count written with a "(s)" noun (session 23's review: lesson 4's stage-analysis panel printed "1 sequence(s) per
# microbatch", lesson 10's placement app "8 members per node of 8, 1 node(s)"): what distlab prints around a number it
# interpolates names the count in the singular or the plural (distlab._words.counted), never both at once. The
# instructor's grading tools (distlab/grading) report on many notebooks and are left out.

PACKAGE = ROOT / "distlab"
#: a word ending in "(s)", as "node(s)" or "shared expert(s)"
EITHER_NUMBER = re.compile(r"[A-Za-z]\(s\)")


def _formatted_strings(path: Path):
    """The f-strings of a module (Python 3.11 and earlier tokenise each as one STRING token), with their lines."""
    import io
    import tokenize

    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        prefix = re.match(r"[A-Za-z]*", token.string).group(0).lower()
        if token.type == tokenize.STRING and "f" in prefix:
            yield token.start[0], token.string
        elif getattr(tokenize, "FSTRING_MIDDLE", None) == token.type:  # Python 3.12+: the f-string's text parts
            yield token.start[0], token.string


def _literal(text: str) -> str:
    """An f-string's literal text, its {...} fields (code, as "divisors(s)") taken out."""
    while re.search(r"\{[^{}]*\}", text):
        text = re.sub(r"\{[^{}]*\}", "", text)
    return text


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "grading" not in p.relative_to(PACKAGE).parts)


def test_the_search_finds_a_noun_in_both_numbers():
    assert EITHER_NUMBER.search('f"{n} node(s)"') and EITHER_NUMBER.search("{k} shared expert(s):")
    assert not EITHER_NUMBER.search("map((s) => s)") and not EITHER_NUMBER.search("latency (s)")
    assert not EITHER_NUMBER.search(_literal('f"valid cp: {short_list(divisors(s), 16)}"'))


def test_printed_counts_name_their_noun_in_one_number():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in _modules()
        for line, text in _formatted_strings(path)
        if EITHER_NUMBER.search(_literal(text))
    ]
    assert not found, "write the count with distlab._words.counted:\n" + "\n".join(found)
