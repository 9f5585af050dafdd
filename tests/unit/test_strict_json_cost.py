"""What the strict parser's check for duplicate keys and lone surrogates costs (S-1, Z-4): the body is parsed before
the token is checked, so a few hundred KiB sent with no credential must cost a few hundred KiB. The check built the
full path text of every value it walked: an object 200 levels deep under 1,000-character keys, then an array of
1,000 items, made each item's path a copy of a 200,000-character string (a 203 KB body took 201 MB at its peak, and
the worst shape within the 300 KiB cap some 11 GB). Paths are now built only for the problems listed, and at most
MAX_LISTED_PROBLEMS of them, their paths within MAX_LISTED_PATH_CHARS; the rest are counted."""

from __future__ import annotations

import tracemalloc

import pytest

from procedures import jsontext

KEY = "k" * 1_000


def _deep(items: list[str], depth: int = 200, head: str = '"a": 1, ') -> str:
    """An object ``depth`` levels deep under 1,000-character keys, holding an array of ``items`` at the bottom."""
    return "{" + head + f'"{KEY}": {{' * depth + '"x": [' + ", ".join(items) + "]" + "}" * depth + "}"


def _peak(text: str) -> tuple[int, jsontext.InvalidJson | None]:
    """The peak of memory allocated while ``text`` is parsed, and the refusal if it was refused."""
    tracemalloc.start()
    try:
        jsontext.parse_members(text.encode())
        refused = None
    except jsontext.InvalidJson as exc:
        refused = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, refused


@pytest.mark.parametrize("head, item", [
    ('"a": 1, "a": 1, ', "1"),  # one key twice, at the top: every value is walked
    ('"e": "\\u00e9", ', "1"),  # one escape, no problem: every value is walked too
])
def test_Z4_S1_a_deep_path_over_many_items_costs_the_body_not_a_path_per_item(head, item):
    text = _deep([item] * 1_000, head=head)
    assert len(text) < 210_000
    peak, refused = _peak(text)
    # The paths of the old walk alone came to 1,000 x 200,000 characters; the document itself is a few hundred KiB.
    assert peak < 10 * len(text), peak
    if '"a": 1, "a"' in head:
        assert refused is not None and [(e.field, e.code) for e in refused.errors] == [("a", "DUPLICATE_JSON_KEY")]
    else:
        assert refused is None


def test_Z4_S1_problems_past_the_listed_paths_limit_are_counted_and_their_paths_never_built():
    """Thousands of lone surrogates at the bottom of that deep object: each path is some 200,000 characters, so the
    first is listed whole and the others counted; the peak stays that of the document and one path."""
    text = _deep(['"\\ud800"'] * 2_000, head="")
    peak, refused = _peak(text)
    assert refused is not None and peak < 10 * len(text), peak
    [first] = refused.errors
    assert first.code == "INVALID_TEXT" and first.field == ".".join([KEY] * 200) + ".x[0]" and refused.unlisted == 1_999
    assert str(refused).endswith("and 1,999 more, not listed") and "(2000 problems)" in str(refused)


def test_Z4_S1_the_first_problems_are_listed_in_document_order_and_the_rest_counted():
    items = ['"\\ud800"'] * (jsontext.MAX_LISTED_PROBLEMS + 5)
    refused = _peak('{"n": 1, "n": 2, "list": [' + ", ".join(items) + "]}")[1]
    assert refused is not None and len(refused.errors) == jsontext.MAX_LISTED_PROBLEMS and refused.unlisted == 6
    assert refused.errors[0] == ("n", "DUPLICATE_JSON_KEY", 'key "n" appears more than once in one object')
    assert [e.field for e in refused.errors[1:]] == [f"list[{n}]" for n in range(jsontext.MAX_LISTED_PROBLEMS - 1)]


def test_S1_an_object_of_many_keys_each_twice_lists_each_key_once_in_the_order_first_repeated():
    """The keys repeated in one object were kept in a list searched for each repeat: the square of their number."""
    text = "{" + ", ".join(f'"k{n}": 1, "k{n}": 2, "k{n}": 3' for n in (3, 1, 2)) + "}"
    refused = _peak(text)[1]
    assert refused is not None and [e.field for e in refused.errors] == ["k3", "k1", "k2"]


def test_Z4_M2_a_definition_of_thousands_of_problems_deep_in_its_input_lists_the_first_and_counts_the_rest():
    """A definition is checked before the token as well (POST /definitions), and its checker listed every problem with
    its path: 8,000 bad expressions 27 levels under 1,000-character keys (147 KB) took 1.09 GB at its peak. It lists
    within the same limits as the parser now, and counts the rest."""
    from procedures import definitions

    inner: object = ["$.input.a b"] * 8_000
    for _ in range(27):
        inner = {KEY: inner}
    doc = {"name": "x", "steps": [{"key": "a", "type": "TASK", "queue": "q", "handler": "h", "handler_version": "1",
                                   "input": inner}]}
    tracemalloc.start()
    try:
        with pytest.raises(definitions.DefinitionError) as refused:
            definitions.validate(doc)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 20_000_000, peak  # the document parsed is some 150 KB; its paths listed in full, a gigabyte
    listed = refused.value.errors
    assert 1 <= len(listed) <= jsontext.MAX_LISTED_PROBLEMS
    assert sum(len(e.field) for e in listed) <= max(len(listed[0].field), jsontext.MAX_LISTED_PATH_CHARS)
    assert len(listed) + refused.value.unlisted == 16_000  # each: a bad expression, at a place too deep to write
    assert [e.code for e in listed[:2]] == ["BAD_EXPRESSION", "INVALID_VALUE"]
    assert "(16000 problems)" in str(refused.value) and "more, not listed" in str(refused.value)
