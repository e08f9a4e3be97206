"""One liveness plan for a model's tensors and its operators' workspace windows, in one arena.

TVM's graph planner shares a storage id between tensors that are never alive together, and
before this plan the firmware reserved every storage id at its largest entry, side by side,
plus one workspace as large as the largest operator's. But an operator's workspace lives
only while that operator runs, and most tensors are dead by then: for MLPerf Tiny KWS the
two reservations came to 105,838 B while no moment of the inference needs more than 88,682 B.

**What is placed.** Blocks, each live over a range of operator calls (indices into the
tables' operator list, both ends included):

- every *tensor* of the arena: the generator first gives each tensor a storage pool of its
  own (:func:`tensor_storage_ids`: entries TVM put in one storage id stay together only
  where their lifetimes touch, i.e. a ``__nop`` reshape's input and output, which alias),
  live from the first operator that touches it to the last; the graph's inputs and the
  params copied into RAM are live across the whole run (the device protocol sets inputs
  before RUN and may run again on them), its outputs from the call that writes them to the
  end of the run (the protocol reads them after it); params bound in place in flash take no
  arena. A pool whose tensors differ in size (an output that overwrites its input and
  outgrows it, modelgen/plan.py) holds, at each call, the bytes of its tensors live then,
  from its start (``Block.parts``), not its largest over its whole life;
- every operator's *workspace window* (:mod:`.operator_workspace`), live during its own call
  only: the runtime points ``TVMBackendAllocWorkspace``'s LIFO allocator at it for that call.

**The bound.** No placement can use less than the largest sum of the blocks live during one
operator call (:func:`lower_bound`; the issue's "live tensors plus that operator's workspace").

**How they are placed: greedy by size, first fit** — the rule of TensorFlow Lite Micro's
greedy planner and of TVM's USMP ``greedy_by_size``. Blocks are taken largest first; each
goes at the lowest 64-byte aligned offset where it overlaps no already placed block that is
live at the same time. Large blocks placed first get the low offsets and small ones fill the
gaps between them, which on the chain-like graphs of microcontroller models lands at or
within a fraction of a percent of the bound (every corpus graph archive: at most 0.13 %
over it, at the runtime's 64-byte grid exactly on it); it is O(n²) in the blocks and
deterministic. Four other orders are tried as well — by size × live range ("area"), by live
range, by first use and by conflicts (a block's size plus those live with it, USMP's
``greedy_by_conflicts``) — and the smallest arena wins: each is one cheap pass, and on graphs
with long-lived skip connections one of them often beats size order (random DAGs: 0.5 %
over the bound on average with all five, 2.1 % with size order alone). No order reaches the
bound on every graph (the bound counts bytes, not how they fragment), hence no promise
beyond "sound, and as close as these passes get". Offsets are 64-byte aligned
(``MLF_STORAGE_ALIGN``: the runtime's and TVM's alignment of every tensor and workspace
block).

The JSON graph format (graph.json parsed on the device) keeps the runtime's sequential
layout of TVM's storage ids and a separate workspace: the device plans nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .executors import ExecutorKind, executor_for
from .sizes import WorkspaceEstimate
from .tables import (
    STORAGE_ALIGN,
    GraphTables,
    PlanTables,
    align_up,
    compile_graph,
)

# A graph with more tensors than the runtime has pool indices keeps TVM's storage ids.
_MAX_POOLS = 0xFFFF


@dataclass(frozen=True)
class Block:
    """Something the arena holds: ``size`` bytes live from operator ``first`` to ``last``."""

    what: str  # "pool 3", "workspace of operator 5 (node 16)"
    size: int
    first: int
    last: int
    # (first, last, bytes): a pool whose tensors differ in size (an output that overwrites
    # and outgrows its input, modelgen/plan.py) holds only the bytes of the tensors live at
    # each call, from its start; empty: ``size`` bytes over its whole life
    parts: Tuple[Tuple[int, int, int], ...] = ()

    def overlaps_in_time(self, other: Block) -> bool:
        return self.first <= other.last and other.first <= self.last

    def segments(self) -> Tuple[Tuple[int, int, int], ...]:
        """(first, last, bytes) spans that together are the block's bytes over time."""
        return self.parts or ((self.first, self.last, self.size),)

    def beside(self, other: Block) -> List[Tuple[int, int]]:
        """(bytes of this block, bytes of ``other``) for every pair of their spans live at
        the same time: the pairs of extents that may not overlap."""
        return [
            (mine, theirs)
            for f1, l1, mine in self.segments()
            for f2, l2, theirs in other.segments()
            if f1 <= l2 and f2 <= l1 and mine and theirs
        ]


