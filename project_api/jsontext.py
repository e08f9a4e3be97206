"""JSON from untrusted text, with every failure of the decoder reported like a syntax error.

Python's decoder recurses once per ``[`` or ``{`` and raises ``RecursionError`` past the
interpreter's limit, and refuses an integer of more than ``sys.get_int_max_str_digits()``
digits with a plain ``ValueError``; :func:`parse_json` turns both into a
:class:`json.JSONDecodeError` at the bracket or number at fault, so every caller's existing
error path (member, line, column) covers them. With ``unique_keys`` an object that names a
key twice is a :class:`DuplicateKeyError` (a ``JSONDecodeError``) at the second one: the
decoder would silently keep the last value.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Dict, List, Optional, Tuple, Union

_OPENERS = frozenset("[{")
_CLOSERS = frozenset("]}")
# A string literal (one left open runs to the end of the text: were it to fail, the scan would
# start again inside it, at each quote: quadratic), or a number with its optional fraction
# and exponent (outside strings).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|(-?\d+)(\.\d+)?([eE][-+]?\d+)?', re.DOTALL)


class DuplicateKeyError(json.JSONDecodeError):
    """An object of the document names ``key`` twice (``pos`` is the second occurrence)."""

    def __init__(self, key: str, document: str, pos: int) -> None:
        super().__init__(f"duplicate key {key!r}", document, pos)
        self.key = key


def json_problem(err: json.JSONDecodeError) -> Tuple[str, str]:
    """``(location, problem)`` of a refused document, for a ValidationError naming its member."""
    where = f"line {err.lineno} column {err.colno}"
    if isinstance(err, DuplicateKeyError):
        return where, f"duplicate key {err.key!r} (a key may appear once per object)"
    return where, f"not valid JSON: {err.msg}"


def parse_json(text: Union[str, bytes], *, unique_keys: bool = False) -> Any:
    """``json.loads`` that raises ``JSONDecodeError`` for whatever the decoder refuses
    (never ``RecursionError`` or a bare ``ValueError``; bytes that are not UTF-8 still raise
    ``UnicodeDecodeError``). ``unique_keys`` refuses a key given twice in one object."""
    duplicated: List[bool] = []

    def pairs_hook(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
        value = dict(pairs)
        if len(value) != len(pairs):
            duplicated.append(True)
        return value

    hook = pairs_hook if unique_keys else None
    try:
        data = json.loads(text, object_pairs_hook=hook)
    except RecursionError:
        document = _document(text)
        raise json.JSONDecodeError(
            "nested too deeply", document, _deepest_bracket(document)
        ) from None
    except (json.JSONDecodeError, UnicodeError):
        raise
    except ValueError as err:  # e.g. "Exceeds the limit (4300 digits) for integer string ..."
        document = _document(text)
        where = _long_integer(document)
        if where is None:
            raise json.JSONDecodeError(str(err), document, 0) from None
        raise json.JSONDecodeError(
            f"integer of {where[1]} digits (the limit is {_max_digits()})", document, where[0]
        ) from None
    if duplicated:
        document = _document(text)
        key, pos = _first_duplicate(document)
        raise DuplicateKeyError(key, document, pos)
    return data


def _document(text: Union[str, bytes]) -> str:
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else text


def _max_digits() -> int:
    getter = getattr(sys, "get_int_max_str_digits", None)
    return int(getter()) if getter is not None else 0


def _long_integer(text: str) -> Optional[Tuple[int, int]]:
    """(offset, digits) of the first integer too long for ``int()``, outside strings."""
    limit = _max_digits()
    for match in _TOKEN.finditer(text):
        digits = match.group(1)
        if digits is None or match.group(2) or match.group(3):
            continue  # a string, or a float (floats have no digit limit)
        count = len(digits.lstrip("-"))
        if limit and count > limit:
            return match.start(), count
    return None


def _first_duplicate(text: str) -> Tuple[str, int]:
    """The first key repeated within one object of valid JSON ``text``, and its offset.

    Only called once the decoder accepted ``text`` and saw a duplicate, so the scan can
    assume well-formed JSON: a stack of open containers, each object with its keys so far.
    """
    stack: List[Optional[set]] = []  # a set of keys per open object, None per open array
    expect_key = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == '"':
            match = _TOKEN.match(text, index)
            end = match.end() if match else len(text)
            if expect_key and stack and stack[-1] is not None:
                key = json.loads(text[index:end])
                if key in stack[-1]:
                    return key, index
                stack[-1].add(key)
                expect_key = False
            index = end
            continue
        if char == "{":
            stack.append(set())
            expect_key = True
        elif char == "[":
            stack.append(None)
        elif char in _CLOSERS:
            stack.pop()
        elif char == "," and stack and stack[-1] is not None:
            expect_key = True
        index += 1
    return "", 0


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
