"""Memory the firmware needs, computed before anything is compiled, and the fit check.

Per model: the arena (the runtime's pool rule over the graph's storage plan, params bound in
place taking none), the operator workspace, the executor state and, with graph_format=json,
the buffer the device parses graph.json into. Per firmware: the receive buffer of the device
protocol and the stack. Flash: the params blobs, graph tables or JSON, sample data. Code size
is only known after linking; the linker's own overflow message is translated by the build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import FitError
from ..read.ctext import NAME_PATTERN
from .tables import STORAGE_ALIGN

# The runtime's workspace rule (crt/include/mlf_runtime.h, mlf_workspace.c; tests/test_crt.py
# reads both constants from that header): every block starts on the next 64-byte boundary
# (MLF_STORAGE_ALIGN, the tables' STORAGE_ALIGN), and every live block below the last keeps a
# 4-byte link at the workspace's end (MLF_WORKSPACE_LINK_BYTES), so that a free can be checked.
WORKSPACE_ALIGN = STORAGE_ALIGN
WORKSPACE_LINK_BYTES = 4
# TVM counts every block in its workspace figures rounded up to its workspace alignment (16
# bytes by default): the fewest bytes a block takes of a figure, for a function whose C is
# not there to count its blocks in.
TVM_BLOCK_BYTES = 16

# `void* x = TVMBackendAllocWorkspace(1, dev_id, (uint64_t)16000, 0, 16);`, on one line.
# Bounded, so that many unterminated calls cannot make the search quadratic.
_ALLOC_RE = re.compile(r"TVMBackendAllocWorkspace\s*\(([^;\n]{0,256}?)\)\s*;")
_ALLOC_CALL_RE = re.compile(r"\bTVMBackendAllocWorkspace\s*\(")
_SIZE_ARG_RE = re.compile(r"^\s*(?:\(\s*u?int64_t\s*\)\s*)?(\d+)\s*[uUlL]*\s*$")
# A function definition starts at column 0 and ends its first line with "{".
_FUNCTION_START_RE = re.compile(r"^[A-Za-z_][^;\n]*\)\s*\{\s*$", re.MULTILINE)
_DEFINED_RE = re.compile(rf"({NAME_PATTERN})\s*\(")


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


# --- the LIFO rule -----------------------------------------------------------------------------


def lifo_bytes(sizes: Sequence[int], above: int = 0) -> int:
    """What the runtime's LIFO workspace holds with blocks of ``sizes`` (bytes as asked, in
    the order allocated) live at once, and ``above`` bytes more on top of them (the need of
    what allocates while they are held: a callee, the CMSIS-NN adapter): each block from the
    next 64-byte boundary, a link for each below the topmost. Exact; a window of this many
    bytes (or more) serves them."""
    if above:
        return (
            sum(align(s, WORKSPACE_ALIGN) for s in sizes)
            + WORKSPACE_LINK_BYTES * len(sizes)
            + above
        )
    if not sizes:
        return 0
    return (
        sum(align(s, WORKSPACE_ALIGN) for s in sizes[:-1])
        + sizes[-1]
        + WORKSPACE_LINK_BYTES * (len(sizes) - 1)
    )


def figure_bytes(figure: int, blocks: Optional[int], above: int = 0) -> int:
    """The most the LIFO workspace can hold for blocks whose sizes TVM counted as ``figure``
    bytes in all, at most ``blocks`` of them (None: not known, then one per
    :data:`TVM_BLOCK_BYTES` of the figure), with ``above`` bytes on top: each block may add
    up to 63 bytes of padding and a link (the topmost none, unless something is above it)."""
    if figure <= 0:
        return above
    count = -(-figure // TVM_BLOCK_BYTES) if blocks is None else blocks
    padded = count if above else max(count - 1, 0)
    return figure + padded * (WORKSPACE_ALIGN - 1 + WORKSPACE_LINK_BYTES) + above


def window_bytes(need: int) -> int:
    """A window (or a workspace of its own) for ``need`` bytes: whole 64-byte blocks."""
    return align(need, WORKSPACE_ALIGN)


@dataclass(frozen=True)
class WorkspaceEstimate:
    """The workspace a model's operators need, and how it was found. ``adapter``: what the
    CMSIS-NN adapter takes on top of a function's own blocks during its calls ((function,
    bytes) pairs, :mod:`.cmsis_nn_workspace`), included in ``bytes`` and ``code_bytes``."""

    bytes: int
    how: str  # "option", "code", "metadata", "none"
    metadata_bytes: int = 0
    code_bytes: Optional[int] = None
    max_allocations: int = 0
    adapter: Tuple[Tuple[str, int], ...] = ()

    @property
    def adapter_bytes(self) -> int:
        """The most the CMSIS-NN adapter takes during one call."""
        return max((size for _, size in self.adapter), default=0)


def split_functions(text: str) -> List[str]:
    starts = [m.start() for m in _FUNCTION_START_RE.finditer(text)]
    if not starts:
        return [text]
    bounds = starts + [len(text)]
    return [text[bounds[i] : bounds[i + 1]] for i in range(len(starts))]


def function_allocations(sources: Iterable[Path]) -> Optional[List[Tuple[str, List[int]]]]:
    """Reads the generated C: for every function that calls TVMBackendAllocWorkspace, its
    first line and the sizes it asks for (as asked, in order). None when some size is not a
    literal (then only the metadata can tell)."""
    found: List[Tuple[str, List[int]]] = []
    for source in sources:
        try:
            text = Path(source).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        if "TVMBackendAllocWorkspace" not in text:
            continue
        for body in split_functions(text):
            sizes = literal_blocks(body)
            if sizes is None:
                return None
            if sizes:
                found.append((body.split("\n", 1)[0], sizes))
    return found


def function_name(first_line: str) -> str:
    """The function a definition's first line defines (the first identifier before a "(")."""
    found = _DEFINED_RE.search(first_line)
    return found.group(1) if found is not None else ""


