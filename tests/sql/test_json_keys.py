"""A key twice in one object (S-1): MariaDB's JSON functions read the first of the two, Python's reader (every worker,
the SDK, the API's answers) the last. _weave_json_keys_unique, which every JSON value a caller gives the engine passes
through _weave_json_strict, must tell such a document from every other, in each of its ways of looking: a flat
object, a small document's one pattern, and the walk of a large one object by object; keys spelled with escapes
count as the characters they stand for (in a large document, in objects of up to 2048 members)."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEYS = st.sampled_from(["a", "b", "é", "a b", 'q"', "\\", ""])
SCALARS = st.one_of(st.integers(-5, 5), st.booleans(), st.none(), st.sampled_from(["x", "{,}", '"a":', "\\"]))
# Objects as lists of members, so that a key may come twice.
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.lists(st.tuples(KEYS, inner), max_size=4).map(tuple)),
                      max_leaves=12)


def _spelled(value, rng: random.Random) -> str:
    """``value`` as JSON text, its members as listed (a key twice kept), keys and strings escaped at random."""
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{_string(k, rng)}: {_spelled(v, rng)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_spelled(v, rng) for v in value) + "]"
    return _string(value, rng) if isinstance(value, str) else json.dumps(value)


def _string(text: str, rng: random.Random) -> str:
    if rng.random() < 0.3:
        return '"' + "".join(f"\\u{ord(c):04x}" for c in text) + '"'
    return json.dumps(text, ensure_ascii=rng.random() < 0.5)


def _twice(text: str) -> bool:
    """Python's own answer: does any object of the text hold a key twice?"""
    found = False

    def pairs(members):
        nonlocal found
        found = found or len({k for k, _ in members}) < len(members)
        return dict(members)

    json.loads(text, object_pairs_hook=pairs)
    return found


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=VALUES, seed=st.integers(0, 2**16))
def test_S1_a_key_twice_is_found_in_any_object_at_any_depth_however_it_is_spelled(db, value, seed):
    text = _spelled(value, random.Random(seed))
    # The same document past 16 KiB: taken object by object rather than by the one pattern, its keys escaped at
    # random as well (two spellings of one key are one key there too).
    large = '{"pad": "' + "p" * 17_000 + f'", "doc": {_spelled(value, random.Random(seed))}}}'
    want = _twice(text)
    got = db.row("SELECT _weave_json_keys_unique(%s) AS small, _weave_json_keys_unique(%s) AS large, "
                 "_weave_json_strict(%s) AS strict", text, large, text)
    assert (got["small"], got["large"], got["strict"]) == (not want, not want, not want), text


def test_S1_large_documents_are_checked_whole(db):
    """Shapes at the 1 MiB limit that a pattern over the whole text cannot finish (the server's match limit): deep
    objects side by side, one wide object, an array of small objects; each with one key twice added deep inside."""
    deep = "[" + ",".join('{"a":1,"b":' * 30 + "0" + "}" * 30 for _ in range(2_800)) + "]"
    wide = "{" + ",".join(f'"{n}":{{"a":[1,{{"b":2}}]}}' for n in range(40_000)) + "}"
    many = "[" + '{"a":1,"b":2},' * 70_000 + "{}]"
    for text in (deep, wide, many):
        assert len(text) < 1_048_576 and not _twice(text)
        twice = text[:-1] + (',{"z":{"q":[{"w":1,"w":1}]}}' if text[0] == "[" else ',"z":{"q":[{"w":1,"w":1}]}') + \
            text[-1]
        got = db.row("SELECT _weave_json_keys_unique(%s) AS once, _weave_json_keys_unique(%s) AS twice", text, twice)
        assert (got["once"], got["twice"]) == (1, 0)


def test_S1_a_key_spelled_twice_two_ways_is_found_past_16_kib_without_reading_every_string_again(db):
    """Past 16 KiB the text keeps its spelling (one spelling for every string costs about 1.6 us a byte where escapes
    are dense), so {"approved": false, ..., "\\u0061pproved": true} passed: the engine read false, a handler true.
    Each object holding an escape has its keys read decoded instead, which costs little more than the walk."""
    pad = '"' + "p" * 17_000 + '"'
    for text in (f'{{"approved": false, "pad": {pad}, "\\u0061pproved": true}}',
                 f'{{"pad": {pad}, "doc": {{"\\u00e9": 1, "\u00e9": 2}}}}',
                 f'{{"pad": {pad}, "doc": [{{"a\\"b": 1, "a\\u0022b": 2}}]}}'):
        assert _twice(text) and len(text) > 16_384
        got = db.row("SELECT _weave_json_keys_unique(%s) AS once, _weave_json_strict(%s) AS strict", text, text)
        assert (got["once"], got["strict"]) == (0, 0), text[-60:]
    for text in (f'{{"pad": {pad}, "\\u00e9": 1, "e": 2, "E": 3, "a ": 4, "a": 5}}',):
        assert not _twice(text)
        assert db.scalar("SELECT _weave_json_keys_unique(%s)", text) == 1, text[-60:]
    # Dense escapes everywhere, as Python's encoder writes text beyond ASCII, near the 1 MiB limit.
    dense = json.dumps({f"cl\u00e9_{n}": "\u00e9t\u00e9 " * 8 for n in range(6_000)})
    assert 400_000 < len(dense) < 1_048_576 and not _twice(dense)
    assert db.scalar("SELECT _weave_json_keys_unique(%s)", dense) == 1


