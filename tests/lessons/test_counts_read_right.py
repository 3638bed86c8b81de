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
    """The notebook's cells (source, saved outputs) and the texts of its saved widget state: what a student opening
    it sees before running a cell (lesson 4's saved stage-analysis panel still read "1 sequence(s) per microbatch"
    after the app was fixed, a student's review)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        yield "".join(cell["source"])
        for output in cell.get("outputs", []):
            yield "".join(output.get("text", ""))
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/"):
                    yield "".join(value)
    state = nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    yield from _strings(state.get("state", {}))


def _strings(value):
    """Every string in a JSON value, a picture's module source (_esm, code, not text shown) left out."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("_esm", "_css"):
                yield from _strings(item)


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
# interpolates names the count in the singular or the plural (distlab._words.counted), never both at once; the
# instructor's grading tools (distlab/grading) too ("1 notebook(s) refused", session 24).

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
    return sorted(PACKAGE.rglob("*.py"))


def test_the_search_finds_a_noun_in_both_numbers():
    assert EITHER_NUMBER.search('f"{n} node(s)"') and EITHER_NUMBER.search("{k} shared expert(s):")
    assert not EITHER_NUMBER.search("map((s) => s)") and not EITHER_NUMBER.search("latency (s)")
    assert not EITHER_NUMBER.search(_literal('f"valid cp: {short_list(divisors(s), 16)}"'))


#: a count and then a noun in both numbers, as a lesson prints it ("1 bucket(s): 472 ms", lesson 3) or writes the
#: f-string that prints it ("{b:>2} bucket(s):")
COUNT_EITHER_NUMBER = re.compile(r"(?:\d|\})\s?[A-Za-z][A-Za-z-]*\(s\)")


def test_the_search_finds_a_count_with_a_noun_in_both_numbers():
    assert COUNT_EITHER_NUMBER.search(" 1 bucket(s): 472 ms") and COUNT_EITHER_NUMBER.search('f"{b:>2} bucket(s):"')
    assert COUNT_EITHER_NUMBER.search("1 sequence(s) per microbatch")
    assert not COUNT_EITHER_NUMBER.search("measureText(s).width") and not COUNT_EITHER_NUMBER.search("latency (s)")
    assert not COUNT_EITHER_NUMBER.search(" 1 bucket:  472 ms")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_lessons_counts_name_their_noun_in_one_number(path):
    found = [m.group(0) for text in _texts(path) for m in COUNT_EITHER_NUMBER.finditer(text)]
    assert not found, f"{path.name}: {found}"


def test_printed_counts_name_their_noun_in_one_number():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in _modules()
        for line, text in _formatted_strings(path)
        if EITHER_NUMBER.search(_literal(text))
    ]
    assert not found, "write the count with distlab._words.counted:\n" + "\n".join(found)