@dataclass
class MemoryPlan:
    """Where every arena pool and every operator's workspace window lies in one arena."""

    pool_offsets: Dict[int, int]  # storage id -> byte offset (pools in the arena only)
    windows: List[Tuple[int, int]]  # per operator of the tables: (offset, bytes)
    arena_bytes: int  # what the arena must hold, a multiple of 64
    lower_bound: int  # the liveness lower bound (bytes; no alignment)
    tvm_bytes: int  # TVM's plan as reserved before: storage ids side by side + the workspace
    order: str  # which placement order won
    blocks: List[Tuple[Block, int]] = field(default_factory=list)  # (block, offset)
    peak_operator: str = ""  # the operator call during which the bound's bytes are live
    entry_storage: List[int] = field(default_factory=list)  # the graph entries' pools

    @property
    def over_bound(self) -> float:
        """How far the plan is above the bound, as a fraction (0.02: 2 %)."""
        return self.arena_bytes / self.lower_bound - 1 if self.lower_bound else 0.0

    @property
    def placed(self) -> List[int]:
        """``mlf_graph.placed``: the offset of each of the arena's pools, numbered first."""
        return [self.pool_offsets[sid] for sid in range(len(self.pool_offsets))]

    def tables(self) -> PlanTables:
        """The plan as the runtime's tables carry it: operators whose windows lie at the same
        place with the same size share one entry (KWS: 4 windows and the empty one for 14
        operators), the empty window first; none at all when no operator has one."""
        distinct: Dict[Tuple[int, int], int] = {(0, 0): 0}
        window_of = [
            distinct.setdefault(window if window[1] else (0, 0), len(distinct))
            for window in self.windows
        ]
        # No operator allocates: no windows (the bound workspace is left as it is).
        windows = tuple(distinct) if len(distinct) > 1 else ()
        return PlanTables(tuple(self.placed), windows, tuple(window_of), self.arena_bytes)

    @property
    def largest_window(self) -> int:
        return max((size for _, size in self.windows), default=0)

    def describe(self) -> Dict[str, Any]:
        return {
            "planned_bytes": self.arena_bytes,
            "lower_bound_bytes": self.lower_bound,
            "tvm_plan_bytes": self.tvm_bytes,
            "over_bound_percent": round(100 * self.over_bound, 3),
            "placement": f"greedy first fit, {self.order} order",
            "peak_operator": self.peak_operator,
            "placed": self.placed,
            "windows": [list(w) for w in self.windows],
        }


# --- tensors -------------------------------------------------------------------------------


def tensor_storage_ids(graph: Any) -> List[int]:
    """Storage ids for ``graph``'s entries that give every tensor a pool of its own.

    Entries TVM put in one storage id are kept together only when their lifetimes, counted
    in graph nodes (defined at their node, an argument before the first; used up to the
    last node that reads them, an output to the end), overlap: those alias (a ``__nop``'s
    input and output, the only sharing TVM's planner does between live tensors), and stay
    one pool. Entries that only reuse a dead tensor's storage get pools of their own, for the
    planner to place. The new ids are numbered in order of their first entry."""
    g = graph
    num_nodes = len(g.nodes)
    first = [0] * len(g.storage_ids)
    last = [0] * len(g.storage_ids)
    for nid, node in enumerate(g.nodes):
        start = -1 if not node.is_op else nid
        for k in range(g.node_row_ptr[nid + 1] - g.node_row_ptr[nid]):
            eid = g.node_row_ptr[nid] + k
            first[eid] = last[eid] = start
    for nid, node in enumerate(g.nodes):
        for ref in node.inputs:
            eid = g.node_row_ptr[ref[0]] + ref[1]
            last[eid] = max(last[eid], nid)
    for ref in g.heads:
        last[g.node_row_ptr[ref[0]] + ref[1]] = num_nodes
    by_storage: Dict[int, List[int]] = {}
    for eid, sid in enumerate(g.storage_ids):
        by_storage.setdefault(sid, []).append(eid)
    group_of = [0] * len(g.storage_ids)
    groups: List[int] = []  # first entry of each group, for numbering
    for sid in sorted(by_storage):
        entries = sorted(by_storage[sid], key=lambda e: (first[e], e))
        end = None
        for eid in entries:
            if end is None or first[eid] > end:
                groups.append(eid)
                end = last[eid]
            else:
                end = max(end, last[eid])
            group_of[eid] = len(groups) - 1
    if len(groups) > _MAX_POOLS:
        return list(g.storage_ids)
    order = sorted(range(len(groups)), key=lambda k: groups[k])
    renumber = {old: new for new, old in enumerate(order)}
    return [renumber[group_of[eid]] for eid in range(len(g.storage_ids))]


