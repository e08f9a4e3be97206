"""What a failed configure or build says, in a few lines: the summary in a BuildError.

The whole log is kept elsewhere (``build/build.log``); this picks from it the lines that say
why, in the order they appear:

* a CMake ``CMake Error at <file>:<line> (<command>):`` header together with its indented
  reason lines (``No SOURCES given to target: ...``, ``Cannot find source file: ...``);
* a compiler's or a tool's ``error:`` lines (``src/x.c:88:33: error: ...``, ``cc1: error:``,
  ``ninja: error:``, the assembler's ``x.s:7: Error: ...``), without the source excerpt and
  caret lines under them;
* a linker's reasons: ``undefined reference to`` / ``multiple definition of`` (once per
  symbol), ``file format not recognized``, ``cannot find``, any other ``ld:`` line but its
  warnings and ``in function`` context; ``collect2: error: ld returned 1 exit status`` only
  when the linker said nothing more precise.

Paths inside the project are shown relative to it and CMake's ``CMakeFiles/<target>.dir/``
object prefix is dropped. Repeated lines appear once; after :data:`MAX_ENTRIES` entries the
rest is counted (``… and 3 more``). A log with none of these gives its last lines instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

MAX_ENTRIES = 6
MAX_REASON_LINES = 4  # of a CMake error's indented text
MAX_LINE = 400  # characters of one shown line
# Characters of a line that are read: a reason is said near its start; the model's C can make
# a tool print lines of megabytes, which are not searched whole, each pattern in turn.
READ_CHARS = 16 * 1024
TAIL_LINES = 10

_CMAKE_ERROR = re.compile(r"^CMake Error\b")
_ERROR = re.compile(r"(?:^|:\s)(?:fatal )?(?:error|Error):\s")  # GNU as says "Error:"
_LINKER_PATH = re.compile(r"^\S*?\b(ld(?:\.\w+)?|collect2)(?:\.exe)?:\s")
_OBJECT_DIR = re.compile(r"\bCMakeFiles/[^/\s:]+\.dir/")
_SYMBOL = re.compile(r"(undefined reference to|multiple definition of|undefined symbol:?)\s+(\S+)")
_LINKER_REASON = re.compile(
    r"file (?:format )?not recognized|cannot find |cannot open |undefined symbol"
    r"|duplicate symbol|relocation truncated"
)
_LINKER_GAVE_UP = re.compile(
    r"ld returned \d+ exit status|linker command failed|ld: \d+ errors? found"
)
_LINKER_SAYS = re.compile(r"^ld(?:\.\w+)?: ")  # after _clean() shortened the linker's path
_LINKER_ASIDE = re.compile(r"\b(?:warning|note):|in function [`'][^']*':\s*$")
_MAKE_ERROR = re.compile(r"^g?make(?:\[\d+\])?: \*\*\* (?!\[)")
# Words that every line of a reason above holds: a line with none is passed over unread (a
# log of many short lines costs one search each, not a cleaning and eight).
_ANY_REASON = re.compile(
    r"rror|ld(?:\.\w+)?(?:\.exe)?: |ld returned|collect2|undefined|multiple definition"
    r"|not recognized|cannot (?:find|open) |duplicate symbol|relocation truncated"
    r"|linker command failed|^g?make"
)


def summarise(log: str, project_dir: Union[str, Path, None] = None) -> str:
    """The lines of ``log`` that say why the configure or build failed (see the module)."""
    entries = failure_lines(log, project_dir)
    if not entries:
        return tail(log, TAIL_LINES)
    shown = entries[:MAX_ENTRIES]
    text = ";\n".join(shown)
    if len(entries) > len(shown):
        text += f";\n… and {len(entries) - len(shown)} more"
    return text


def failure_lines(log: str, project_dir: Union[str, Path, None] = None) -> List[str]:
    """Every distinct reason found in ``log``, in order; each may span several lines."""
    lines = log.splitlines()
    found: Dict[Tuple[str, str], str] = {}
    gave_up: List[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        line = line[:READ_CHARS]
        if not _ANY_REASON.search(line):
            continue
        line = _clean(line, project_dir)
        if _CMAKE_ERROR.match(line):
            block: List[str] = []
            while index < len(lines) and (not lines[index].strip() or lines[index][0].isspace()):
                block.append(_clean(lines[index][:READ_CHARS], project_dir))
                index += 1
            entry = _cmake_entry(line, block)
            found.setdefault(("cmake", entry), entry)
            continue
        kind = _classify(line)
        if kind is None:
            continue
        text = _shorten(line.strip())
        if kind == "gave-up":
            gave_up.append(text)
            continue
        symbol = _SYMBOL.search(text)
        key = (kind, f"{symbol.group(1)} {symbol.group(2)}" if symbol else text)
        found.setdefault(key, text)
    entries = list(found.values())
    if not any(kind == "linker" for kind, _ in found):
        entries += [text for text in dict.fromkeys(gave_up)]
    return entries


def tail(log: str, lines: int = 25) -> str:
    kept = [line for line in log.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _classify(line: str) -> Optional[str]:
    if _LINKER_GAVE_UP.search(line):
        return "gave-up"
    if _SYMBOL.search(line) or _LINKER_REASON.search(line):
        return "linker"
    if _LINKER_SAYS.match(line) and not _LINKER_ASIDE.search(line):
        return "linker"
    if _ERROR.search(line) or _MAKE_ERROR.match(line):
        return "error"
    return None


def _cmake_entry(header: str, block: List[str]) -> str:
    """The header and its first reason lines, then any compiler error lines inside it (a
    failed compiler check quotes the compiler's output there)."""
    reasons = [line.strip() for line in block if line.strip()]
    shown = reasons[:MAX_REASON_LINES]
    shown += [line for line in reasons[MAX_REASON_LINES:] if _ERROR.search(line)][:2]
    return "\n".join([_shorten(header.strip())] + ["    " + _shorten(line) for line in shown])


def _clean(line: str, project_dir: Union[str, Path, None]) -> str:
    line = line.rstrip("\r\n")
    if project_dir:
        line = line.replace(str(project_dir).rstrip("/") + "/", "")
    line = _LINKER_PATH.sub(lambda match: match.group(1) + ": ", line)
    return _OBJECT_DIR.sub("", line)


def _shorten(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"
