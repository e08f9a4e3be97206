"""Which of a CMSIS-NN tree's C files a firmware compiles, and how.

**Only what is called.** A firmware calls a handful of kernels (KWS: five), CMSIS-NN ships 100
to 190 files. :func:`needed_sources` follows the calls: from the functions the firmware names
(the model's ``arm_*`` calls and the adapter's), through the functions each defining file calls,
to every file defining one of them; the inline helpers of the headers count as called by every
file. Reading is textual (comments stripped, every ``#if`` branch kept), so it can only take too
much, never too little for the code it read; a name no file defines (a header macro, a type)
costs nothing, and if the firmware names a function no file defines the whole tree is compiled
and the link says what is missing. KWS on an MPS3 AN547: 27 files instead of 113.

**Float sources.** CMSIS-NN after v7.0.0 has float32 and float16 kernels (``*_f32.c``,
``*_f16.c``) behind ``ARM_NN_ENABLE_F32`` / ``ARM_NN_ENABLE_F16`` (off by default in its own
CMake). float32 compiles on every core; float16 needs a core with MVE-F (its code uses
``float16x8_t``). When they are compiled at all (the closure reaches them, or the whole tree is
built), the f32 files are built with ``ARM_NN_ENABLE_F32=1`` and the f16 files only where the CPU
has MVE-F, with ``ARM_NN_ENABLE_F16=1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from ..read.ctext import strip_comments

# "arm_" at a word's start: a look-behind after it, not a \b before it, lets the engine skip
# ahead to it.
_IDENT = re.compile(r"arm_(?<!\warm_)\w+")
_CALL = re.compile(r"(arm_(?<!\warm_)\w+)\s*\(")
# A macro named arm_*, and the rest of its definition (continued lines included).
_MACRO_LINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(arm_\w+)((?:[^\n]*\\\n)*[^\n]*)", re.MULTILINE
)
# A function definition: a declarator at the start of a line, its parameter list (no
# parentheses inside: else each line naming arm_x( would scan on through every line after
# it), then "{".
_DEFINITION = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(arm_\w+)\s*\(([^;{}()]*)\)\s*\{", re.MULTILINE)
_EXTERN_C = re.compile(r'extern\s+"C"\s*\{')
# A preprocessor line (blanks before "#", never line breaks: a scan from each of many empty
# lines on to the next "#" would be quadratic).
_DIRECTIVE = re.compile(r"^[ \t\f\v]*#[^\n]*", re.MULTILINE)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*["<]([^">\n]+)[">]', re.MULTILINE)


def _read(path: Path) -> str:
    try:
        return strip_comments(
            path.read_text(encoding="utf-8", errors="replace"), line_comments=True
        )
    except OSError:
        return ""


# More braces than any header of CMSIS-NN has (v7.0.0's most: 126) by far; a header with
# more is read as one body (every name it mentions counts as called: too much, never too
# little), so that its braces are never walked one by one.
MAX_BRACES = 10_000
_BRACE = re.compile(r"[{}]")


def _function_bodies(text: str) -> List[str]:
    """The bodies of functions defined in a header (``{`` after a ``)``), nested braces kept."""
    text = _DIRECTIVE.sub("", text)
    text = _EXTERN_C.sub(" ", text)
    if text.count("{") + text.count("}") > MAX_BRACES:
        return [text]
    bodies: List[str] = []
    depth, start = 0, -1
    for brace in _BRACE.finditer(text):
        index = brace.start()
        if brace.group() == "{":
            if depth == 0:
                start = index if text[max(0, index - 200) : index].rstrip().endswith(")") else -1
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0 and start >= 0:
                bodies.append(text[start : index + 1])
    return bodies


def called_functions(texts: Iterable[str]) -> FrozenSet[str]:
    """Every ``arm_*`` name C ``texts`` call or declare (``arm_x(``; comments stripped)."""
    names: Set[str] = set()
    for text in texts:
        names.update(_CALL.findall(strip_comments(text, line_comments=True)))
    return frozenset(names)


def _headers(root: Path, include_dirs: Sequence[str]) -> Dict[str, Path]:
    """The tree's headers by the names an ``#include`` uses (relative to an include dir)."""
    found: Dict[str, Path] = {}
    for include in include_dirs:
        base = root / include
        for header in sorted(base.rglob("*.h")):
            found.setdefault(header.relative_to(base).as_posix(), header)
    return found


def needed_sources(
    root: Path, sources: Sequence[str], include_dirs: Sequence[str], roots: Iterable[str]
) -> Optional[List[str]]:
    """The files of ``sources`` (relative to ``root``) that define what ``roots`` call, directly
    or through the functions they call (their own code and the inline functions of the headers
    they include); None when a root is defined nowhere (then every source is needed)."""
    headers = _headers(root, include_dirs)
    header_text = {name: _read(path) for name, path in headers.items()}
    known: Set[str] = set()  # every name a header defines (an inline function, a macro)
    expands: Dict[str, Set[str]] = {}  # a macro: the names its definition mentions
    inline_calls: Dict[str, FrozenSet[str]] = {}
    for name, text in header_text.items():
        for macro in _MACRO_LINE.finditer(text):
            expands.setdefault(macro.group(1), set()).update(_IDENT.findall(macro.group(2)))
        known.update(m.group(1) for m in _DEFINITION.finditer(text))
        inline_calls[name] = frozenset(
            ident for body in _function_bodies(text) for ident in _IDENT.findall(body)
        )
    known.update(expands)
    # What each header includes (of the tree's headers), read once.
    includes = {
        name: [n for n in _INCLUDE.findall(text) if n in headers]
        for name, text in header_text.items()
    }
    reach_calls: Dict[str, FrozenSet[str]] = {}  # a header: its and its includes' inline calls

    def calls_through(name: str) -> FrozenSet[str]:
        """The inline calls of header ``name`` and of the headers it includes, and theirs."""
        if name not in reach_calls:
            found: Set[str] = set()
            todo = [name]
            while todo:
                header = todo.pop()
                if header not in found:
                    found.add(header)
                    todo.extend(includes[header])
            reach_calls[name] = frozenset().union(*(inline_calls[h] for h in found))
        return reach_calls[name]

    defined: Dict[str, str] = {}
    uses: Dict[str, Set[str]] = {}
    for source in sources:
        text = _read(root / source)
        for match in _DEFINITION.finditer(text):
            defined.setdefault(match.group(1), source)
        uses[source] = set(_IDENT.findall(text))
        for header in _INCLUDE.findall(text):
            if header in headers:
                uses[source] |= calls_through(header)
    wanted = set(roots)
    if not wanted <= known | set(defined):
        return None
    chosen: Set[str] = set()
    todo = list(wanted)
    seen: Set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(expands.get(name, ()))
        where = defined.get(name)
        if where is not None and where not in chosen:
            chosen.add(where)
            todo.extend(uses[where])
    return [source for source in sources if source in chosen]


def float_sources(sources: Sequence[str], fp16: bool) -> Tuple[List[str], Tuple[str, ...]]:
    """``sources`` without the float kernels that cannot be built here, and the definitions
    that enable the ones kept (``ARM_NN_ENABLE_F32=1``, ``ARM_NN_ENABLE_F16=1``)."""
    kept: List[str] = []
    f32 = f16 = False
    for source in sources:
        name = Path(source).name
        if name.endswith("_f16.c"):
            if not fp16:
                continue
            f16 = True
        elif name.endswith("_f32.c"):
            f32 = True
        kept.append(source)
    defines = (("ARM_NN_ENABLE_F32=1",) if f32 else ()) + (("ARM_NN_ENABLE_F16=1",) if f16 else ())
    return kept, defines


@dataclass(frozen=True)
class CmsisNnCompile:
    """How a firmware compiles CMSIS-NN beyond its recipe: the functions it calls (``roots``:
    only the files they need are compiled; None: all), whether the CPU has MVE-F (``fp16``), and
    the adapter (``crt/cmsis_nn/``): its C files relative to the fragment's directory, its
    PRIVATE definitions and the INTERFACE renames that point the models' calls at it."""

    roots: Optional[FrozenSet[str]] = None
    fp16: bool = False
    adapter_sources: Tuple[str, ...] = ()
    adapter_include: Optional[str] = None
    adapter_defines: Tuple[str, ...] = ()
    renames: Tuple[str, ...] = ()

    def fragment_lines(self, lib: str) -> List[str]:
        """The CMake lines that compile the adapter into the CMSIS-NN library ``lib``."""
        if not self.adapter_sources:
            return []
        files = " ".join(f'"${{CMAKE_CURRENT_LIST_DIR}}/{s}"' for s in self.adapter_sources)
        lines = [
            "# TVM's calls with their v4.1.0 meaning on this CMSIS-NN (crt/cmsis_nn/):",
            "# the models call the adapter, compiled into the library with its flags and headers.",
            f"target_sources({lib} PRIVATE {files})",
        ]
        if self.adapter_include:
            lines.append(
                f'target_include_directories({lib} PRIVATE "${{CMAKE_CURRENT_LIST_DIR}}/'
                f'{self.adapter_include}")'
            )
        if self.adapter_defines:
            lines.append(
                f"target_compile_definitions({lib} PRIVATE {' '.join(self.adapter_defines)})"
            )
        if self.renames:
            lines.append(f"target_compile_definitions({lib} INTERFACE {' '.join(self.renames)})")
        return lines