def _arena_first(
    graph: Any, ids: Sequence[int], params: Mapping[str, Any]
) -> Tuple[List[int], GraphTables]:
    """``ids`` renumbered so that the pools the arena holds come first and those bound to
    ``params`` after them (the plan's table of offsets, ``mlf_graph.placed``, stops where the
    arena's pools do), and the tables they give."""
    tables = compile_graph(replace(graph, storage_ids=list(ids)))
    bound = set(tables.param_bindings(params)) if params else set()
    order = sorted(set(ids), key=lambda sid: (sid in bound, sid))
    renumber = {old: new for new, old in enumerate(order)}
    ids = [renumber[sid] for sid in ids]
    return ids, compile_graph(replace(graph, storage_ids=ids))


def plan_model(
    graph: Any,
    params: Mapping[str, Any],
    window_sizes: Callable[[GraphTables], Sequence[int]],
) -> Tuple[GraphTables, MemoryPlan]:
    """The tables the firmware runs ``graph`` from and their liveness plan: every tensor is
    placed as a pool of its own (:func:`tensor_storage_ids`, :func:`plan_memory`), then the
    tensors placed at the same offset share one pool again (they are never live together),
    which gives the tables fewer pools and views than one per tensor (KWS: 7 arena pools
    for its 15 tensors), numbered before the pools bound to params. ``window_sizes``: each
    operator's window for the tables it is given."""
    ids, tables = _arena_first(graph, tensor_storage_ids(graph), params)
    in_place = set(tables.param_bindings(params)) if params else set()
    windows = list(window_sizes(tables))
    memory = plan_memory(tables, in_place, windows)
    first_at: Dict[int, int] = {}
    for sid, at in sorted(memory.pool_offsets.items()):
        if tables.storage_bytes[sid]:  # an empty tensor occupies nothing: it keeps its pool
            first_at.setdefault(at, sid)
    share = {
        sid: first_at.get(at, sid) if tables.storage_bytes[sid] else sid
        for sid, at in memory.pool_offsets.items()
    }
    shared_ids, tables = _arena_first(graph, [share.get(sid, sid) for sid in ids], params)
    memory.pool_offsets = {
        new: memory.pool_offsets[old]
        for old, new in zip(ids, shared_ids)
        if old in memory.pool_offsets
    }
    memory.entry_storage = shared_ids
    return tables, memory


# --- blocks, bound and placement -----------------------------------------------------------


def pool_blocks(tables: GraphTables, in_place: Iterable[int]) -> Dict[int, Block]:
    """{storage id: block} for every pool the arena holds (params bound in place left out)."""
    steps = max(1, len(tables.ops))
    skip = set(in_place)
    span: Dict[int, Tuple[int, int]] = {}
    for index, op in enumerate(tables.ops):
        for view in op.args:
            sid = tables.views[view].storage
            lo, hi = span.get(sid, (index, index))
            span[sid] = (min(lo, index), max(hi, index))
    inputs = {tables.views[a.view].storage for a in tables.args}
    outputs = {tables.views[v].storage for v in tables.outputs}
    growth = _growth(tables)
    blocks: Dict[int, Block] = {}
    for sid, nbytes in enumerate(tables.storage_bytes):
        if sid in skip:
            continue
        lo, hi = span.get(sid, (0, steps - 1))
        if sid in inputs:
            lo, hi = 0, steps - 1
        elif sid in outputs:
            hi = steps - 1
        parts = growth.get(sid, ()) if sid not in inputs | outputs else ()
        blocks[sid] = Block(f"pool {sid}", nbytes, lo, hi, parts if len(parts) > 1 else ())
    return blocks