def test_S1_a_key_spelled_twice_two_ways_is_found_in_a_document_whose_whitespace_takes_it_past_16_kib(db):
    """A document over 16 KiB keeps its spelling; its normal form, without the whitespace, may be 16 KiB or less.
    The whole-text pattern, which compares keys as written, ran on that form and answered: no key twice."""
    text = '{"approved": false,' + " " * 17_000 + '"\\u0061pproved": true}'
    assert _twice(text) and len(text) > 16_384
    got = db.row("SELECT _weave_json_keys_unique(%s) AS once, _weave_json_strict(%s) AS strict, "
                 "LENGTH(JSON_NORMALIZE(%s)) AS normal", text, text, text)
    assert got["normal"] <= 16_384 and (got["once"], got["strict"]) == (0, 0)


def test_S1_a_key_spelled_twice_two_ways_in_an_object_of_over_2048_members_is_found(db):
    """An object's keys are read decoded one by one in objects of up to 2048 members (reading them is quadratic past
    that), so {"approved": false, <2047 more>, "\\u0061pproved": true} passed: the engine read false, a handler
    true. A document with such a wide object holding an escape is given one spelling after all, and walked again."""
    filler = ", ".join(f'"f{n}": {n}' for n in range(2047))
    for text in ('{"approved": false, ' + filler + ', "\\u0061pproved": true}',
                 '{"doc": [{"approved": false, ' + filler + ', "\\u0061pproved": true}], "n": 1}',
                 '{"\\u00e9": 1, ' + filler + ', "\u00e9": 2}'):
        assert _twice(text) and len(text) > 16_384 and text.count(":") > 2048
        got = db.row("SELECT _weave_json_keys_unique(%s) AS once, _weave_json_strict(%s) AS strict", text, text)
        assert (got["once"], got["strict"]) == (0, 0), text[-60:]
    for text in ('{"\\u0061pproved": true, ' + filler + ', "e": "\\u00e9"}',
                 '{"\\u00e9": 1, ' + filler + ', "e": 2, "E": 3, "a ": 4, "a": 5}'):
        assert not _twice(text)
        assert db.scalar("SELECT _weave_json_keys_unique(%s)", text) == 1, text[-60:]


def test_S1_the_empty_key_twice_is_a_key_twice(db):
    """MariaDB's JSON_KEYS lists one key once however often it comes, but the empty key as often as it comes: an
    object counted by its keys passed {"": "A", "": "B"}, which the engine reads as A and a handler as B."""
    pad = '"' + "p" * 17_000 + '"'
    for text in ('{"": "A", "": "B"}', '{"a": 1, "": 2, "": 3}', '{"x": {"": 1, "": 2}}', '[{"": 1, "": 2}]',
                 f'{{"pad": {pad}, "": 1, "": 2}}', f'{{"pad": {pad}, "doc": {{"": 1, "": 2}}}}'):
        assert _twice(text)
        got = db.row("SELECT _weave_json_keys_unique(%s) AS once, _weave_json_strict(%s) AS strict", text, text)
        assert (got["once"], got["strict"]) == (0, 0), text[:60]
    for text in ('{"": 1, "a": ""}', '{"": {"": ""}, "b": [""]}', f'{{"pad": {pad}, "": 1, "a": ""}}'):
        assert not _twice(text)
        assert db.scalar("SELECT _weave_json_keys_unique(%s)", text) == 1, text[:60]


def test_S1_a_session_s_recursion_limit_does_not_let_a_key_twice_through(db):
    """A large document's objects are walked by a recursive query, which the session's max_recursive_iterations ends
    early and silently: a SQL caller that lowered it had a key twice below that level pass unseen. A walk cut short
    could not finish, so the document is refused."""
    deep = '{"w": 1, "w": 2}'
    for _ in range(6):
        deep = f'{{"x": {deep}, "y": 1}}'
    text = '{"pad": "' + "p" * 17_000 + f'", "doc": {deep}}}'
    assert _twice(text)
    db.execute("SET SESSION max_recursive_iterations = 3")
    try:
        assert db.scalar("SELECT _weave_json_keys_unique(%s)", text) == 0
        assert db.scalar("SELECT _weave_json_keys_unique(%s)", text.replace('"w": 2', '"v": 2')) == 0  # not finished
        assert db.scalar("SELECT _weave_json_keys_unique(%s)", '{"pad": "' + "p" * 17_000 + '", "a": {"b": 1}}') == 1
    finally:
        db.execute("SET SESSION max_recursive_iterations = DEFAULT")
