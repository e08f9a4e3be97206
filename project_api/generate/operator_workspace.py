"""What each operator asks of ``TVMBackendAllocWorkspace``: the size of its workspace window.

The memory planner (:mod:`.memory_plan`) gives every operator call a window of its own in the
arena, live only while that operator runs. Its size, per generated function, by the runtime's
LIFO rule (:func:`~.sizes.lifo_bytes`: every block from the next 64-byte boundary, a 4-byte
link for every block below the topmost), in whole 64-byte blocks:

- from the code, when every size it allocates is a literal: its blocks, with the need of a
  generated function it calls on top of them (the callee allocates on top of what the caller
  holds) or, if larger, the CMSIS-NN adapter's scratch for the kernels it calls (the adapter
  allocates on top of TVM's context buffer and frees before the kernel call returns:
  ``workspace.adapter``, :mod:`.cmsis_nn_workspace`) — exact. The metadata's figure is not
  added: it also counts the small buffers TVM's C keeps on the stack (mlp_default: 16–48 B
  per operator that never calls the allocator);
- else from ``metadata.json``'s ``operator_functions`` (TVM's count for that function), with
  a 63-byte padding block and a link for every ``TVMBackendAllocWorkspace`` call in its C
  (:func:`~.sizes.figure_bytes`), plus what a function it calls or the adapter needs on top;
  without its C (object files) one block per 16 bytes of the figure is assumed (TVM rounds
  every block it counts up to its workspace alignment, 16 bytes by default);
- else (no per-function figure, sizes not literal) the model-wide estimate of
  :func:`~.sizes.estimate_workspace` (which holds the adapter's largest), as every operator
  got before.

The option ``workspace_size_bytes`` makes every window that size. Runs on the host check the
windows: the runtime measures what each operator call holds (``mlf_workspace_watch``), and the
tests compare it with the plan (tests/workspace_marks.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from ..read.ctext import NAME_PATTERN
from .sizes import (
    allocation_sites,
    figure_bytes,
    function_name,
    lifo_bytes,
    literal_blocks,
    metadata_windows,
    split_functions,
    window_bytes,
)
from .tables import MLF_FUNC_COPY, GraphTables

_CALL_RE = re.compile(rf"({NAME_PATTERN})\s*\(")


@dataclass(frozen=True)
class FunctionCode:
    """One generated function: the sizes it allocates itself, in order (None: a size that is
    not a literal), its TVMBackendAllocWorkspace calls and the generated functions it calls."""

    own: Optional[List[int]]
    calls: Set[str]
    sites: int = 0


def read_functions(sources: Iterable[Path]) -> Dict[str, FunctionCode]:
    """Every function defined at column 0 of the model's C, by name."""
    bodies: Dict[str, str] = {}
    for source in sources:
        try:
            text = Path(source).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for body in split_functions(text):
            first = body.split("\n", 1)[0]
            name = function_name(first)
            if name and "{" in first:
                bodies.setdefault(name, body)
    functions: Dict[str, FunctionCode] = {}
    for name, body in bodies.items():
        head_end = body.find("{")
        called = {m.group(1) for m in _CALL_RE.finditer(body, head_end + 1)}
        functions[name] = FunctionCode(
            literal_blocks(body), (called & set(bodies)) - {name}, allocation_sites(body)
        )
    return functions


def code_window(
    functions: Mapping[str, FunctionCode],
    name: str,
    adapter: Optional[Mapping[str, int]] = None,
    reported: Optional[Mapping[str, int]] = None,
) -> Optional[int]:
    """The workspace ``name`` holds at its deepest (bytes, by the LIFO rule, not rounded):
    its own blocks with, on top of them, the largest need of a function it calls or of the
    CMSIS-NN adapter during its calls (``adapter``: {function: bytes}). A function whose
    sizes are not literals counts its metadata figure (``reported``: {function: bytes}) with
    a padding block and a link per allocation call; None when it has none."""
    extra = adapter or {}
    figures = reported or {}
    memo: Dict[str, Optional[int]] = {}

    def need(fn: str, path: Set[str]) -> Optional[int]:
        if fn in memo:
            return memo[fn]
        code = functions.get(fn)
        if code is None:
            return extra.get(fn, 0)
        if fn in path:  # recursion: TVM's code has none; be safe
            return None
        above = extra.get(fn, 0)
        for callee in sorted(code.calls):
            below = need(callee, path | {fn})
            if below is None:
                memo[fn] = None
                return None
            above = max(above, below)
        if code.own is not None:
            memo[fn] = lifo_bytes(code.own, above)
        elif fn in figures:
            memo[fn] = figure_bytes(figures[fn], code.sites, above)
        else:
            memo[fn] = None
        return memo[fn]

    return need(name, set())


def function_windows(
    model: Any,
    funcs: Sequence[str],
    fallback: int,
    override: Optional[int] = None,
    adapter: Optional[Mapping[str, int]] = None,
) -> Dict[str, int]:
    """{function: window bytes} for the functions an executor calls (rules in the module
    docstring). ``fallback``: the model-wide estimate, for a function nothing else sizes;
    ``adapter``: {function: bytes} the CMSIS-NN adapter takes during its calls."""
    if override is not None:
        return {name: int(override) for name in funcs}
    extra = dict(adapter or {})
    functions = read_functions(getattr(model, "sources", []))
    reported = metadata_windows(getattr(model, "metadata", {}) or {})
    windows: Dict[str, int] = {}
    for name in funcs:
        need: Optional[int] = None
        if name in functions:
            need = code_window(functions, name, extra, reported)
        elif name in reported:  # no C to count its blocks in
            need = figure_bytes(reported[name], None, extra.get(name, 0))
        windows[name] = window_bytes(need) if need is not None else fallback
    return windows


def operator_windows(
    model: Any,
    tables: GraphTables,
    fallback: int,
    override: Optional[int] = None,
    adapter: Optional[Mapping[str, int]] = None,
) -> List[int]:
    """Each operator call of ``tables`` its function's window (:func:`function_windows`); a
    ``__copy`` none."""
    by_function = function_windows(model, tables.funcs, fallback, override, adapter)
    return [
        0 if op.func == MLF_FUNC_COPY else by_function.get(tables.funcs[op.func], 0)
        for op in tables.ops
    ]