def with_adapter(
    found: Sequence[Tuple[str, List[int]]], adapter: Mapping[str, int], skip: str = ""
) -> int:
    """The most one function holds with the CMSIS-NN adapter's bytes on top of its own blocks
    (``found``: :func:`function_allocations`; ``skip``: a function left out)."""
    own = {function_name(first): sizes for first, sizes in found}
    return max(
        (lifo_bytes(own.get(fn, []), extra) for fn, extra in adapter.items() if fn != skip),
        default=0,
    )


def literal_blocks(body: str) -> Optional[List[int]]:
    """The sizes a function's body asks for, in order; None for a size that is not a
    literal."""
    blocks: List[int] = []
    for match in _ALLOC_RE.finditer(body):
        args = match.group(1).split(",")
        size = _SIZE_ARG_RE.match(args[2]) if len(args) >= 3 else None
        if size is None:
            return None
        blocks.append(int(size.group(1)))
    return blocks


def allocation_sites(body: str) -> int:
    """The calls of TVMBackendAllocWorkspace in a function's body: the most blocks it can hold
    at once (TVM's C frees a block before the scope that allocated it ends, loops included)."""
    return len(_ALLOC_CALL_RE.findall(body))


def code_workspace(sources: Iterable[Path]) -> Optional[Dict[str, int]]:
    """``{"bytes": the most one function holds (whole 64-byte blocks), "allocations": most
    calls in one function}`` from :func:`function_allocations`, or None when it cannot tell."""
    found = function_allocations(sources)
    if found is None:
        return None
    return {
        "bytes": window_bytes(max((lifo_bytes(sizes) for _, sizes in found), default=0)),
        "allocations": max((len(sizes) for _, sizes in found), default=0),
    }


def metadata_operator_workspace(metadata: Mapping[str, Any]) -> Optional[int]:
    """The largest per-operator workspace the metadata records for the CPU (device 1), or
    None when it has no per-operator figures (older versions record only ``main``)."""
    return max(metadata_windows(metadata).values(), default=None)


