"""Internal routines installed inline: the installer copies their bodies into their callers.

A nested ``CALL`` is a statement the server counts, with a frame of variables it builds: on a decision's path of
eight or nine nested calls that was a sixth of its statements. A routine whose file carries the line
``-- Inlined: ...`` is still written, read and tested as one routine with one definition, and still installed
under its own name; but every ``CALL`` of it from another routine is replaced, in the text the installer
sends, by a block that does what the call did:

    BEGIN  -- inline CALL _weave_x(v_a, 7, v_out)
        DECLARE i12_in_a BIGINT UNSIGNED DEFAULT v_a;   -- each IN and INOUT parameter, from its argument
        DECLARE i12_in_b INT DEFAULT 7;
        DECLARE i12_out_c VARCHAR(16);                  -- each OUT parameter, NULL as a call's starts
        BEGIN ... the routine's body, its parameters and labels renamed ... END;
        SET v_out = i12_out_c;                          -- OUT and INOUT parameters back into their arguments
    END;

The routine's own variables keep their names in their own block, where they shadow any of the caller's. An
error leaves the block as it leaves a call, before any argument is set, into the caller's handlers; an exit
handler of the routine leaves its body as it left the call. The one difference a block could make is under a
caller's CONTINUE handler, which would resume inside the routine's body where the call resumed after it: a
call in the scope of one stays a call. Inlined routines inline their own inlined callees first.

What it saves is statements, not time: measured on MariaDB 10.11, a call of a routine with a dozen variables costs
about 7 us against 5 for its block, and each variable a block declares about 0.25 us when the block runs (0.07 when
it does not: the frame is built for the whole routine); each decision's database CPU stayed within the spread of
its runs. What it costs is the server's memory: every connection keeps each routine it has called parsed, about
85 bytes per byte of text, and each copy of an inlined body is parsed again (a connection that has called every
procedure holds 46 MB with the routines marked now, 37 MB with none, 70 MB when the ROOT walk, Send's acceptance,
the authorisation and a report's chain were inlined as well). So the routines marked are small ones that a
decision runs on every path: the openings of a transaction, a candidate and a step, the checkpoint decision and
its kind dispatch, the step's close and the instance's answer; and a routine called from one place only (a POLL
round's outcome, inside the inbox's apply), which a connection parses once whether it is called or copied.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

MARKER = re.compile(r"^-- Inlined:", re.MULTILINE)

_TOKEN = re.compile(r"""
      (?P<comment>--[ \t][^\n]*|--\n|/\*.*?\*/)
    | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<quoted>`[^`]*`)
    | (?P<variable>@@?[\w.$]+)
    | (?P<word>\w+)
    | (?P<space>\s+)
    | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str

    def word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


def tokens(text: str) -> list[Token]:
    out = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        assert kind is not None
        out.append(Token(kind, match.group()))
    return out


def _significant(toks: list[Token], start: int) -> Iterator[int]:
    """The indexes of the tokens from ``start`` on that are neither space nor comment."""
    for i in range(start, len(toks)):
        if toks[i].kind not in ("space", "comment"):
            yield i


def _next(toks: list[Token], start: int) -> int:
    return next(_significant(toks, start), len(toks))


def _closing(toks: list[Token], opening: int) -> int:
    """The index of the ``)`` that closes the ``(`` at ``opening``."""
    depth = 0
    for i in range(opening, len(toks)):
        if toks[i].text == "(":
            depth += 1
        elif toks[i].text == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced parentheses")


def _split(toks: list[Token]) -> list[str]:
    """Comma-separated items at the top level of a token list, each as text without its outer space."""
    items: list[list[Token]] = [[]]
    depth = 0
    for tok in toks:
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth -= 1
        if tok.text == "," and depth == 0:
            items.append([])
        else:
            items[-1].append(tok)
    return ["".join(t.text for t in item if t.kind != "comment").strip() for item in items]


@dataclass(frozen=True)
class Parameter:
    mode: str  # IN, OUT or INOUT
    name: str
    type: str


@dataclass(frozen=True)
class Procedure:
    parameters: list[Parameter]
    body: list[Token]  # from its BEGIN to its END
    labels: frozenset[str]


def parse(text: str) -> Procedure:
    """The parameters and body of a file's one ``CREATE PROCEDURE``."""
    toks = tokens(text)
    sig = list(_significant(toks, 0))
    at = next(k for k, i in enumerate(sig) if toks[i].word("PROCEDURE"))
    name = toks[sig[at + 1]].text.strip("`")
    opening = sig[at + 2]
    closing = _closing(toks, opening)
    parameters = []
    for item in _split(toks[opening + 1:closing]):
        if not item:
            continue
        mode, pname, ptype = item.split(None, 2)
        if mode.upper() not in ("IN", "OUT", "INOUT"):
            raise ValueError(f"{name}: give every parameter its mode (IN, OUT or INOUT): {item}")
        if not re.match(r"(in|out|io)_\w+$", pname):
            raise ValueError(f"{name}: parameter {pname} is not named in_, out_ or io_ "
                             "(renaming it could rename a column)")
        parameters.append(Parameter(mode.upper(), pname, ptype))
    begin = next(i for i in _significant(toks, closing + 1) if toks[i].word("BEGIN"))
    end = max(i for i in range(len(toks)) if toks[i].word("END"))
    body = toks[begin:end + 1]
    labels = frozenset(body[i].text for i in range(len(body) - 1)
                       if body[i].kind == "word" and body[i + 1].text == ":"
                       and _followed_by_loop(body, i + 2))
    _check_names(name, body, {p.name for p in parameters}, labels)
    return Procedure(parameters, body, labels)