def _growth(tables: GraphTables) -> Dict[int, Tuple[Tuple[int, int, int], ...]]:
    """{storage id: (first, last, bytes) per view} for the pools whose views differ in size
    (an output that overwrites and outgrows its input): each view's bytes from its first
    call to its last."""
    spans: Dict[int, Tuple[int, int]] = {}
    for index, op in enumerate(tables.ops):
        for view in op.args:
            lo, hi = spans.get(view, (index, index))
            spans[view] = (min(lo, index), max(hi, index))
    by_pool: Dict[int, List[Tuple[int, int, int]]] = {}
    for view, (lo, hi) in sorted(spans.items()):
        v = tables.views[view]
        by_pool.setdefault(v.storage, []).append((lo, hi, v.nbytes))
    return {
        sid: _profile(parts)
        for sid, parts in by_pool.items()
        if len({nbytes for _, _, nbytes in parts}) > 1
    }


def _profile(parts: Sequence[Tuple[int, int, int]]) -> Tuple[Tuple[int, int, int], ...]:
    """Spans (first, last, bytes) that may overlap in time as disjoint runs of the largest
    bytes live at each call (the views of one pool start at its first byte)."""
    lo, hi = min(p[0] for p in parts), max(p[1] for p in parts)
    runs: List[Tuple[int, int, int]] = []
    for t in range(lo, hi + 1):
        nbytes = max((n for f, last, n in parts if f <= t <= last), default=0)
        if runs and runs[-1][2] == nbytes and runs[-1][1] == t - 1:
            runs[-1] = (runs[-1][0], t, nbytes)
        else:
            runs.append((t, t, nbytes))
    return tuple(runs)


def window_blocks(tables: GraphTables, sizes: Sequence[int]) -> List[Block]:
    """One block per operator: its workspace window, live during its own call."""
    return [
        Block(f"workspace of operator {i} (node {op.node})", int(size), i, i)
        for i, (op, size) in enumerate(zip(tables.ops, sizes))
    ]


def lower_bound(blocks: Sequence[Block]) -> int:
    """The most bytes live during any one operator call: no placement can use less."""
    return peak(blocks)[0]


def peak(blocks: Sequence[Block]) -> Tuple[int, int]:
    """(bytes, call): the most bytes live during one operator call, and the first call
    (index into the tables' operators) where they are; (0, -1) without blocks."""
    if not blocks:
        return 0, -1
    steps = max(b.last for b in blocks) + 1
    delta = [0] * (steps + 1)
    for b in blocks:
        for first, last, nbytes in b.segments():
            delta[first] += nbytes
            delta[last + 1] -= nbytes
    live, best, at = 0, 0, -1
    for step, change in enumerate(delta[:steps]):
        live += change
        if live > best:
            best, at = live, step
    return best, at


def peak_operator(tables: GraphTables, call: int) -> str:
    """``operator 3 (node 9, tvmgen_default_fused_...)``: the call that sets the peak."""
    if not 0 <= call < len(tables.ops):
        return ""
    op = tables.ops[call]
    func = tables.funcs[op.func] if 0 <= op.func < len(tables.funcs) else "a copy"
    return f"operator {call} (node {op.node}, {func})"


_ORDERS: Dict[str, Callable[[Block], Tuple[int, ...]]] = {
    "size": lambda b: (-b.size, b.first - b.last),
    "area": lambda b: (-b.size * (b.last - b.first + 1), -b.size),
    "lifetime": lambda b: (b.first - b.last, -b.size),
    "first use": lambda b: (b.first, -b.size),
}


def _conflict_order(blocks: Sequence[Block]) -> Callable[[Block], Tuple[int, ...]]:
    """Largest first by the bytes a block and those live with it take (USMP's "greedy by
    conflicts"): the most contended blocks get the low offsets."""
    load = {
        id(b): b.size + sum(o.size for o in blocks if o is not b and o.overlaps_in_time(b))
        for b in blocks
    }
    return lambda b: (-load[id(b)], -b.size)


def place(blocks: Sequence[Block], key: Callable[[Block], Tuple[int, ...]]) -> List[int]:
    """First fit in the order ``key`` gives: each block at the lowest 64-byte aligned offset
    where it overlaps no placed block live at the same time. Offsets in ``blocks`` order."""
    order = sorted(range(len(blocks)), key=lambda i: (*key(blocks[i]), i))
    offsets = [0] * len(blocks)
    placed: List[int] = []
    for i in order:
        block = blocks[i]
        if block.size == 0:
            continue
        # (start, end) another block holds while this one needs ``need`` bytes
        taken = sorted(
            (offsets[j], offsets[j] + theirs, mine)
            for j in placed
            if blocks[j].overlaps_in_time(block)
            for mine, theirs in block.beside(blocks[j])
        )
        at, moved = 0, True
        while moved:  # up past every span it meets, until it meets none
            moved = False
            for start, end, need in taken:
                if at < end and start < at + need:
                    at, moved = align_up(end, STORAGE_ALIGN), True
        offsets[i] = at
        placed.append(i)
    return offsets


