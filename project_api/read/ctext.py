"""C text as TVM writes it: its identifier rule, and comments stripped before reading."""

from __future__ import annotations

import re
from typing import Optional

# A C name, for a pattern that searches text for one: it starts at a letter not preceded by a
# word character. The look-behind comes after the first letter, not before it (nor a leading
# \b), so the engine still skips quickly to the next letter (60 MiB of comment: 4 s with a
# leading \b, 0.5 s without); without any, each letter of a long identifier started a scan
# to its end (64 KiB of "a": 74 s).
NAME_PATTERN = r"[A-Za-z_](?<!\w[A-Za-z_])\w*"


# The body of a C string literal: characters other than quote, backslash and newline, or an
# escape (unambiguous, so a match is linear).
STRING_BODY = r'(?:[^"\\\n]|\\.)*'
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b",
                   "f": "\f", "v": "\v"}  # fmt: skip


def c_string_value(body: str) -> str:
    """The text a C string literal's body (between its quotes) stands for: octal, hex and
    the simple escapes decoded (bytes taken as UTF-8, as TVM's StrEscape wrote them)."""
    raw = bytearray()
    at = 0
    for escape in _ESCAPE.finditer(body):
        raw += body[at : escape.start()].encode()
        octal, hexa, char = escape.groups()
        if octal is not None:
            raw.append(int(octal, 8) & 0xFF)
        elif hexa is not None:
            raw.append(int(hexa, 16))
        else:
            raw += _SIMPLE_ESCAPES.get(char, char).encode()
        at = escape.end()
    raw += body[at:].encode()
    return raw.decode("utf-8", errors="replace")


def sanitize(name: str) -> str:
    """A name as TVM's code generator spells it in C identifiers: every byte of its UTF-8
    that is not an ASCII letter or digit becomes '_' (two for 'è')."""
    return "".join(c if c.isascii() and c.isalnum() else "_" * len(c.encode()) for c in name)


# A comment to its end; one left open runs to the end of the text, so that a match never fails
# once it has started (a failed one would be tried again at each later "/*": quadratic).
# Unrolled (runs of non-stars, then stars not before "/"): a lazy ".*?" took 0.57 s for a
# comment of 15 MiB, this 0.02 s.
_BLOCK = r"/\*[^*]*(?:\*+[^*/][^*]*)*(?:\*+/|\**\Z)"
_BLOCK_COMMENT = re.compile(_BLOCK)
_ANY_COMMENT = re.compile(r"//[^\n]*|" + _BLOCK)


def strip_comments(text: str, *, line_comments: bool = False) -> str:
    """``text`` with each ``/* */`` comment (and with ``line_comments`` each ``//`` comment,
    up to its line's end) replaced by a space, as C reads it; an unclosed ``/*`` runs to the
    end. Linear: ``_strip`` of CMSIS-NN's reader, a pattern whose match could fail, took 17 s
    for 260 KB of ``// /*`` lines. String literals are not lexed (TVM's and CMSIS-NN's hold
    no ``/*``)."""
    return (_ANY_COMMENT if line_comments else _BLOCK_COMMENT).sub(" ", text)


def search_at_word_start(pattern: re.Pattern[str], text: str) -> Optional[re.Match[str]]:
    """``pattern.search(text)``, keeping only a match that starts a word. The pattern, which
    starts with a name, has no ``\\b`` of its own: with one, Python's regex engine cannot skip
    ahead to the name, and a million repetitions of it took twice as long."""
    pos = 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            return None
        before = text[match.start() - 1] if match.start() else " "
        if not (before.isalnum() or before == "_"):
            return match
        pos = match.start() + 1
