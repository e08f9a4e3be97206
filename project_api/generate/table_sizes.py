"""Sizes the runtime's tables and state take on a target, from :class:`GraphTables`: what the
generator reserves (``MLF_EXECUTOR_STATE_BYTES``, the JSON parser's buffer) and what
``footprint`` plans, for 4-byte (Cortex-M) and 8-byte (64-bit host) pointers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, Optional

from .tables import GraphTables, align_up, entry_views, json_raw

if TYPE_CHECKING:  # pragma: no cover
    from .memory_plan import MemoryPlan


def _align8(value: int) -> int:
    return align_up(value, 8)


def _c_sizes(pointer_bytes: int) -> Dict[str, int]:
    """sizeof() of the runtime's structs on a target with ``pointer_bytes``-byte pointers
    (4: Cortex-M, 8: 64-bit host); int64/double are 8-byte aligned on both."""
    p = pointer_bytes
    dltensor = align_up(align_up(p + 8 + 4 + 4 + p + p, 8) + 8, 8)
    graph = 0
    for size in (4, 4, p, 4, p, 4, 4, p, 4, p, 4, p, 4, p, 4, p, 4, p, p, p, 4, p, 4, p, 4):
        graph = align_up(graph, size) + size
    graph = align_up(graph, p)
    name = align_up(p + 4, p)
    return {
        "ptr": p,
        "dltensor": dltensor,
        "graph": graph,
        "op": 16,
        "name": name,
        "view": 12,
        "arg": align_up(name + 8, p),
        "tvm_value": 8,
        "int": 4,
    }


def state_bytes(tables: GraphTables, pointer_bytes: int) -> int:
    """What ``MLF_EXECUTOR_STATE_BYTES`` evaluates to on the target."""
    t = tables
    c = _c_sizes(pointer_bytes)
    return (
        _align8(len(t.funcs) * c["ptr"])
        + _align8(t.max_op_args * c["dltensor"])
        + _align8(len(t.storage_bytes) * c["ptr"])
        + _align8(t.max_op_args * c["tvm_value"])
        + _align8(t.max_op_args * c["int"])
        + _align8(len(t.args))
        + _align8(len(t.args) * 4)
    )


def _layout_bytes(sizes: Iterable[int]) -> int:
    return sum(_align8(size) for size in sizes)


def tables_bytes(
    tables: GraphTables,
    pointer_bytes: int,
    *,
    func_names: bool = True,
    storage_data: bool = False,
    memory: Optional[MemoryPlan] = None,
) -> int:
    """Flash the const tables of :func:`render_c` take (names' text included). Without
    ``func_names`` the functions are bound by address (no names emitted); ``storage_data``:
    the tables bind params (one pointer per pool); ``memory``: the liveness plan's offsets
    and windows."""
    t = tables
    plan = memory.tables() if memory is not None else None
    placed = len(plan.placed) if plan is not None else 0
    windows = len(plan.windows) if plan is not None and t.ops else 0
    c = _c_sizes(pointer_bytes)
    funcs = t.funcs if func_names else []
    names = sum(len(json_raw(n).encode("utf-8")) + 1 for n in funcs) + sum(
        len(json_raw(a.name).encode("utf-8")) + 1 for a in t.args
    )
    return names + _layout_bytes(
        [
            c["graph"],
            len(t.ops) * c["op"],
            t.num_op_args * 2,
            len(funcs) * c["name"],
            len(t.storage_bytes) * c["ptr"] if storage_data else 0,
            len(t.views) * c["view"],
            len(t.shape_layout()[0]) * 8,
            len(t.storage_bytes) * 4,
            len(t.args) * c["arg"],
            len(t.outputs) * 4,
            placed * 4,
            windows * 8,
        ]
    )


def json_parse_bytes(graph: object, tables: GraphTables, pointer_bytes: int) -> int:
    """An upper bound of ``mlf_graph_measure_json()`` for this graph on the target: the
    parser's layout (graph header, then each table 8-byte aligned, then 4 bytes per entry of
    temporary space). Like the parser it makes a view, with dimensions of its own, for every
    distinct (storage, shape, dtype) among all entries, and one more per argument of a
    ``flatten_data`` operator; it counts one function per operator (the parser's own count
    may be as high)."""
    t = tables
    c = _c_sizes(pointer_bytes)
    g = graph
    op_nodes = [n for n in g.nodes if n.op == "tvm_op"]  # type: ignore[attr-defined]
    flatten_args = sum(
        len(n.inputs) + int(n.attrs.get("num_outputs", "1"))
        for n in op_nodes
        if n.attrs.get("flatten_data", "0") == "1"
    )
    num_ops = len(op_nodes)
    num_op_args = sum(len(n.inputs) + int(n.attrs.get("num_outputs", "1")) for n in op_nodes)
    views = entry_views(g)
    num_views = len(views) + flatten_args
    shape_dims = sum(len(v.shape) for v in views) + flatten_args
    num_entries = len(g.storage_ids)  # type: ignore[attr-defined]
    return _layout_bytes(
        [
            c["graph"],
            num_ops * c["op"],
            num_op_args * 2,
            num_ops * c["name"],
            num_views * c["view"],
            shape_dims * 8,
            len(t.storage_bytes) * 4,
            len(t.args) * c["arg"],
            len(t.outputs) * 4,
            num_entries * 4,
        ]
    )