def metadata_windows(metadata: Mapping[str, Any]) -> Dict[str, int]:
    """{function name: workspace bytes} from ``operator_functions`` (device 1, the CPU):
    empty when the metadata has no per-operator figures."""
    memory = metadata.get("memory")
    if not isinstance(memory, Mapping):
        return {}
    functions = memory.get("functions")
    entries: Any = functions.get("operator_functions") if isinstance(functions, Mapping) else None
    if entries is None:
        entries = memory.get("operator_functions")
    found: Dict[str, int] = {}
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("function_name")
        name = name if isinstance(name, str) else f"#{index}"
        for pool in entry.get("workspace", []) or []:
            if not isinstance(pool, Mapping) or pool.get("device", 1) != 1:
                continue
            size = pool.get("workspace_size_bytes", 0)
            if isinstance(size, int) and size >= 0:
                found[name] = max(found.get(name, 0), size)
    return found


def function_sites(model: Any) -> Optional[Dict[str, int]]:
    """{function: its TVMBackendAllocWorkspace calls} over ``model``'s C (functions that make
    none left out); None when some of its code is not C (object files) or cannot be read."""
    if getattr(model, "objects", None):
        return None
    sites: Dict[str, int] = {}
    for source in getattr(model, "sources", []):
        try:
            text = Path(source).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        if "TVMBackendAllocWorkspace" not in text:
            continue
        for body in split_functions(text):
            count = allocation_sites(body)
            if count:
                name = function_name(body.split("\n", 1)[0])
                sites[name] = max(sites.get(name, 0), count)
    return sites


def most_sites(model: Any) -> Optional[int]:
    """The most TVMBackendAllocWorkspace calls in one function of ``model``'s C (None as
    :func:`function_sites`)."""
    sites = function_sites(model)
    return None if sites is None else max(sites.values(), default=0)


def estimate_workspace(
    model: Any, override: Optional[int] = None, adapter: Optional[Mapping[str, int]] = None
) -> WorkspaceEstimate:
    """The workspace pool for ``model`` (a :class:`project_api.read.Model`), by the runtime's
    LIFO rule (:func:`lifo_bytes`), in whole 64-byte blocks.

    ``override`` (option workspace_size_bytes) wins. Otherwise the larger of what the
    generated code allocates (literal sizes, per function, with ``adapter``'s bytes on top of
    its function's: the CMSIS-NN adapter's scratch) and the metadata's figure with each
    allocation's padding and link (:func:`figure_bytes`). The metadata figure is the largest
    per-operator workspace when recorded, else ``main``'s (which for graph executor models
    also counts the tensors the arena already holds: generous, never short).
    """
    adapter = dict(adapter or {})
    pairs = tuple(sorted(adapter.items()))
    metadata_main = int(getattr(model, "workspace_bytes", 0) or 0)
    found = function_allocations(getattr(model, "sources", []))
    code = None
    allocations = 0
    if found is not None:
        code = window_bytes(
            max(
                max((lifo_bytes(sizes) for _, sizes in found), default=0),
                with_adapter(found, adapter),
            )
        )
        allocations = max((len(sizes) for _, sizes in found), default=0)
    if override is not None:
        return WorkspaceEstimate(int(override), "option", metadata_main, code, allocations, pairs)
    per_op = metadata_operator_workspace(getattr(model, "metadata", {}) or {})
    metadata_figure = per_op if per_op is not None else metadata_main
    if code is None:
        # Sizes not known: the figure with a padding block and a link for every allocation
        # of the function that makes the most; the adapter's blocks on top of any operator's.
        above = max(adapter.values(), default=0)
        total = window_bytes(figure_bytes(metadata_figure, most_sites(model), above))
        return WorkspaceEstimate(total, "metadata", metadata_main, None, 0, pairs)
    from_metadata = (
        window_bytes(figure_bytes(metadata_figure, allocations))
        if metadata_figure and allocations
        else 0
    )
    total = max(code, from_metadata)
    how = "code" if code >= from_metadata else "metadata"
    if total == 0:
        how = "none"
    return WorkspaceEstimate(total, how, metadata_main, code, allocations, pairs)


