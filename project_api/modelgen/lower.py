"""Lowering a Network to what TVM's graph executor codegen produces.

Graph nodes are laid out like TVM's: every model input first, then each operator preceded
by the constants it is the first to use (named ``p0, p1, ...`` in that order). Operators
whose C text is identical share one function (TVM's compile-engine cache), named
``tvmgen_<mod>_fused_<ops>`` with ``_1, _2`` suffixes for distinct functions of the same
name, fused parts cut at 80 characters plus a 16-hex-digit hash, as TVM does.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from .cgen import Body, Buffer, FunctionText, data_var, render_function, render_unpacked
from .network import ConstNode, InputNode, Network, OpNode, Value
from .ops import TensorType
from .plan import PlanNode, plan_storage, storage_sizes

MAX_FUSED_NAME = 80


@dataclass
class Function:
    name: str
    text: FunctionText
    hash: str
    unpacked: Optional[FunctionText] = None  # the same body for AOT's unpacked calls


@dataclass
class Lowered:
    """Everything the archive writer needs, computed once per model."""

    module: str
    nodes: List[dict] = field(default_factory=list)
    node_row_ptr: List[int] = field(default_factory=lambda: [0])
    entry_types: List[TensorType] = field(default_factory=list)
    arg_nodes: List[int] = field(default_factory=list)
    heads: List[Tuple[int, int]] = field(default_factory=list)
    params: Dict[str, np.ndarray] = field(default_factory=dict)
    functions: Dict[str, Function] = field(default_factory=dict)  # by name, first use order
    op_nodes: List[int] = field(default_factory=list)  # graph node id of every network op
    op_functions: List[str] = field(default_factory=list)  # func_name of every network op
    storage_ids: List[int] = field(default_factory=list)
    storage_bytes: List[int] = field(default_factory=list)
    input_bindings: Dict[int, str] = field(default_factory=dict)  # storage id -> null node
    # (scale, zero point) of quantized inputs (by name) and outputs (by index), when known
    input_quantization: Dict[str, Tuple[float, int]] = field(default_factory=dict)
    output_quantization: Dict[int, Tuple[float, int]] = field(default_factory=dict)

    @property
    def workspace_size_bytes(self) -> int:
        """Peak TVMBackendAllocWorkspace use of any one operator (64-byte blocks)."""
        used = {name for name in self.op_functions if name in self.functions}
        return max((self.functions[n].text.workspace_bytes for n in used), default=0)


class _Lowering:
    def __init__(self, network: Network) -> None:
        self.net = network
        self.out = Lowered(network.name)
        self.entry_of: Dict[int, int] = {}  # id(Value) -> entry id
        self.pair_of: Dict[int, Tuple[int, int]] = {}  # id(Value) -> (node id, output index)
        self.by_text: Dict[str, str] = {}
        self.taken: Set[str] = set()
        self.plan_nodes: List[PlanNode] = []
        keys = Counter(
            node.op.share_key([v.type for v in node.inputs])
            for node in network.ops
            if node.op.kind == "kernel"
        )
        self.shared = frozenset(k for k, count in keys.items() if k is not None and count > 1)

    def run(self) -> Lowered:
        if not self.net.outputs:
            raise ValueError(f"model {self.net.name!r} has no outputs")
        for value in self.net.inputs:
            assert isinstance(value.producer, InputNode)
            self.add_null(value.producer.name, value)
        for node in self.net.ops:
            for value in node.inputs:
                if isinstance(value.producer, ConstNode):
                    self.add_param(value)
            self.add_op(node)
        if not self.out.functions:
            raise ValueError(f"model {self.net.name!r} needs at least one operator function")
        self.out.heads = [self.entry_pair(v) for v in self.net.outputs]
        self.out.input_quantization = dict(self.net.input_quantization)
        self.out.output_quantization = dict(self.net.output_quantization)
        self.plan()
        return self.out

    def new_node(self, node: dict, outputs: List[Value]) -> int:
        nid = len(self.out.nodes)
        first = self.out.node_row_ptr[-1]
        for i, value in enumerate(outputs):
            self.entry_of[id(value)] = first + i
            self.pair_of[id(value)] = (nid, i)
            self.out.entry_types.append(value.type)
        self.out.nodes.append(node)
        self.out.node_row_ptr.append(first + len(outputs))
        return nid

    def add_null(self, name: str, value: Value) -> None:
        nid = self.new_node({"op": "null", "name": name, "inputs": []}, [value])
        self.out.arg_nodes.append(nid)
        self.plan_nodes.append(PlanNode("null", (), (self.entry_of[id(value)],)))

    def add_param(self, value: Value) -> None:
        const = value.producer
        assert isinstance(const, ConstNode)
        if id(value) in self.entry_of:
            return
        name = f"p{len(self.out.params)}"
        self.out.params[name] = const.array
        self.add_null(name, value)

    def entry_pair(self, value: Value) -> Tuple[int, int]:
        return self.pair_of[id(value)]

    def add_op(self, node: OpNode) -> None:
        op = node.op
        func_name, attrs = self.function_for(node)
        inputs = [[*self.entry_pair(v), 0] for v in node.inputs]
        graph_attrs = {
            "num_outputs": str(len(node.outputs)),
            "num_inputs": str(len(node.inputs)),
            "flatten_data": "0",
            "func_name": func_name,
            **attrs,
        }
        name = {"nop": "reshape_nop", "copy": "device_copy"}.get(op.kind, func_name)
        entry = {"op": "tvm_op", "name": name, "attrs": graph_attrs, "inputs": inputs}
        nid = self.new_node(entry, node.outputs)
        self.out.op_nodes.append(nid)
        self.out.op_functions.append(func_name)
        kind = "nop" if op.kind == "nop" else "op"
        read = tuple(self.entry_of[id(v)] for v in node.inputs)
        written = tuple(self.entry_of[id(v)] for v in node.outputs)
        inplace = op.inplace_input([v.type for v in node.inputs]) if kind == "op" else None
        self.plan_nodes.append(PlanNode(kind, read, written, inplace))

    def function_for(self, node: OpNode) -> Tuple[str, Dict[str, str]]:
        """(func_name, extra graph attrs ending with ``hash``) of an operator node."""
        op = node.op
        if op.kind != "kernel":
            func = "__nop" if op.kind == "nop" else "__copy"
            shapes = repr([v.type for v in node.inputs + node.outputs])
            return func, {"hash": short_hash(func + shapes)}
        arg_names = [f"p{i}" for i in range(len(node.inputs))] + op.output_names()
        body = Body()
        body.shared = self.shared
        ins = [Buffer(data_var(n), v.dtype, v.shape) for n, v in zip(arg_names, node.inputs)]
        outs = [
            Buffer(data_var(n), v.dtype, v.shape)
            for n, v in zip(arg_names[len(node.inputs) :], node.outputs)
        ]
        op.emit(body, ins, outs)
        text = render_function(arg_names, body)
        digest = short_hash(text.text)
        name = self.by_text.get(text.text)
        if name is None:
            name = self.unique_name(op.name_parts(), digest)
            self.by_text[text.text] = name
            unpacked = render_unpacked(arg_names, body)
            self.out.functions[name] = Function(name, text, digest, unpacked)
        return name, {**op.graph_attrs(), "hash": digest}

    def unique_name(self, parts: List[str], digest: str) -> str:
        fused = "fused_" + "_".join(parts)
        if len(fused) > MAX_FUSED_NAME:
            fused = f"{fused[:MAX_FUSED_NAME]}_{digest}"
        base = f"tvmgen_{self.net.name}_{fused}"
        if base[-1].isdigit():
            base += "_"
        name, suffix = base, 0
        while name in self.taken:
            suffix += 1
            name = f"{base}_{suffix}"
        self.taken.add(name)
        return name

    def plan(self) -> None:
        out = self.out
        entry_bytes = [t.nbytes for t in out.entry_types]
        heads = [out.node_row_ptr[nid] + index for nid, index in out.heads]
        out.storage_ids = plan_storage(self.plan_nodes, entry_bytes, heads)
        out.storage_bytes = storage_sizes(out.storage_ids, entry_bytes)
        for nid in out.arg_nodes:
            sid = out.storage_ids[out.node_row_ptr[nid]]
            out.input_bindings[sid] = out.nodes[nid]["name"]


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def lower(network: Network) -> Lowered:
    return _Lowering(network).run()


def find_function(lowered: Lowered, op_index: int) -> Optional[Function]:
    return lowered.functions.get(lowered.op_functions[op_index])