def _check_names(name: str, body: list[Token], parameters: set[str], labels: frozenset[str]) -> None:
    """Renaming a parameter or a label renames every word of its name: refuse a body where that word also
    names something else (a column, a table)."""
    sig = [t for t in body if t.kind not in ("space", "comment")]
    renamed = parameters | labels
    lowered = {word.lower() for word in renamed}
    for k, tok in enumerate(sig):
        before = sig[k - 1] if k else Token("space", "")
        after = sig[k + 1] if k + 1 < len(sig) else Token("space", "")
        if tok.kind != "word":
            continue
        if tok.text in labels and not (after.text == ":" or before.word("END", "LEAVE", "ITERATE")):
            raise ValueError(f"{name}: label {tok.text} also names something else")
        if tok.text in parameters and (before.text == "." or after.text == "."):
            raise ValueError(f"{name}: parameter {tok.text} also names a column")
        if tok.text.lower() in lowered and tok.text not in renamed:
            raise ValueError(f"{name}: {tok.text} differs from a parameter or label only in case")


def _followed_by_loop(toks: list[Token], start: int) -> bool:
    i = _next(toks, start)
    return i < len(toks) and toks[i].word("BEGIN", "LOOP", "WHILE", "REPEAT")


class Inliner:
    """Expands the calls of inlined routines in routine texts: ``inliner.expand(text)``."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.inlined = {name for name, text in texts.items() if MARKER.search(text)}
        self._procedures = {name: parse(texts[name]) for name in self.inlined}
        names = "|".join(sorted(self.inlined)) or "(?!)"
        self._calls = re.compile(rf"\bCALL\s+({names})\s*\(", re.IGNORECASE)
        self._numbers = itertools.count(1)
        self._expanding: list[str] = []

    def expand(self, text: str) -> str:
        """The text with every call of an inlined routine that can be inlined replaced by its block. The blocks
        are numbered within this text alone, so that what a routine installs (and its digest) depends only on its
        own file and the routines inlined into it, never on which other routines ship (R-15)."""
        if not self._calls.search(text):
            return text
        self._numbers = itertools.count(1)
        return "".join(t.text for t in self._expand(tokens(text)))

    def _body(self, name: str) -> list[Token]:
        """The inlined routine's body with its own inlined calls expanded, numbered on in the text being expanded."""
        if name in self._expanding:
            raise ValueError(f"inlined routines call each other in a cycle: {' -> '.join(self._expanding)}")
        self._expanding.append(name)
        try:
            return self._expand(self._procedures[name].body)
        finally:
            self._expanding.pop()

    def _expand(self, toks: list[Token]) -> list[Token]:
        out: list[Token] = []
        # What is open where a token stands: a CASE (expression or statement) or a BEGIN block, with whether the
        # block declares a CONTINUE handler.
        opened: list[tuple[str, bool]] = []
        i = 0
        while i < len(toks):
            tok = toks[i]
            if tok.word("CASE"):
                opened.append(("CASE", False))
            elif tok.word("BEGIN"):
                opened.append(("BLOCK", False))
            elif tok.word("END"):
                after = _next(toks, i + 1)
                if after >= len(toks) or not toks[after].word("IF", "WHILE", "LOOP", "REPEAT"):
                    opened.pop()  # END CASE, a CASE expression's END, or a block's
            elif tok.word("DECLARE"):
                words = [toks[k].text.upper() for k in itertools.islice(_significant(toks, i + 1), 2)]
                if words == ["CONTINUE", "HANDLER"]:
                    opened[-1] = ("BLOCK", True)
            elif tok.word("CALL") and not any(handler for _, handler in opened):
                site = self._call_site(toks, i)
                if site is not None:
                    name, args, semicolon = site
                    out.extend(self._block(name, args))
                    i = semicolon + 1
                    continue
            out.append(tok)
            i += 1
        return out

    def _call_site(self, toks: list[Token], at: int) -> tuple[str, list[str], int] | None:
        sig = list(itertools.islice(_significant(toks, at + 1), 2))
        if len(sig) < 2 or toks[sig[0]].text not in self.inlined or toks[sig[1]].text != "(":
            return None
        closing = _closing(toks, sig[1])
        semicolon = _next(toks, closing + 1)
        if semicolon >= len(toks) or toks[semicolon].text != ";":
            raise ValueError(f"CALL {toks[sig[0]].text}(...) not ended by ';'")
        args = _split(toks[sig[1] + 1:closing]) if closing > sig[1] + 1 else []
        return toks[sig[0]].text, args, semicolon

    def _block(self, name: str, args: list[str]) -> list[Token]:
        proc = self._procedures[name]
        if len(args) != len(proc.parameters):
            raise ValueError(f"CALL {name}: {len(args)} arguments for {len(proc.parameters)} parameters")
        body = self._body(name)
        prefix = f"i{next(self._numbers)}_"
        renamed = {p.name for p in proc.parameters} | proc.labels
        lines = [f"BEGIN  -- inline CALL {name}({', '.join(' '.join(a.split()) for a in args)})\n"]
        for param, arg in zip(proc.parameters, args, strict=True):
            default = f" DEFAULT {arg}" if param.mode in ("IN", "INOUT") else ""
            lines.append(f"DECLARE {prefix}{param.name} {param.type}{default};\n")
        text = "".join(lines)
        out = tokens(text)
        out.extend(Token(t.kind, prefix + t.text) if t.kind == "word" and t.text in renamed else t for t in body)
        out.append(Token("other", ";"))
        for param, arg in zip(proc.parameters, args, strict=True):
            if param.mode in ("OUT", "INOUT"):
                out.extend(tokens(f"\nSET {arg} = {prefix}{param.name};"))
        out.extend(tokens("\nEND;"))
        return out
