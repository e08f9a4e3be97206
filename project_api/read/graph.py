"""The graph executor's configuration (graph.json / ``<mod>.graph``), parsed and validated.

Validation follows what TVM's graph executor relies on (spec tvm-c-abi.md §5), so a graph that
passes here can be laid out and run without further checks: entries are numbered through
``node_row_ptr``, every input refers to an entry of an earlier node, and the per-entry
attribute lists cover every entry. Errors are GraphErrors whose location is the JSON path of
the offending value (``nodes[3].inputs[1]``, ``attrs.shape[1][7]``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..errors import GraphError
from ..jsontext import json_problem, parse_json
from .dtypes import DType, UnknownDTypeError, parse_dtype
from .graph_runtime import PSEUDO_FUNCTIONS as PSEUDO_FUNCTIONS
from .graph_runtime import check_runtime_rules

EntryRef = Tuple[int, int, int]  # (node id, output index, version)


@dataclass(frozen=True)
class GraphNode:
    op: str  # "null" (input or constant) or "tvm_op"
    name: str
    inputs: List[EntryRef]
    attrs: Dict[str, str] = field(default_factory=dict)

    @property
    def is_op(self) -> bool:
        return self.op == "tvm_op"

    @property
    def num_outputs(self) -> int:
        return int(self.attrs.get("num_outputs", "1")) if self.is_op else 1

    @property
    def func_name(self) -> str:
        return self.attrs.get("func_name", "") if self.is_op else ""


@dataclass
class Graph:
    """A validated graph. Build it with :meth:`from_json` or :meth:`from_dict`."""

    member: str
    nodes: List[GraphNode]
    arg_nodes: List[int]
    heads: List[EntryRef]
    node_row_ptr: List[int]
    shapes: List[Tuple[int, ...]]
    dtypes: List[str]
    storage_ids: List[int]
    device_index: Optional[List[int]] = None
    storage_scope: Optional[List[str]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    _null_ids: Optional[Dict[str, int]] = field(default=None, init=False, repr=False)

    @classmethod
    def from_json(cls, text: str, member: str = "graph.json") -> Graph:
        try:
            data = parse_json(text, unique_keys=True)
        except json.JSONDecodeError as err:
            raise GraphError(member, *json_problem(err)) from None
        return cls.from_dict(data, member)

    @classmethod
    def from_dict(cls, data: Any, member: str = "graph.json") -> Graph:
        return _GraphParser(data, member).parse()

    @property
    def num_entries(self) -> int:
        return self.node_row_ptr[-1]

    def entry_id(self, nid: int, index: int = 0) -> int:
        return self.node_row_ptr[nid] + index

    def op_nodes(self) -> Iterator[Tuple[int, GraphNode]]:
        for nid, node in enumerate(self.nodes):
            if node.is_op:
                yield nid, node

    def entry_dtype(self, eid: int) -> DType:
        return parse_dtype(self.dtypes[eid])

    def entry_bytes(self, eid: int) -> int:
        """Bytes of entry ``eid``: itemsize x element count (a scalar ``[]`` is one element)."""
        return self.entry_dtype(eid).itemsize * math.prod(self.shapes[eid])

    def storage_plan(self) -> Dict[int, int]:
        """Bytes of each storage pool: the largest entry sharing that storage id."""
        plan: Dict[int, int] = {}
        for eid, sid in enumerate(self.storage_ids):
            plan[sid] = max(plan.get(sid, 0), self.entry_bytes(eid))
        return plan

    def storage_bytes(self) -> int:
        return sum(self.storage_plan().values())

    def node_id(self, name: str) -> Optional[int]:
        """The id of the ``null`` node called ``name`` (None when there is none)."""
        if self._null_ids is None:
            self._null_ids = {}
            for nid, node in enumerate(self.nodes):
                if not node.is_op:
                    self._null_ids.setdefault(node.name, nid)
        return self._null_ids.get(name)


class _GraphParser:
    """Turns raw JSON data into a Graph, checking one rule at a time in dependency order."""

    def __init__(self, data: Any, member: str) -> None:
        self.data = data
        self.member = member

    def fail(self, location: str, problem: str) -> GraphError:
        return GraphError(self.member, location, problem)

    def parse(self) -> Graph:
        if not isinstance(self.data, dict):
            raise self.fail("", "top level must be a JSON object")
        for key in ("nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"):
            if key not in self.data:
                raise self.fail(key, "missing")
        nodes = [self.parse_node(i, raw) for i, raw in enumerate(self.list_at("nodes"))]
        row_ptr = self.parse_row_ptr(nodes)
        self.check_inputs(nodes, row_ptr)
        attrs = self.parse_attrs(row_ptr[-1])
        graph = Graph(
            member=self.member,
            nodes=nodes,
            arg_nodes=self.parse_arg_nodes(nodes),
            heads=[self.parse_entry(f"heads[{i}]", h) for i, h in enumerate(self.list_at("heads"))],
            node_row_ptr=row_ptr,
            raw=self.data,
            **attrs,
        )
        for i, head in enumerate(graph.heads):
            self.check_entry(f"heads[{i}]", head, nodes, len(nodes))
        self.check_unique_input_names(graph)
        check_runtime_rules(graph)
        return graph

    def list_at(self, key: str) -> list:
        value = self.data[key]
        if not isinstance(value, list):
            raise self.fail(key, f"must be a list, got {type(value).__name__}")
        return value

    # --- nodes ----------------------------------------------------------------------

    def parse_node(self, nid: int, raw: Any) -> GraphNode:
        where = f"nodes[{nid}]"
        if not isinstance(raw, dict):
            raise self.fail(where, "must be an object")
        op, name = raw.get("op"), raw.get("name")
        if op not in ("null", "tvm_op"):
            raise self.fail(f"{where}.op", f"must be 'null' or 'tvm_op', got {op!r}")
        if not isinstance(name, str):
            raise self.fail(f"{where}.name", "missing or not a string")
        raw_inputs = raw.get("inputs", [])
        if not isinstance(raw_inputs, list):
            raise self.fail(f"{where}.inputs", "must be a list")
        inputs = [self.parse_entry(f"{where}.inputs[{i}]", e) for i, e in enumerate(raw_inputs)]
        attrs = raw.get("attrs", {})
        if not isinstance(attrs, dict):
            raise self.fail(f"{where}.attrs", "must be an object")
        if op == "tvm_op":
            self.check_op_attrs(where, attrs, len(inputs))
        elif inputs:
            raise self.fail(f"{where}.inputs", "a 'null' node takes no inputs")
        return GraphNode(op, name, inputs, dict(attrs) if op == "tvm_op" else {})

    def check_op_attrs(self, where: str, attrs: Dict[str, Any], num_inputs: int) -> None:
        for key, value in attrs.items():
            if not isinstance(value, str):
                raise self.fail(f"{where}.attrs.{key}", f"must be a string, got {value!r}")
        for key in ("func_name", "num_inputs", "num_outputs"):
            if key not in attrs:
                raise self.fail(f"{where}.attrs.{key}", "missing (required for tvm_op)")
        for key in ("num_inputs", "num_outputs"):
            if not attrs[key].isdigit():
                raise self.fail(f"{where}.attrs.{key}", f"not a count: {attrs[key]!r}")
        if int(attrs["num_outputs"]) < 1:
            raise self.fail(f"{where}.attrs.num_outputs", "must be at least 1")
        if int(attrs["num_inputs"]) != num_inputs:
            raise self.fail(
                f"{where}.attrs.num_inputs",
                f"says {attrs['num_inputs']} but the node has {num_inputs} inputs",
            )

    def parse_entry(self, where: str, raw: Any) -> EntryRef:
        ok = isinstance(raw, list) and len(raw) in (2, 3) and all(_is_int(v) for v in raw)
        if not ok:
            raise self.fail(
                where, f"must be [node_id, index] or [node_id, index, version]: {raw!r}"
            )
        return (raw[0], raw[1], raw[2] if len(raw) == 3 else 0)

    def check_entry(self, where: str, entry: EntryRef, nodes: List[GraphNode], limit: int) -> None:
        """An entry must name an output that exists on a node before ``limit``."""
        nid, index, _ = entry
        if not 0 <= nid < len(nodes):
            raise self.fail(where, f"node id {nid} out of range (0..{len(nodes) - 1})")
        if nid >= limit:
            raise self.fail(where, f"refers to node {nid}, not an earlier node (order)")
        if not 0 <= index < nodes[nid].num_outputs:
            raise self.fail(
                where, f"output index {index} but node {nid} has {nodes[nid].num_outputs} outputs"
            )

    def check_inputs(self, nodes: List[GraphNode], row_ptr: List[int]) -> None:
        for nid, node in enumerate(nodes):
            for i, entry in enumerate(node.inputs):
                self.check_entry(f"nodes[{nid}].inputs[{i}]", entry, nodes, nid)

    # --- node_row_ptr, arg_nodes ----------------------------------------------------

    def parse_row_ptr(self, nodes: List[GraphNode]) -> List[int]:
        row_ptr = self.list_at("node_row_ptr")
        if len(row_ptr) != len(nodes) + 1:
            raise self.fail(
                "node_row_ptr", f"has {len(row_ptr)} items, expected {len(nodes) + 1} (nodes + 1)"
            )
        for i, value in enumerate(row_ptr):
            if not _is_int(value):
                raise self.fail(f"node_row_ptr[{i}]", f"not an integer: {value!r}")
        if row_ptr[0] != 0:
            raise self.fail("node_row_ptr[0]", f"must be 0, got {row_ptr[0]}")
        for nid, node in enumerate(nodes):
            span = row_ptr[nid + 1] - row_ptr[nid]
            if span != node.num_outputs:
                raise self.fail(
                    f"node_row_ptr[{nid + 1}]",
                    f"node {nid} spans {span} entries but has {node.num_outputs} outputs",
                )
        return list(row_ptr)

    def parse_arg_nodes(self, nodes: List[GraphNode]) -> List[int]:
        seen = set()
        arg_nodes = self.list_at("arg_nodes")
        for i, nid in enumerate(arg_nodes):
            where = f"arg_nodes[{i}]"
            if not _is_int(nid) or not 0 <= nid < len(nodes):
                raise self.fail(where, f"not a node id: {nid!r}")
            if nodes[nid].is_op:
                raise self.fail(where, f"node {nid} is a tvm_op, not a 'null' input node")
            if nid in seen:
                raise self.fail(where, f"node {nid} listed twice")
            seen.add(nid)
        for nid, node in enumerate(nodes):
            if not node.is_op and nid not in seen:
                raise self.fail(
                    "arg_nodes",
                    f"does not list node {nid} ({node.name!r}), a 'null' node: the runtime "
                    "would never bind it to an input or a param",
                )
        return list(arg_nodes)

    def check_unique_input_names(self, graph: Graph) -> None:
        # Inputs and params are bound by name: two null nodes with one name are ambiguous.
        seen: Dict[str, int] = {}
        for nid in graph.arg_nodes:
            name = graph.nodes[nid].name
            if name in seen:
                raise self.fail(
                    f"nodes[{nid}].name", f"input name {name!r} also used by node {seen[name]}"
                )
            seen[name] = nid

    # --- attrs --------------------------------------------------------------------

    def parse_attrs(self, num_entries: int) -> Dict[str, Any]:
        attrs = self.data["attrs"]
        if not isinstance(attrs, dict):
            raise self.fail("attrs", "must be an object")
        out: Dict[str, Any] = {
            "storage_ids": self.typed_list(attrs, "storage_id", "list_int", num_entries, True),
            "shapes": self.typed_list(attrs, "shape", "list_shape", num_entries, True),
            "dtypes": self.typed_list(attrs, "dltype", "list_str", num_entries, True),
            "device_index": self.typed_list(attrs, "device_index", "list_int", num_entries, False),
            "storage_scope": self.typed_list(
                attrs, "storage_scope", "list_str", num_entries, False
            ),
        }
        self.check_values(out)
        out["shapes"] = [tuple(shape) for shape in out["shapes"]]
        return out

    def typed_list(
        self, attrs: Dict[str, Any], key: str, tag: str, count: int, required: bool
    ) -> Optional[list]:
        where = f"attrs.{key}"
        if key not in attrs:
            if required:
                raise self.fail(where, "missing")
            return None
        value = attrs[key]
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], list)):
            raise self.fail(where, f'must be ["{tag}", [...]]')
        if value[0] != tag:
            raise self.fail(f"{where}[0]", f"type tag {value[0]!r}, expected {tag!r}")
        if len(value[1]) != count:
            raise self.fail(f"{where}[1]", f"has {len(value[1])} items, expected {count} entries")
        return list(value[1])

    def check_values(self, attrs: Dict[str, Any]) -> None:
        for eid, sid in enumerate(attrs["storage_ids"]):
            if not _is_int(sid) or sid < 0:
                raise self.fail(f"attrs.storage_id[1][{eid}]", f"not a storage id: {sid!r}")
        for eid, text in enumerate(attrs["dtypes"]):
            try:
                parse_dtype(text)
            except UnknownDTypeError as err:
                raise self.fail(f"attrs.dltype[1][{eid}]", str(err)) from None
        for eid, (shape, text) in enumerate(zip(attrs["shapes"], attrs["dtypes"])):
            self.check_shape(f"attrs.shape[1][{eid}]", shape)
            size = parse_dtype(text).itemsize * math.prod(shape)
            if size > MAX_TENSOR_BYTES:
                raise self.fail(
                    f"attrs.shape[1][{eid}]",
                    f"a tensor of {size:,} bytes; the runtime's tables hold sizes in 32 bits",
                )
        for eid, device in enumerate(attrs["device_index"] or []):
            if not _is_int(device):
                raise self.fail(f"attrs.device_index[1][{eid}]", f"not an integer: {device!r}")
        for eid, scope in enumerate(attrs["storage_scope"] or []):
            if not isinstance(scope, str):
                raise self.fail(f"attrs.storage_scope[1][{eid}]", f"not a string: {scope!r}")

    def check_shape(self, where: str, shape: Any) -> None:
        if not isinstance(shape, list):
            raise self.fail(where, f"not a shape list: {shape!r}")
        for i, dim in enumerate(shape):
            if not _is_int(dim) or dim < 0:
                raise self.fail(f"{where}[{i}]", f"not a non-negative integer: {dim!r}")


MAX_TENSOR_BYTES = (1 << 32) - 1


def _is_int(value: Any) -> bool:
    # JSON booleans are ints in Python; a graph never means true/false as a number.
    return isinstance(value, int) and not isinstance(value, bool)
