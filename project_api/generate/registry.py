"""Operator functions the graph calls that TVM left out of the system library's registry.

TVM's registry (``_tvm_func_array`` in ``<mod>_lib0.c``) lists the functions of the host
module. Functions of external codegens — CMSIS-NN partitions (``tvmgen_<mod>_cmsis_nn_main_N``
in ``lib2.c``) — are global C functions in their own module, which TVM's C++ runtime reaches
through module imports; a system-lib lookup never finds them. When the graph calls such a
function and the generated C defines it, the generator emits a registry of its own for the
model: every graph function linked directly by name, handed to the executor instead of
``TVMSystemLibEntryPoint()``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from .tables import c_string, json_raw

_REGISTERED_RE = re.compile(r"\(\s*TVMBackendPackedCFunc\s*\)\s*&?\s*([A-Za-z_]\w*)")
_DEFINED_RE = re.compile(
    r"^[ \t]*(?:TVM_DLL[ \t]+)?(?:int32_t|int)[ \t]+([A-Za-z_]\w*)[ \t]*\([^;{()]*\)\s*\{",
    re.MULTILINE,
)


def _texts(sources: Iterable[Path]) -> List[str]:
    texts = []
    for source in sources:
        try:
            texts.append(Path(source).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return texts


# The name at a word's start: a look-behind after it, not a \b before it, lets the engine
# skip ahead to the name (10 MiB of braces: 0.65 s with \b).
_SYSTEM_LIB_RE = re.compile(
    r"TVMSystemLibEntryPoint(?<!\wTVMSystemLibEntryPoint)\s*\(\s*(?:void)?\s*\)\s*\{"
)


def defines_system_library(sources: Iterable[Path]) -> bool:
    """Whether the generated C defines TVM's system library (``TVMSystemLibEntryPoint``):
    graph and packed AOT builds with runtime crt do, interface-c AOT builds do not."""
    return any(_SYSTEM_LIB_RE.search(text) for text in _texts(sources))


def registered_functions(sources: Iterable[Path]) -> Set[str]:
    """Names listed in the system library's function array(s)."""
    found: Set[str] = set()
    for text in _texts(sources):
        if "TVMFuncRegistry" in text:
            found.update(_REGISTERED_RE.findall(text))
    return found


def defined_functions(sources: Iterable[Path]) -> Set[str]:
    """Names of functions with external linkage defined in the generated C."""
    found: Set[str] = set()
    for text in _texts(sources):
        for match in _DEFINED_RE.finditer(text):
            line_start = text.rfind("\n", 0, match.start()) + 1
            if "static" not in text[line_start : match.start(1)]:
                found.add(match.group(1))
    return found


def unregistered_functions(graph_funcs: Sequence[str], sources: Sequence[Path]) -> List[str]:
    """Graph functions missing from the registry but defined in the sources (in graph
    order). Functions neither registered nor defined are left for the runtime to report."""
    registered = registered_functions(sources)
    if not registered:
        return []
    missing = [name for name in graph_funcs if name not in registered]
    if not missing:
        return []
    defined = defined_functions(sources)
    return [name for name in missing if name in defined]


def render_registry(
    symbol: str,
    graph_funcs: Sequence[str],
    sources: Sequence[Path],
    renames: Optional[Mapping[str, str]] = None,
) -> str:
    """C defining ``static const TVMModule <symbol>``: every graph function that the sources
    define, by name (the others stay out, so the runtime reports them as missing).
    ``renames`` maps a function to the C symbol it was given at compile time."""
    c_symbol = dict(renames or {})
    defined = defined_functions(sources) | registered_functions(sources)
    names = [n for n in dict.fromkeys(graph_funcs) if n in defined and n.isidentifier()]
    comment = (
        "/* Every function the graph calls, linked by name: some are missing from the system\n"
        " * library's registry (external codegens such as CMSIS-NN register nothing there). */"
    )
    return registry_c(symbol, [(name, c_symbol.get(name, name)) for name in names], comment)


def function_pointers_c(
    symbol: str,
    graph_funcs: Sequence[str],
    sources: Sequence[Path],
    renames: Optional[Mapping[str, str]] = None,
) -> Optional[str]:
    """C defining ``static const TVMBackendPackedCFunc <symbol>[]``: the address of every
    function the graph calls, in ``graph_funcs`` order — or None when one of them is not a C
    function with external linkage in the sources (the executor then looks them up by name
    and reports what is missing). Bound by the linker, TVM's registry and its names are left
    for --gc-sections to drop."""
    found = defined_functions(sources) | registered_functions(sources)
    if not graph_funcs or any(not n.isidentifier() or n not in found for n in graph_funcs):
        return None
    c_symbol = dict(renames or {})
    entries = [(name, c_symbol.get(name, name)) for name in graph_funcs]
    comment = "/* The functions the graph calls, bound by the linker: no lookup by name. */"
    return "\n".join([comment, *_function_array(f"{symbol}", entries)])


def _function_array(array: str, entries: Sequence[Tuple[str, str]]) -> List[str]:
    """Declarations of the C functions of ``entries`` and a const array of their addresses."""
    lines = [
        f"int {function}(TVMValue*, int*, int, TVMValue*, int*, void*);" for _, function in entries
    ]
    lines.append(f"static const TVMBackendPackedCFunc {array}[] = {{")
    lines.extend(f"    {function}," for _, function in entries)
    if not entries:
        lines.append("    NULL,")
    lines.append("};")
    return lines


def registry_c(symbol: str, entries: Sequence[Tuple[str, str]], comment: str = "") -> str:
    """C defining ``static const TVMModule <symbol>`` whose registry maps each name of
    ``entries`` (name, C function) to that function, in that order."""
    lines = [comment] if comment else []
    lines += _function_array(f"{symbol}_funcs", entries)
    count = len(entries)
    blob = bytes([count & 0xFF, count >> 8]) + b"".join(
        json_raw(name).encode("utf-8") + b"\0" for name, _ in entries
    )
    lines.append(f"static const TVMFuncRegistry {symbol}_registry = {{")
    lines.append(f"    {_bytes_literal(blob)},")
    lines.append(f"    {symbol}_funcs,")
    lines.append("};")
    lines.append(f"static const TVMModule {symbol} = {{&{symbol}_registry}};")
    return "\n".join(lines)


def _bytes_literal(data: bytes) -> str:
    """A C string literal holding exactly ``data`` (plus the implicit final NUL)."""
    return c_string(data.decode("latin-1")) if all(b < 0x80 for b in data) else _octal(data)


def _octal(data: bytes) -> str:
    return '"' + "".join(f"\\{b:03o}" for b in data) + '"'
