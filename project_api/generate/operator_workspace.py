"""What each operator asks of ``TVMBackendAllocWorkspace``: the size of its workspace window.

The memory planner (:mod:`.memory_plan`) gives every operator call a window of its own in the
arena, live only while that operator runs. Its size, per generated function:

- from the code, when every size it allocates is a literal: the sum of its blocks, each
  rounded up to 64 bytes (the runtime's LIFO block rule), plus the largest window of a
  generated function it calls (the callee allocates on top of what the caller holds) or, if
  larger, the CMSIS-NN adapter's scratch for the kernels it calls (the adapter allocates on
  top of TVM's context buffer and frees before the kernel call returns: ``workspace.adapter``,
  :mod:`.cmsis_nn_workspace`) — exact. The metadata's figure is not added: it also counts the
  small buffers TVM's C keeps on the stack (mlp_default: 16–48 B per operator that never
  calls the allocator);
- else from ``metadata.json``'s ``operator_functions`` (TVM's count for that function), with
  one 64-byte alignment block per 1 KiB, at least four, of slack, plus the adapter's largest
  scratch in it or a function it calls;
- else (no per-function figure, sizes not literal) the model-wide estimate of
  :func:`~.sizes.estimate_workspace` (which holds the adapter's largest), as every operator
  got before.

The option ``workspace_size_bytes`` makes every window that size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from ..read.ctext import NAME_PATTERN
from .sizes import (
    WORKSPACE_ALIGN,
    align,
    function_name,
    literal_blocks,
    metadata_windows,
    split_functions,
)
from .tables import MLF_FUNC_COPY, GraphTables

_CALL_RE = re.compile(rf"({NAME_PATTERN})\s*\(")


@dataclass(frozen=True)
class FunctionCode:
    """One generated function: the blocks it allocates itself (None: a size that is not a
    literal) and the generated functions it calls."""

    own: Optional[List[int]]
    calls: Set[str]


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
        functions[name] = FunctionCode(literal_blocks(body), (called & set(bodies)) - {name})
    return functions


def code_window(
    functions: Mapping[str, FunctionCode], name: str, adapter: Optional[Mapping[str, int]] = None
) -> Optional[int]:
    """The workspace ``name`` needs at its deepest: its own blocks plus the largest need of
    a function it calls or of the CMSIS-NN adapter during its calls (``adapter``: {function:
    bytes}); None when some size on the way is not a literal."""
    extra = adapter or {}
    memo: Dict[str, Optional[int]] = {}

    def need(fn: str, path: Set[str]) -> Optional[int]:
        if fn in memo:
            return memo[fn]
        code = functions.get(fn)
        if code is None:
            return extra.get(fn, 0)
        if code.own is None or fn in path:  # recursion: TVM's code has none; be safe
            return None
        deepest = extra.get(fn, 0)
        for callee in sorted(code.calls):
            below = need(callee, path | {fn})
            if below is None:
                memo[fn] = None
                return None
            deepest = max(deepest, below)
        memo[fn] = sum(code.own) + deepest
        return memo[fn]

    return need(name, set())


def adapter_reach(
    functions: Mapping[str, FunctionCode], name: str, adapter: Mapping[str, int]
) -> int:
    """The adapter's largest scratch in ``name`` or any function it calls, directly or not."""
    seen: Set[str] = set()
    todo = [name]
    largest = 0
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        largest = max(largest, adapter.get(fn, 0))
        code = functions.get(fn)
        todo.extend(code.calls if code is not None else ())
    return largest


def with_slack(metadata_bytes: int) -> int:
    """A metadata figure made safe for the LIFO allocator: aligned, plus one 64-byte block
    per KiB (at least four) for the blocks' alignment."""
    if metadata_bytes <= 0:
        return 0
    slack = WORKSPACE_ALIGN * max(4, metadata_bytes // 1024)
    return align(metadata_bytes, WORKSPACE_ALIGN) + slack


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
        code = code_window(functions, name, extra) if name in functions else None
        meta = reported.get(name)
        if code is not None:
            windows[name] = code
        elif meta is not None:
            windows[name] = with_slack(meta) + adapter_reach(functions, name, extra)
        else:
            windows[name] = fallback
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
