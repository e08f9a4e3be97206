"""JSON from untrusted text, with nesting too deep to decode reported like any syntax error.

Python's decoder recurses once per ``[`` or ``{`` and raises ``RecursionError`` past the
interpreter's limit; :func:`parse_json` turns that into a :class:`json.JSONDecodeError` at the
bracket that went too deep, so every caller's existing error path (member, line, column)
covers it.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Union

_OPENERS = frozenset("[{")
_CLOSERS = frozenset("]}")


def parse_json(text: Union[str, bytes]) -> Any:
    """``json.loads`` that raises ``JSONDecodeError`` (never ``RecursionError``)."""
    try:
        return json.loads(text)
    except RecursionError:
        document = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise json.JSONDecodeError(
            "nested too deeply", document, _deepest_bracket(document)
        ) from None


def _deepest_bracket(text: str) -> int:
    """Where the nesting gets too deep (or is deepest): found only on failure, and stops
    early, so a huge document costs no more than its first few thousand brackets."""
    too_deep = max(sys.getrecursionlimit() - 100, 100)
    depth = best = where = 0
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _OPENERS:
            depth += 1
            if depth > best:
                best, where = depth, index
                if depth > too_deep:
                    break
        elif char in _CLOSERS:
            depth -= 1
    return where
