"""The runtime's reasons for a failure, and their text put back into a device's message.

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
from typing import Tuple

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


__all__ = ["explain", "reason_texts"]
