"""The output of a configure and build as the build step keeps it: bounded.

The model's C is compiled in the build, so what the compiler prints — ``#pragma message``,
errors quoting its lines — is the model's text, of any length. :class:`BoundedLog` keeps
lines cut at :data:`MAX_LINE_BYTES` (the reader asks for no more) and, beyond
:data:`MAX_LOG_BYTES`, the first and the last half of the output with a line saying how much
was left out in between. Nothing in it is taken as a path or a command (docs/security.md).
"""

from __future__ import annotations

import collections
import re
from typing import Deque, Dict, List, Optional

MAX_LINE_BYTES = 64 << 10
MAX_LOG_BYTES = 32 << 20
# One row of ld's --print-memory-usage table; blanks, not \s (which spans lines: quadratic
# over a log of empty lines), and bounded numbers.
_MEMORY_RE = re.compile(
    r"^[ \t]*(\w{1,64}):[ \t]+(\d{1,15})[ \t]*([KMG]?B)[ \t]+(\d{1,15})[ \t]*([KMG]?B)"
    r"[ \t]+[\d.]{1,20}%",
    re.M,
)
_UNITS = {"B": 1, "KB": 1024, "MB": 1024 * 1024, "GB": 1024**3}


class BoundedLog:
    """Lines of output, at most about :data:`MAX_LOG_BYTES` characters of them."""

    def __init__(self, limit: int = MAX_LOG_BYTES) -> None:
        self.half = limit // 2
        self.head: List[str] = []
        self._head_size = 0
        self._tail: Deque[str] = collections.deque()
        self._tail_size = 0
        self.dropped = 0  # characters left out

    def append(self, line: str) -> None:
        if not self._tail and self._head_size + len(line) <= self.half:
            self.head.append(line)
            self._head_size += len(line)
            return
        self._tail.append(line)
        self._tail_size += len(line)
        while self._tail_size > self.half:
            gone = self._tail.popleft()
            self._tail_size -= len(gone)
            self.dropped += len(gone)

    @property
    def text(self) -> str:
        cut = f"[… {self.dropped} characters of output left out …]\n" if self.dropped else ""
        return "".join(self.head) + cut + "".join(self._tail)


def parse_memory_usage(log: str) -> Optional[Dict[str, Dict[str, int]]]:
    """The linker's ``--print-memory-usage`` table: region -> used/size bytes (numbers to
    show; the linker prints its table after every compile, so its rows are the last)."""
    found = {}
    for match in _MEMORY_RE.finditer(log):
        used = int(match.group(2)) * _UNITS.get(match.group(3), 1)
        size = int(match.group(4)) * _UNITS.get(match.group(5), 1)
        found[match.group(1)] = {"used": used, "size": size}
    return found or None
