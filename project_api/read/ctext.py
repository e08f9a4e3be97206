"""C text as TVM writes it: its identifier rule, and comments stripped before reading."""

from __future__ import annotations

import re
from typing import Optional


def sanitize(name: str) -> str:
    """A name as TVM's code generator spells it in C identifiers: every byte of its UTF-8
    that is not an ASCII letter or digit becomes '_' (two for 'è')."""
    return "".join(c if c.isascii() and c.isalnum() else "_" * len(c.encode()) for c in name)


def strip_comments(text: str) -> str:
    """``text`` without its ``/* */`` comments, in one pass (a regex would go quadratic on
    many unclosed ones)."""
    pieces, at = [], 0
    while True:
        start = text.find("/*", at)
        if start < 0:
            break
        end = text.find("*/", start + 2)
        pieces.append(text[at:start])
        if end < 0:
            return "".join(pieces)
        at = end + 2
    pieces.append(text[at:])
    return "".join(pieces)


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