# --- the fit check ---------------------------------------------------------------------------


@dataclass
class FitReport:
    """RAM and flash the firmware needs (before code), itemised, against the board's."""

    ram_items: Dict[str, int] = field(default_factory=dict)
    flash_items: Dict[str, int] = field(default_factory=dict)
    ram_bytes: Optional[int] = None
    flash_bytes: Optional[int] = None

    @property
    def ram_needed(self) -> int:
        return sum(self.ram_items.values())

    @property
    def flash_needed(self) -> int:
        return sum(self.flash_items.values())

    def to_json(self) -> Dict[str, Any]:
        return {
            "ram": {
                "needed": self.ram_needed,
                "available": self.ram_bytes,
                "items": dict(self.ram_items),
            },
            "flash": {
                "needed": self.flash_needed,
                "available": self.flash_bytes,
                "items": dict(self.flash_items),
                "note": "code not counted: the linker checks it",
            },
        }

    def problems(self) -> List[str]:
        out = []
        if self.ram_bytes is not None and self.ram_needed > self.ram_bytes:
            out.append(
                f"RAM: needs {self.ram_needed} bytes ({_items(self.ram_items)}) but the board "
                f"has {self.ram_bytes} ({self.ram_needed - self.ram_bytes} too many)"
            )
        if self.flash_bytes is not None and self.flash_needed > self.flash_bytes:
            out.append(
                f"flash: needs {self.flash_needed} bytes before code ({_items(self.flash_items)})"
                f" but the board has {self.flash_bytes} "
                f"({self.flash_needed - self.flash_bytes} too many)"
            )
        return out

    def check(self, board_name: str, what: str) -> None:
        problems = self.problems()
        if problems:
            raise FitError(
                f"{what} does not fit board {board_name}: " + "; ".join(problems),
                hint="choose a board with more memory (see `mlf-project boards`), or a smaller "
                "model; workspace_size_bytes=N overrides the workspace estimate",
            )


def _items(items: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {size}" for name, size in items.items() if size)


def fit_report(
    board: Any,
    *,
    ram_items: Mapping[str, int],
    flash_items: Mapping[str, int],
) -> FitReport:
    ram = getattr(board, "ram", None)
    flash = getattr(board, "flash", None)
    return FitReport(
        ram_items=dict(ram_items),
        flash_items=dict(flash_items),
        ram_bytes=None if ram is None else int(ram.length),
        flash_bytes=None if flash is None else int(flash.length),
    )


# Bounded numbers: the log also holds what the model's C made the compiler print.
_OVERFLOW_RE = re.compile(r"region [`'\"]?(\w+)[`'\"]? overflowed by (\d{1,15}) bytes")
_NOT_FIT_RE = re.compile(
    r"section [`'\"]?([\w.]+)[`'\"]? will not fit in region [`'\"]?(\w+)[`'\"]?"
)


def linker_overflow(log: str) -> Optional[str]:
    """The linker's complaint about a region that overflowed, as one sentence, or None."""
    overflows: Dict[str, int] = {}
    for match in _OVERFLOW_RE.finditer(log):
        overflows[match.group(1)] = int(match.group(2))
    sections: Dict[str, List[str]] = {}
    for match in _NOT_FIT_RE.finditer(log):
        sections.setdefault(match.group(2), []).append(match.group(1))
    if not overflows and not sections:
        return None
    parts = []
    for region in sorted(set(overflows) | set(sections)):
        text = f"region {region}"
        if region in overflows:
            text += f" overflowed by {overflows[region]} bytes"
        if region in sections:
            text += f" (sections {', '.join(sorted(set(sections[region])))})"
        parts.append(text)
    return "; ".join(parts)


def sum_sizes(values: Sequence[int]) -> int:
    return sum(int(v) for v in values)
