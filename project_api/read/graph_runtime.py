"""What the firmware's runtime asks of a graph beyond TVM's format (crt/src/mlf_executor.c).

The generator compiles a graph into the runtime's ``mlf_graph`` tables
(:mod:`project_api.generate.tables`) and checks them as ``mlf_graph_check()`` does
(:mod:`project_api.generate.table_check`). Every rule of that check that an archive (rather
than a generator bug) can break is checked here, when the archive is read, so that ``info``
refuses what ``generate`` would: the tables count in 16 bits, and ``__nop``/``__copy`` move
one tensor to another of the same size.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Dict, Set, Tuple

from ..errors import GraphError
from .dtypes import DType, parse_dtype

if TYPE_CHECKING:
    from .graph import Graph

# The tables' indices are uint16_t (mlf_view.storage, op_args, function and arg counts).
MAX_COUNT = 0xFFFF
# func_name values the graph executor handles itself rather than calling generated code.
PSEUDO_FUNCTIONS = ("__nop", "__copy")

_View = Tuple[int, Tuple[int, ...], DType]


def check_runtime_rules(graph: Graph) -> None:
    """Raises :class:`GraphError` for what the runtime's tables cannot hold or do."""
    _check_pseudo_operators(graph)
    _check_counts(graph)


def _check_pseudo_operators(graph: Graph) -> None:
    # __nop is a reshape whose output shares its input's storage (the runtime copies when the
    # planner did not share it); __copy copies. Either way one tensor becomes another of the
    # same size: the runtime refuses anything else.
    for nid, node in graph.op_nodes():
        func = node.func_name
        if func not in PSEUDO_FUNCTIONS:
            continue
        where = f"nodes[{nid}]"
        if len(node.inputs) != 1 or node.num_outputs != 1:
            raise GraphError(
                graph.member,
                where,
                f"{func} node {node.name!r} has {len(node.inputs)} inputs and "
                f"{node.num_outputs} outputs; a {func} takes one tensor and gives one",
            )
        source, _, _ = node.inputs[0]
        in_bytes = graph.entry_bytes(graph.entry_id(source, node.inputs[0][1]))
        out_bytes = graph.entry_bytes(graph.entry_id(nid))
        if in_bytes != out_bytes:
            raise GraphError(
                graph.member,
                where,
                f"{func} node {node.name!r} turns {in_bytes} bytes into {out_bytes}; a {func} "
                "keeps its input's size",
            )


def _check_counts(graph: Graph) -> None:
    pools = max(graph.storage_ids, default=-1) + 1
    if pools > MAX_COUNT:
        eid = graph.storage_ids.index(pools - 1)
        raise GraphError(
            graph.member,
            f"attrs.storage_id[1][{eid}]",
            f"storage id {pools - 1} makes {pools} storage pools; the runtime's tables hold "
            f"at most {MAX_COUNT}",
        )
    if len(graph.arg_nodes) > MAX_COUNT:
        raise GraphError(
            graph.member,
            "arg_nodes",
            f"{len(graph.arg_nodes)} inputs and params; the runtime's tables hold at most "
            f"{MAX_COUNT}",
        )
    functions: Dict[str, None] = {}
    for nid, node in graph.op_nodes():
        arguments = len(node.inputs) + node.num_outputs
        if arguments > MAX_COUNT:
            raise GraphError(
                graph.member,
                f"nodes[{nid}]",
                f"operator {node.name!r} takes {arguments} tensors (inputs and outputs); the "
                f"runtime's tables hold at most {MAX_COUNT}",
            )
        if node.func_name not in PSEUDO_FUNCTIONS:
            functions.setdefault(node.func_name, None)
            if len(functions) > MAX_COUNT:
                raise GraphError(
                    graph.member,
                    f"nodes[{nid}].attrs.func_name",
                    f"the graph calls more than {MAX_COUNT} distinct functions, the most the "
                    "runtime's tables hold",
                )
    views = len(tensor_views(graph))
    if views > MAX_COUNT:
        raise GraphError(
            graph.member,
            "attrs",
            f"{views} distinct tensor views (storage, shape, dtype); the runtime's tables hold "
            f"at most {MAX_COUNT}",
        )


def tensor_views(graph: Graph) -> Set[_View]:
    """The distinct (storage id, shape, dtype) the runtime's tables describe: every arg, head
    and operator argument, flattened for an operator with ``flatten_data="1"`` (the rule of
    :func:`project_api.generate.tables.compile_graph`)."""
    views: Set[_View] = set()

    def add(nid: int, index: int, flatten: bool) -> None:
        eid = graph.entry_id(nid, index)
        shape = graph.shapes[eid]
        views.add(
            (
                graph.storage_ids[eid],
                (math.prod(shape),) if flatten else shape,
                parse_dtype(graph.dtypes[eid]),
            )
        )

    for nid in graph.arg_nodes:
        add(nid, 0, False)
    for nid, node in graph.op_nodes():
        flatten = node.attrs.get("flatten_data", "0") == "1"
        for source, index, _ in node.inputs:
            add(source, index, flatten)
        for index in range(node.num_outputs):
            add(nid, index, flatten)
    for nid, index, _ in graph.heads:
        add(nid, index, False)
    return views
