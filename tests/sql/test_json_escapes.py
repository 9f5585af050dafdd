"""One spelling for every JSON string (F-5, F-6, S-4): _weave_json_escapes_canonical gives every string of a document
the escapes it must have and no other, whatever escapes the sender chose. The canonical form is exactly what
Python's json.dumps(..., ensure_ascii=False) writes (the short escapes, \\u00xx in lower case for the other control
characters, every other character as itself), so the property below checks the routine against it, for strings
spelled as encoders write them: every character beyond ASCII escaped (json.dumps's default, surrogate pairs beyond
the BMP), "/" escaped (PHP), escapes in upper case, and every character escaped."""

from __future__ import annotations

import json
import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Characters from every range whose escapes the routine treats apart: control characters, the quote and the
# backslash, "/", Latin, other scripts of the BMP, and characters beyond it.
CHARS = st.one_of(st.characters(max_codepoint=0x7F), st.characters(min_codepoint=0x80, max_codepoint=0x2FF),
                  st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF),
                  st.characters(min_codepoint=0x1F600, max_codepoint=0x1F64F), st.sampled_from('"\\/\n\t\x00\x1f'))
TEXT = st.text(CHARS, max_size=40)


def _all_escaped(text: str) -> str:
    """``text`` as a JSON string with every character escaped, surrogate pairs beyond the BMP."""
    units = text.encode("utf-16-be")
    return '"' + "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2)) + '"'


def _spellings(value: list[str], seed: int) -> list[str]:
    ascii_only = json.dumps(value)
    # Escapes' hex digits in upper case (an escaped backslash is passed over whole: what follows it is text).
    upper = re.sub(r"\\\\|\\u[0-9a-f]{4}", lambda m: m.group(0).upper().replace("\\U", "\\u"), ascii_only)
    mixed = random.Random(seed)
    return [ascii_only, ascii_only.replace("/", "\\/"), upper,
            "[" + ", ".join(_all_escaped(s) if mixed.random() < 0.5 else json.dumps(s) for s in value) + "]"]


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.lists(TEXT, min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_F5_F6_S4_every_spelling_of_a_string_has_one_canonical_form(db, value, seed):
    canonical = json.dumps(value, ensure_ascii=False)
    for spelled in _spellings(value, seed):
        assert json.loads(spelled) == value
        got = db.scalar("SELECT _weave_json_escapes_canonical(%s)", spelled)
        assert got == canonical, (spelled, got, canonical)


def test_F5_a_long_run_of_escapes_and_one_cut_by_what_must_stay_escaped_are_decoded_exactly(db):
    """A run longer than the routine decodes in one step (1,024 escapes), and runs broken by a quote, a control
    character, a lone surrogate or an escaped backslash followed by the letters of an escape."""
    text = "中文" * 1500 + "é😀"
    assert db.scalar("SELECT _weave_json_escapes_canonical(%s)", json.dumps([text])) == json.dumps([text],
                                                                                                  ensure_ascii=False)
    for spelled, canonical in [(r'"\u4e2d\u0022\u6587"', '"中\\"文"'),
                               (r'"\u4e2d\u000A\u6587\u001f"', '"中\\n文\\u001f"'),
                               (r'"\u4e2d\ud800\u6587"', '"中\\ud800文"'),
                               (r'"\u4e2d\udc00\ud83d\ude00"', '"中\\udc00😀"'),
                               (r'"\u4e2d\\u6587\u6587"', '"中\\\\u6587文"'),
                               (r'"\u4e2d\u005C\u6587"', '"中\\\\文"')]:
        assert db.scalar("SELECT _weave_json_escapes_canonical(%s)", spelled) == canonical, spelled
