"""The runtime's reasons for a failure and the protocol's own errors, worded on the host.

``host_driven`` firmware carries no English for its errors (docs/protocol.md §2.3): a runtime
failure (codes 1..0xFF, and a broken model's DESCRIBE) comes as ``<init> <why> <offset>``
and the name it concerns; a protocol error (0x100 and up) as its numbers. ``why`` is an
``mlf_why`` enumerator of ``crt/src/mlf_internal.h``, numbered as the C enum numbers them:
``MLF_WHY_LIST`` from 0, then ``MLF_WHY_JSON_LIST``; the host reads that catalogue from the
runtime it installed, the one every generated project copies. Messages of other shapes
(older firmware wrote ``: #<why>`` inside a formatted text) are explained where they can be.
"""

from __future__ import annotations

import functools
import re
from typing import Dict, Sequence, Tuple

from ..resources import crt_dir

# mlf_status (crt/include/mlf_runtime.h) by value.
STATUS_NAMES = {
    0: "ok",
    1: "bad argument",
    2: "no memory",
    3: "bad JSON",
    4: "bad graph",
    5: "bad params",
    6: "mismatch",
    7: "missing function",
    8: "not found",
    9: "operator failed",
    10: "unsupported",
    11: "bad state",
}

_ENTRY = re.compile(r'X\(\s*\w+\s*,\s*"((?:[^"\\\n]|\\.)*)"\s*\)')
_CODE = re.compile(r": #(\d{1,4})(?=\D|$)")
# mlf_text_error()'s "error <status>", where a message starts or after "<what>: ".
# (The word first, its context behind it: the engine skips ahead to the word.)
_STATUS = re.compile(r"error(?:(?<=^error)|(?<=: error)) (\d{1,3})(?=: #| '| at |$)")


def _list_body(header: str, macro: str) -> str:
    """The continued lines of ``#define <macro>(X) ...``."""
    start = header.find(f"#define {macro}(X)")
    if start < 0:
        return ""
    lines = []
    for line in header[start:].splitlines():
        lines.append(line)
        if not line.rstrip().endswith("\\"):
            break
    return "\n".join(lines)


@functools.cache
def reason_texts() -> Tuple[str, ...]:
    """Every reason's description, indexed by its code; empty when the header is missing."""
    try:
        header = (crt_dir() / "src" / "mlf_internal.h").read_text(encoding="utf-8")
    except (OSError, FileNotFoundError):
        return ()
    texts = []
    for macro in ("MLF_WHY_LIST", "MLF_WHY_JSON_LIST"):
        for raw in _ENTRY.findall(_list_body(header, macro)):
            texts.append(raw.encode("utf-8").decode("unicode_escape"))
    return tuple(texts)


def explain(message: str) -> str:
    """``message`` with each ``: #<code>`` replaced by ``: <description>`` and a leading
    ``error <status>`` (the firmware's mlf_text_error()) by the status's name; codes without
    a description are left as they are."""
    texts = reason_texts()

    def text(match: re.Match[str]) -> str:
        code = int(match.group(1))
        return f": {texts[code]}" if 0 < code < len(texts) and texts[code] else match.group(0)

    def status(match: re.Match[str]) -> str:
        return STATUS_NAMES.get(int(match.group(1)), match.group(0))

    message = _STATUS.sub(status, message) if "error " in message else message
    return _CODE.sub(text, message) if "#" in message else message


# Protocol errors (codes 0x100 and up) carry only their numbers, in decimal separated by
# spaces (docs/protocol.md §2.3): the firmware keeps no English for them. BAD_PAYLOAD's
# wording, keyed by request type.
_BAD_PAYLOAD: Dict[int, str] = {
    0x02: "DESCRIBE takes u16 model, u16 first",
    0x03: "SET_INPUT takes u16 model, u16 input, u32 offset, data",
    0x04: "RUN takes u16 model",
    0x05: "GET_OUTPUT takes u16 model, u16 output, u32 offset, u32 max length",
    0x06: "EXIT takes i32 status",
    0x07: "PROFILE takes u32 first",
}
_UNSUPPORTED = (
    "too many tensors or too long a name",
    "tensor cannot be described",
    "tensor description too long",
)
_NUMBERS = re.compile(r"[0-9]{1,10}(?: [0-9]{1,10}){0,3}|")


def _protocol_text(code: int, request: int, n: Sequence[int]) -> str:
    kind = {0x03: "input", 0x05: "output"}.get(request, "tensor")
    if code == 0x100:
        return "frame cut short (the line went idle)" if n[:1] == [1] else "CRC mismatch"
    if code == 0x101 and len(n) == 2:
        return f"payload of {n[0]} bytes exceeds max {n[1]}"
    if code == 0x102:
        return "unknown request type"
    if code == 0x103:
        return _BAD_PAYLOAD.get(request, "payload size wrong for the request")
    if code == 0x104 and len(n) == 2:
        return f"no model {n[0]} (the device has {n[1]})"
    if code == 0x105 and len(n) == 2:
        return f"no {kind} {n[0]} (the model has {n[1]})"
    if code == 0x106 and len(n) == 2:
        return f"describe index {n[0]} beyond the {n[1]} tensors"
    if code == 0x106 and len(n) == 3 and request == 0x07:
        return f"record {n[0]} beyond the {n[2]} recorded"
    if code == 0x106 and len(n) == 3:
        return f"bytes {n[0]}+{n[1]} beyond the tensor's {n[2]}"
    if code == 0x107 and len(n) == 1 and n[0] < len(_UNSUPPORTED):
        return _UNSUPPORTED[n[0]]
    if code == 0x108 and len(n) == 2:
        return (
            f"model {n[0]}'s tensors are gone: model {n[1]} has used the arena the models "
            "share since; set the inputs again and run"
        )
    return " ".join(str(x) for x in n)


# "<init> <why> <offset>" and, after one more space, the name the failure concerns.
_RUNTIME = re.compile(r"([01]) ([0-9]{1,10}) ([0-9]{1,10})(?: (.*))?", re.DOTALL)
_NO_OFFSET = 0xFFFFFFFF


def runtime_text(message: str) -> str:
    """A runtime failure's numbers worded: ``model init failed: <reason> '<name>' at byte
    <offset>``, each part only when present (the status and node are the reply's own fields).
    Other text is explained (:func:`explain`)."""
    match = _RUNTIME.fullmatch(message)
    if match is None:
        return explain(message)
    init, why, offset = (int(match.group(i)) for i in (1, 2, 3))
    texts = reason_texts()
    parts = []
    if why:
        parts.append(texts[why] if why < len(texts) and texts[why] else f"reason #{why}")
    if match.group(4) is not None:
        parts.append(f"'{match.group(4)}'")
    if offset != _NO_OFFSET:
        parts.append(f"at byte {offset}")
    text = " ".join(parts)
    return ("model init failed: " + text if text else "model init failed") if init else text


def word(code: int, request: int, message: str) -> str:
    """The text of an ERROR reply's message: a protocol error's numbers worded, a runtime
    failure's too (:func:`runtime_text`); other text explained (:func:`explain`)."""
    if code >= 0x100 and _NUMBERS.fullmatch(message):
        return _protocol_text(code, request, [int(x) for x in message.split()])
    if code < 0x100:
        return runtime_text(message)
    return explain(message)


__all__ = ["STATUS_NAMES", "explain", "reason_texts", "runtime_text", "word"]