def arena_end(blocks: Sequence[Block], offsets: Sequence[int]) -> int:
    end = max((at + b.size for b, at in zip(blocks, offsets) if b.size), default=0)
    return align_up(end, STORAGE_ALIGN)


def plan_memory(
    tables: GraphTables,
    in_place: Iterable[int],
    window_sizes: Sequence[int],
    tvm_bytes: int = 0,
) -> MemoryPlan:
    """Places ``tables``' arena pools and one workspace window per operator (``window_sizes``,
    in operator order) in one arena (rules in the module docstring)."""
    pools = pool_blocks(tables, in_place)
    windows = window_blocks(tables, window_sizes)
    blocks: List[Block] = list(pools.values()) + windows
    best: Optional[Tuple[int, str, List[int]]] = None
    for name, key in {**_ORDERS, "conflicts": _conflict_order(blocks)}.items():
        offsets = place(blocks, key)
        size = arena_end(blocks, offsets)
        if best is None or size < best[0]:
            best = (size, name, offsets)
    assert best is not None
    size, order, offsets = best
    pool_offsets = dict(zip(pools, offsets))
    window_at = offsets[len(pools) :]
    return MemoryPlan(
        pool_offsets=pool_offsets,
        windows=[(at if b.size else 0, b.size) for b, at in zip(windows, window_at)],
        arena_bytes=size,
        lower_bound=lower_bound(blocks),
        tvm_bytes=tvm_bytes,
        order=order,
        blocks=list(zip(blocks, offsets)),
        peak_operator=peak_operator(tables, peak(blocks)[1]),
    )


def overlaps(plan: MemoryPlan) -> List[str]:
    """Pairs of blocks live at the same time whose bytes overlap (empty for a sound plan):
    the check the tests and the generator's table check apply."""
    found: List[str] = []
    items = [(b, at) for b, at in plan.blocks if b.size]
    for i, (a, at_a) in enumerate(items):
        for b, at_b in items[i + 1 :]:
            if any(at_a < at_b + theirs and at_b < at_a + mine for mine, theirs in a.beside(b)):
                found.append(f"{a.what} at {at_a} and {b.what} at {at_b}")
    return found


def plan_executor_model(
    model: Any,
    kind: ExecutorKind,
    workspace: WorkspaceEstimate,
    override: Optional[int] = None,
) -> Tuple[GraphTables, MemoryPlan]:
    """:func:`plan_model` for ``model`` as its executor kind runs it: the kind's graph, each
    call's window from the kind (``override``: option workspace_size_bytes), TVM's plan of
    the same model (its storage ids side by side, params bound in place left out, plus the
    ``workspace``) recorded beside it. Any board: the plan depends on none."""
    graph = kind.graph(model)
    params = model.params or {}
    tables, memory = plan_model(
        graph, params, partial(kind.windows, model, workspace=workspace, override=override)
    )
    tvm = compile_graph(graph)
    bound = tvm.param_bindings(params) if params else {}
    memory.tvm_bytes = tvm.arena_bytes(bound) + workspace.bytes
    memory.peak_operator += _stage_of(model, tables, peak([b for b, _ in memory.blocks])[1])
    return tables, memory


def _stage_of(model: Any, tables: GraphTables, call: int) -> str:
    """``, a tiled stage of .tflite operators 0-3`` when the call that sets the peak runs a
    tiled stage (the archive's kernels.json, compile/tiling.py); "" otherwise."""
    from ..read.kernel_forms import model_kernel_forms

    forms = model_kernel_forms(model) if 0 <= call < len(tables.ops) else None
    func = tables.ops[call].func if forms is not None else -1
    if forms is None or not 0 <= func < len(tables.funcs):
        return ""
    indices = [op.index for op in forms.operators if op.function == tables.funcs[func] and op.tiled]
    if not indices:
        return ""
    return f", a tiled stage of .tflite operators {min(indices)}-{max(indices)}"


def model_memory(model: Any) -> Optional[MemoryPlan]:
    """The liveness plan of ``model`` as const-table firmware has it (its arena:
    ``.arena_bytes``), on any board; None for an operator-style archive (no graph)."""
    kind = executor_for(model)
    if kind.name == "operator":
        return None
    return plan_executor_model(model, kind, kind.workspace(model, None))[1]
