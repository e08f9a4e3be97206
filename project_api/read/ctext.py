"""C text as TVM writes it: its identifier rule, and comments stripped before reading."""

from __future__ import annotations


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
