"""graph.json compiled into the runtime's ``mlf_graph`` tables, emitted as const C.

The tables are the same ones ``mlf_graph_parse_json()`` builds on the device, so a firmware
can skip parsing altogether and keep its whole graph description in flash. The rules mirror
the runtime's (crt/include/mlf_runtime.h): one view per distinct (storage, shape, dtype);
``__nop`` operators vanish (their outputs already share their input's storage); ``__copy``
becomes a copy op; ``flatten_data="1"`` flattens that operator's arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import GenerateError
from ..read.dtypes import DType, UnknownDTypeError, dtype_from_numpy, parse_dtype

MLF_FUNC_COPY = 0xFFFF
STORAGE_ALIGN = 64
_MAX_VIEWS = 0xFFFF  # op_args are uint16_t view indices
_MAX_POOLS = 0xFFFF  # mlf_view.storage is a uint16_t


@dataclass(frozen=True)
class View:
    storage: int
    shape: Tuple[int, ...]
    dtype: DType

    @property
    def nbytes(self) -> int:
        return self.dtype.itemsize * math.prod(self.shape)


@dataclass(frozen=True)
class Op:
    func: int  # index into GraphTables.funcs, or MLF_FUNC_COPY
    args: Tuple[int, ...]  # view indices: inputs, then outputs
    num_outputs: int
    node: int


@dataclass(frozen=True)
class PlanTables:
    """A liveness plan as the tables carry it (``mlf_graph.placed``, ``windows``, each
    operator's ``window``, ``arena_bytes``; see :mod:`.memory_plan`)."""

    placed: Tuple[int, ...]  # arena offset of each of the first pools
    windows: Tuple[Tuple[int, int], ...]  # distinct (offset, bytes) windows, the empty first
    window_of: Tuple[int, ...]  # per operator: its index into windows
    arena_bytes: int


@dataclass(frozen=True)
class Arg:
    name: str
    view: int
    node: int


@dataclass
class GraphTables:
    num_nodes: int
    ops: List[Op] = field(default_factory=list)
    funcs: List[str] = field(default_factory=list)
    views: List[View] = field(default_factory=list)
    storage_bytes: List[int] = field(default_factory=list)
    args: List[Arg] = field(default_factory=list)
    outputs: List[int] = field(default_factory=list)

    @property
    def max_op_args(self) -> int:
        return max((len(op.args) for op in self.ops), default=0)

    @property
    def num_op_args(self) -> int:
        return sum(len(op.args) for op in self.ops)

    def written_storage(self) -> Set[int]:
        """Storage ids some operator (a copy included) writes: never bound to params."""
        return {
            self.views[v].storage
            for op in self.ops
            for v in op.args[len(op.args) - op.num_outputs :]
        }

    def param_storage(self, param_names: Iterable[str]) -> Set[int]:
        """Storage ids that parameters bound in place occupy (no operator writes them)."""
        written = self.written_storage()
        names = set(param_names)
        return {
            self.views[a.view].storage
            for a in self.args
            if a.name in names and self.views[a.view].storage not in written
        }

    def bound_in_place(self, params: Mapping[str, np.ndarray]) -> Set[int]:
        """Storage ids the runtime binds in place from a params blob made by
        :func:`~.params_blob.aligned_params` (every tensor's data 64-byte aligned): the full
        rule of ``mlf_executor_arena_bytes`` (crt/include/mlf_runtime.h)."""
        return set(self.param_bindings(params))

    def param_bindings(self, params: Mapping[str, np.ndarray]) -> Dict[int, str]:
        """{storage id: param name} for the pools a param can be bound to in place: exactly
        one graph arg views the pool, no operator writes it, and the param named like that
        arg has the arg's shape and dtype and at least the pool's bytes."""
        written = self.written_storage()
        args_on: Dict[int, List[Arg]] = {}
        for arg in self.args:
            args_on.setdefault(self.views[arg.view].storage, []).append(arg)
        bound: Dict[int, str] = {}
        for sid, on in args_on.items():
            if len(on) != 1 or sid in written:
                continue
            arg = on[0]
            value = params.get(arg.name)
            if value is None:
                continue
            view = self.views[arg.view]
            try:
                dtype = dtype_from_numpy(np.asarray(value).dtype)
            except UnknownDTypeError:
                continue
            shape = tuple(int(d) for d in np.shape(value))
            nbytes = dtype.itemsize * math.prod(shape)
            if shape == view.shape and dtype == view.dtype and nbytes >= self.storage_bytes[sid]:
                bound[sid] = arg.name
        return bound

    def arena_offsets(self, in_place_storage: Iterable[int] = ()) -> Dict[int, int]:
        """The runtime's arena rule: pools in storage-id order, each at the next 64-byte
        boundary; storage bound in place from params takes none. {storage id: offset}."""
        skip = set(in_place_storage)
        offsets: Dict[int, int] = {}
        end = 0
        for sid, nbytes in enumerate(self.storage_bytes):
            if sid not in skip:
                offsets[sid] = align_up(end, STORAGE_ALIGN)
                end = offsets[sid] + nbytes
        return offsets

    def arena_bytes(self, in_place_storage: Iterable[int] = ()) -> int:
        """The arena :meth:`arena_offsets` lays out, rounded up to 64 bytes."""
        offsets = self.arena_offsets(in_place_storage)
        end = max((at + self.storage_bytes[sid] for sid, at in offsets.items()), default=0)
        return align_up(end, STORAGE_ALIGN)

    def without_args_on(self, bound_storage: Iterable[int]) -> GraphTables:
        """These tables as the device gets them when ``mlf_graph.storage_data`` binds the
        pools ``bound_storage`` to their params: the args viewing those pools (the params)
        are left out, since they are not inputs and the tables already say where their data
        is (KWS: 50 of 51 args, about 1 KB of flash and 250 B of executor state)."""
        bound = set(bound_storage)
        kept = [a for a in self.args if self.views[a.view].storage not in bound]
        return replace(self, args=kept)

    def shape_layout(self) -> Tuple[List[int], List[int]]:
        """The dimensions of every view in one array, shared where a view's shape already
        appears in it (or overlaps its end), and each view's offset into it."""
        layout = _ShapeLayout(max((len(v.shape) for v in self.views), default=0))
        offsets = [layout.place(v.shape) for v in self.views]
        return layout.dims, offsets


class _ShapeLayout:
    """One array of dimensions that every shape is placed in, each run of up to ``longest``
    dimensions indexed by where it first starts (linear in the graph's size)."""

    def __init__(self, longest: int) -> None:
        self.longest = longest
        self.dims: List[int] = []
        self.starts: Dict[Tuple[int, ...], int] = {(): 0}

    def place(self, shape: Tuple[int, ...]) -> int:
        found = self.starts.get(shape)
        if found is not None:
            return found
        dims, n = self.dims, len(shape)
        overlap = next(
            (k for k in range(min(n, len(dims)), 0, -1) if tuple(dims[-k:]) == shape[:k]), 0
        )
        first_new = len(dims)
        dims.extend(shape[overlap:])
        for end in range(first_new + 1, len(dims) + 1):
            for length in range(1, min(self.longest, end) + 1):
                self.starts.setdefault(tuple(dims[end - length : end]), end - length)
        return len(dims) - n


def compile_graph(graph: object) -> GraphTables:
    """Builds the tables from a validated :class:`project_api.read.Graph`."""
    g = graph  # duck-typed: nodes, arg_nodes, heads, node_row_ptr, shapes, dtypes, storage_ids
    builder = _TableBuilder(g)
    return builder.build()


def entry_views(graph: object) -> Set[View]:
    """Every distinct (storage, shape, dtype) among the graph's entries, flattened by none."""
    builder = _TableBuilder(graph)
    return {builder.entry_view(eid, False) for eid in range(len(graph.storage_ids))}  # type: ignore[attr-defined]


class _TableBuilder:
    def __init__(self, graph: object) -> None:
        self.g = graph
        self.tables = GraphTables(num_nodes=len(graph.nodes))  # type: ignore[attr-defined]
        self._view_index: Dict[View, int] = {}
        self._func_index: Dict[str, int] = {}

    def build(self) -> GraphTables:
        g = self.g
        t = self.tables
        storage_ids: Sequence[int] = g.storage_ids  # type: ignore[attr-defined]
        pools = max(storage_ids, default=-1) + 1
        if pools > _MAX_POOLS:
            raise GenerateError(
                f"graph needs {pools} storage pools; the runtime's limit is {_MAX_POOLS}"
            )
        t.storage_bytes = [0] * pools
        for eid in range(len(storage_ids)):
            view = self.entry_view(eid, flatten=False)
            sid = view.storage
            t.storage_bytes[sid] = max(t.storage_bytes[sid], view.nbytes)
        for nid in g.arg_nodes:  # type: ignore[attr-defined]
            t.args.append(Arg(g.nodes[nid].name, self._view_of(nid, 0, False), nid))  # type: ignore[attr-defined]
        for nid, node in enumerate(g.nodes):  # type: ignore[attr-defined]
            if node.op == "tvm_op":
                self._add_op(nid, node)
        t.outputs = [self._view_of(h[0], h[1], False) for h in g.heads]  # type: ignore[attr-defined]
        if len(t.views) > _MAX_VIEWS:
            raise GenerateError(
                f"graph needs {len(t.views)} tensor views; the runtime's limit is {_MAX_VIEWS}"
            )
        return t

    def _add_op(self, nid: int, node: object) -> None:
        attrs = node.attrs  # type: ignore[attr-defined]
        func_name = attrs["func_name"]
        flatten = attrs.get("flatten_data", "0") == "1"
        num_outputs = int(attrs.get("num_outputs", "1"))
        inputs = [self._view_of(i[0], i[1], flatten) for i in node.inputs]  # type: ignore[attr-defined]
        outputs = [self._view_of(nid, k, flatten) for k in range(num_outputs)]
        if func_name == "__nop":
            if all(self._same_storage(a, b) for a, b in zip(inputs, outputs)):
                return
            func_name = "__copy"  # a planner that did not share storage: copying is still right
        if func_name == "__copy":
            func = MLF_FUNC_COPY
        else:
            func = self._func_index.setdefault(func_name, len(self._func_index))
            if func == len(self.tables.funcs):
                self.tables.funcs.append(func_name)
        self.tables.ops.append(Op(func, tuple(inputs + outputs), num_outputs, nid))

    def _same_storage(self, a: int, b: int) -> bool:
        return self.tables.views[a].storage == self.tables.views[b].storage

    def _view_of(self, nid: int, index: int, flatten: bool) -> int:
        eid = self.g.node_row_ptr[nid] + index  # type: ignore[attr-defined]
        view = self.entry_view(eid, flatten)
        found = self._view_index.get(view)
        if found is None:
            found = len(self.tables.views)
            self._view_index[view] = found
            self.tables.views.append(view)
        return found

    def entry_view(self, eid: int, flatten: bool) -> View:
        g = self.g
        shape = tuple(int(d) for d in g.shapes[eid])  # type: ignore[attr-defined]
        if flatten:
            shape = (math.prod(shape),)
        return View(int(g.storage_ids[eid]), shape, parse_dtype(g.dtypes[eid]))  # type: ignore[attr-defined]


def align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


# --- C emission ---------------------------------------------------------------------------


def c_string(text: str) -> str:
    """A C string literal for a raw JSON string content (names keep their JSON escapes, as
    the runtime's mlf_name does)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def json_raw(name: str) -> str:
    """How a name reads between the quotes of graph.json (the form mlf_name holds)."""
    import json

    return json.dumps(name, ensure_ascii=False)[1:-1]


def c_name(name: str) -> str:
    """An mlf_name initializer."""
    raw = json_raw(name)
    return f"{{{c_string(raw)}, {len(raw.encode('utf-8'))}u}}"


def render_c(
    tables: GraphTables,
    symbol: str,
    storage_data: Optional[Mapping[int, str]] = None,
    func_ptrs: str = "",
    plan: Optional[PlanTables] = None,
) -> str:
    """C source defining ``const mlf_graph <symbol>`` and the constants sizing its buffers.
    ``func_ptrs``: a C array of the functions in ``tables.funcs`` order, defined before this
    text; the names are then left out (the device names a failing operator by its node) and
    the executor needs no registry (``mlf_executor_init_linked``). ``plan``: the liveness
    plan (:mod:`.memory_plan`): where the arena's pools and each operator's workspace window
    lie."""
    t = tables
    lines: List[str] = [
        "/* Generated by mlf-project-api from graph.json: the executor's tables in flash. */",
        '#include "mlf_runtime.h"',
        "",
    ]
    shapes, shape_offsets = t.shape_layout()

    def array(ctype: str, name: str, items: List[str]) -> None:
        if not items:
            return
        lines.append(f"static const {ctype} {name}[] = {{")
        lines.extend(_wrap(items))
        lines.append("};")

    arg_list: List[str] = []
    op_items: List[str] = []
    window_of = plan.window_of if plan is not None else (0,) * len(t.ops)
    for op, window in zip(t.ops, window_of):
        op_items.append(
            f"{{{op.func}u, {len(op.args)}u, {op.num_outputs}u, {window}u, {len(arg_list)}u, "
            f"{op.node}u}}"
        )
        arg_list.extend(f"{v}u" for v in op.args)
    array("mlf_op", f"{symbol}_ops", op_items)
    array("uint16_t", f"{symbol}_op_args", arg_list)
    if not func_ptrs:
        array("mlf_name", f"{symbol}_funcs", [c_name(f) for f in t.funcs])
    array(
        "mlf_view",
        f"{symbol}_views",
        [
            f"{{{off}u, {v.storage}u, {len(v.shape)}u, 0u, "
            f"{{{v.dtype.code}u, {v.dtype.bits}u, {v.dtype.lanes}u}}}}"
            for v, off in zip(t.views, shape_offsets)
        ],
    )
    array("int64_t", f"{symbol}_shapes", [f"{d}" for d in shapes])
    array("uint32_t", f"{symbol}_storage_bytes", [f"{b}u" for b in t.storage_bytes])
    array(
        "mlf_arg",
        f"{symbol}_args",
        [f"{{{c_name(a.name)}, {a.view}u, {a.node}u}}" for a in t.args],
    )
    array("uint32_t", f"{symbol}_outputs", [f"{v}u" for v in t.outputs])
    if storage_data:
        array(
            "uint8_t* const",
            f"{symbol}_storage_data",
            [storage_data.get(sid, "NULL") for sid in range(len(t.storage_bytes))],
        )
    placed = plan.placed if plan is not None else ()
    windows = plan.windows if plan is not None and t.ops else ()
    array("uint32_t", f"{symbol}_placed", [f"{at}u" for at in placed])
    array("mlf_window", f"{symbol}_windows", [f"{{{at}u, {n}u}}" for at, n in windows])

    def ref(name: str, present: bool) -> str:
        return f"{symbol}_{name}" if present else "NULL"

    lines += [
        "",
        f"const mlf_graph {symbol} = {{",
        f"    {t.num_nodes}u,",
        f"    {len(t.ops)}u, {ref('ops', bool(t.ops))},",
        f"    {t.num_op_args}u, {ref('op_args', bool(arg_list))},",
        f"    {t.max_op_args}u,",
        f"    {len(t.funcs)}u, {ref('funcs', bool(t.funcs) and not func_ptrs)},",
        f"    {len(t.views)}u, {ref('views', bool(t.views))},",
        f"    {len(shapes)}u, {ref('shapes', bool(shapes))},",
        f"    {len(t.storage_bytes)}u, {ref('storage_bytes', bool(t.storage_bytes))},",
        f"    {len(t.args)}u, {ref('args', bool(t.args))},",
        f"    {len(t.outputs)}u, {ref('outputs', bool(t.outputs))},",
        f"    {ref('storage_data', bool(storage_data))},",
        f"    {func_ptrs or 'NULL'},",
        f"    {len(placed)}u, {ref('placed', bool(placed))},",
        f"    {len(windows)}u, {ref('windows', bool(windows))},",
        f"    {plan.arena_bytes if plan is not None else 0}u,",
        "};",
        "",
    ]
    return "\n".join(lines)


def state_bytes_expression(tables: GraphTables) -> str:
    """A C constant expression for the executor state these tables need."""
    t = tables
    return (
        f"MLF_EXECUTOR_STATE_BYTES({len(t.funcs)}u, {len(t.storage_bytes)}u, "
        f"{t.max_op_args}u, {len(t.args)}u)"
    )


def _wrap(items: List[str], width: int = 100) -> List[str]:
    """Initializer items packed several to a line (big graphs stay quick to compile and read)."""
    out: List[str] = []
    line = " "
    for item in items:
        piece = f" {item},"
        if len(line) + len(piece) > width and line.strip():
            out.append(line)
            line = " "
        line += piece
    if line.strip():
        out.append(line)
    return out
