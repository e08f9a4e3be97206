"""The runtime's rules for graph tables, checked on the host when the generator writes them.

``mlf_graph_check()`` (crt/src/mlf_executor.c) refuses tables that could hand an operator a
tensor outside its pool. The generator's const tables are checked here by the same rules
before any C is written, so that microcontroller firmware need not check them again at
start-up (``MLF_CHECK_TABLES``, on by default only for host builds: about 500 B of flash).
Host builds still run the C check on the very same tables, so the two are compared on every
host run of a generated project.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Set

from ..errors import GenerateError
from .memory_plan import MemoryPlan, overlaps
from .tables import MLF_FUNC_COPY, STORAGE_ALIGN, GraphTables

# The runtime's limits: 16-bit indices (mlf_view.storage, op_args) and a 32-bit size_t.
MAX_COUNT = 0xFFFF
MAX_VIEW_BYTES = 0xFFFFFFFF


def _view_problem(t: GraphTables, index: int) -> str:
    view = t.views[index]
    if not 0 <= view.storage < len(t.storage_bytes):
        return f"view {index} names pool {view.storage} of {len(t.storage_bytes)}"
    if view.dtype.bits == 0 or view.dtype.lanes == 0:
        return f"view {index} has an empty dtype"
    if any(d < 0 for d in view.shape) or view.nbytes > MAX_VIEW_BYTES:
        return f"view {index} has a negative dimension or more than 4 GiB"
    if view.nbytes > t.storage_bytes[view.storage]:
        return (
            f"view {index} takes {view.nbytes} bytes of pool {view.storage}, "
            f"which has {t.storage_bytes[view.storage]}"
        )
    return ""


def _op_problem(t: GraphTables, index: int) -> str:
    op = t.ops[index]
    where = f"operator {index} (node {op.node})"
    if op.func != MLF_FUNC_COPY and not 0 <= op.func < len(t.funcs):
        return f"{where} calls function {op.func} of {len(t.funcs)}"
    if not 0 <= op.num_outputs <= len(op.args):
        return f"{where} has {op.num_outputs} outputs among {len(op.args)} args"
    if any(not 0 <= v < len(t.views) for v in op.args):
        return f"{where} names a view beyond the {len(t.views)}"
    if op.func == MLF_FUNC_COPY and (
        len(op.args) != 2
        or op.num_outputs != 1
        or t.views[op.args[0]].nbytes != t.views[op.args[1]].nbytes
    ):
        return f"{where} copies between different sizes"
    return ""


def _bound_pool_problem(t: GraphTables, pool: int, offset: int, written_pools: Set[int]) -> str:
    viewers = sum(1 for a in t.args if t.views[a.view].storage == pool)
    written = pool in written_pools
    if not 0 <= pool < len(t.storage_bytes):
        return f"params bound to pool {pool} of {len(t.storage_bytes)}"
    if viewers > 1 or written or offset % STORAGE_ALIGN:
        return (
            f"params bound to pool {pool}: {viewers} args view it, "
            f"{'an operator writes it' if written else 'no operator writes it'}, "
            f"offset {offset}"
        )
    return ""


def table_problems(tables: GraphTables, bound: Mapping[int, int]) -> List[str]:
    """What ``mlf_graph_check()`` would refuse in ``tables`` whose pools ``bound`` (pool →
    byte offset in the 64-byte aligned params blob) point at params; empty when nothing."""
    t = tables
    counts = {
        "functions": len(t.funcs),
        "views": len(t.views),
        "pools": len(t.storage_bytes),
        "args": len(t.args),
        "operator arguments": t.max_op_args,
    }
    problems = [f"{n} {what} (at most {MAX_COUNT})" for what, n in counts.items() if n > MAX_COUNT]
    problems += [p for p in (_view_problem(t, i) for i in range(len(t.views))) if p]
    problems += [p for p in (_op_problem(t, i) for i in range(len(t.ops))) if p]
    problems += [
        f"{what} {i} names view {v} of {len(t.views)}"
        for what, views in (("arg", [a.view for a in t.args]), ("output", t.outputs))
        for i, v in enumerate(views)
        if not 0 <= v < len(t.views)
    ]
    if problems:  # the pools' rules read every view through the args and operators
        return problems
    written = t.written_storage()
    return [p for p in (_bound_pool_problem(t, s, o, written) for s, o in bound.items()) if p]


def plan_problems(tables: GraphTables, memory: MemoryPlan) -> List[str]:
    """What is wrong with a liveness plan for these tables: an offset off the 64-byte grid
    (the runtime refuses it), the arena's pools not numbered first, a window per operator
    missing, or two blocks live at once that share bytes (the runtime cannot tell: only this
    check)."""
    placed = memory.placed
    problems = [
        f"pool {sid} at offset {at}" for sid, at in enumerate(placed) if at % STORAGE_ALIGN
    ] + [
        f"operator {i}'s window at offset {at}"
        for i, (at, size) in enumerate(memory.windows)
        if size and at % STORAGE_ALIGN
    ]
    if set(memory.pool_offsets) != set(range(len(placed))):
        problems.append("the arena's pools are not the first ones")
    if len(memory.windows) != len(tables.ops):
        problems.append(f"{len(memory.windows)} windows for {len(tables.ops)} operators")
    return problems + [f"{pair} overlap while both are live" for pair in overlaps(memory)]


def check_tables(
    tables: GraphTables, bound: Mapping[int, int], model: str, memory: Optional[MemoryPlan] = None
) -> None:
    """Raises :class:`GenerateError` when the runtime would refuse these tables, or their
    liveness plan would let two live tensors or windows share bytes."""
    problems = table_problems(tables, bound)
    if memory is not None and not problems:
        problems = plan_problems(tables, memory)
    if problems:
        shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
        raise GenerateError(
            f"model {model}: the graph tables break the runtime's rules: {shown}",
            hint="this is a generator bug for an archive that passed validation: please report it",
        )
