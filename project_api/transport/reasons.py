"""The runtime's reasons for a failure, and their text put back into a device's message;
the wording of the protocol's own errors.

Firmware built without the runtime's English descriptions (``host_driven`` projects compile
it with ``-DMLF_ERROR_TEXT=0``: the catalogue is about 900 bytes of flash) writes a reason
as ``: #<code>`` where the description would stand (docs/protocol.md §2.3). The codes are
the ``mlf_why`` enumerators of ``crt/src/mlf_internal.h``, numbered as the C enum numbers
them: ``MLF_WHY_LIST`` from 0, then ``MLF_WHY_JSON_LIST``. The host reads that catalogue
from the runtime it installed, the one every generated project copies.
"""

from __future__ import annotations

import functools
import re
from typing import Dict, Sequence, Tuple

from ..resources import crt_dir

_ENTRY = re.compile(r'X\(\s*\w+\s*,\s*"((?:[^"\\\n]|\\.)*)"\s*\)')
_CODE = re.compile(r": #(\d{1,4})(?=\D|$)")


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
    """``message`` with each ``: #<code>`` replaced by ``: <description>`` (codes without a
    description are left as they are)."""
    texts = reason_texts()

    def text(match: re.Match[str]) -> str:
        code = int(match.group(1))
        return f": {texts[code]}" if 0 < code < len(texts) and texts[code] else match.group(0)

    return _CODE.sub(text, message) if "#" in message else message


# Protocol errors (codes 0x100 and up) carry only their numbers, in decimal separated by
# spaces (docs/protocol.md §2.3): the firmware keeps no English for them. Keyed by code,
# then by request type (None: any request).
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
    return " ".join(str(x) for x in n)


def word(code: int, request: int, message: str) -> str:
    """The text of an ERROR reply's message: a protocol error's numbers worded, a runtime
    error's ``: #<code>`` reasons explained (:func:`explain`); other text as it came."""
    if code >= 0x100 and _NUMBERS.fullmatch(message):
        return _protocol_text(code, request, [int(x) for x in message.split()])
    return explain(message)


__all__ = ["explain", "reason_texts", "word"]
