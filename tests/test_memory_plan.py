"""The liveness plan (project_api/generate/memory_plan.py) on hand-made graphs: no two
tensors or workspace windows that are live during the same operator call share a byte, and
the plan meets the liveness lower bound, and the size of each window
(project_api/generate/operator_workspace.py) by the runtime's LIFO rule. graph_format=json
has no plan: a host firmware shows that the device lays out TVM's own storage ids."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

from project_api.driver import Project
from project_api.errors import DeviceError
from project_api.generate.memory_plan import (
    Block,
    arena_end,
    lower_bound,
    overlaps,
    peak,
    place,
    plan_model,
    tensor_storage_ids,
)
from project_api.generate.tables import MLF_FUNC_COPY, GraphTables
from project_api.modelgen import GeneratedModel
from project_api.modelgen.catalog import chain_add
from project_api.read import Graph
from project_api.run.base import live_children

# An op: (function, [input entries as (node, output)], number of outputs, output shapes).
Op = Tuple[str, List[Tuple[int, int]], List[Tuple[int, ...]]]


def graph(
    inputs: Dict[str, Tuple[int, ...]],
    ops: Sequence[Op],
    heads: Sequence[Tuple[int, int]],
    storage: Optional[Sequence[int]] = None,
) -> Graph:
    """A float32 graph: the named inputs (nodes 0..), then the ops in order. Storage ids one
    per entry unless given (TVM's sharing, to see the planner undo it)."""
    nodes: List[Dict[str, Any]] = [{"op": "null", "name": n, "inputs": []} for n in inputs]
    shapes: List[Tuple[int, ...]] = list(inputs.values())
    row_ptr = list(range(len(inputs) + 1))
    for func, refs, outs in ops:
        attrs = {"func_name": func, "num_inputs": str(len(refs)), "num_outputs": str(len(outs))}
        refs3 = [[nid, k, 0] for nid, k in refs]
        nodes.append({"op": "tvm_op", "name": func, "inputs": refs3, "attrs": attrs})
        shapes += outs
        row_ptr.append(row_ptr[-1] + len(outs))
    data = {
        "nodes": nodes,
        "arg_nodes": list(range(len(inputs))),
        "heads": [[nid, k, 0] for nid, k in heads],
        "node_row_ptr": row_ptr,
        "attrs": {
            "shape": ["list_shape", [list(s) for s in shapes]],
            "dltype": ["list_str", ["float32"] * len(shapes)],
            "storage_id": ["list_int", list(storage or range(len(shapes)))],
        },
    }
    return Graph.from_dict(data, "test.graph")


def planned(g: Graph, windows: Dict[str, int]) -> Tuple[GraphTables, Any]:
    def window_sizes(tables: GraphTables) -> List[int]:
        return [0 if op.func == MLF_FUNC_COPY else windows.get(tables.funcs[op.func], 0)
                for op in tables.ops]  # fmt: skip

    return plan_model(g, {}, window_sizes)


def with_graph(g: Graph, windows: Dict[str, int]) -> Tuple[Graph, GraphTables, Any]:
    return (g, *planned(g, windows))


def live_regions(g: Graph, tables: GraphTables, memory: Any) -> List[List[Tuple[int, int, int]]]:
    """Worked out again from the graph, not from the planner's blocks: per operator call, the
    (TVM storage id, start, end) of every entry live during it (from the node defining it to
    the last reading it; inputs always, outputs to the end; params bound in flash have no
    region) and (-1, start, end) of the call's window."""
    op_nodes = [op.node for op in tables.ops]
    end = len(g.nodes)
    first, last = {}, {}
    for nid, node in enumerate(g.nodes):
        for k in range(g.node_row_ptr[nid + 1] - g.node_row_ptr[nid]):
            eid = g.node_row_ptr[nid] + k
            first[eid] = last[eid] = -1 if not node.is_op else nid
        for ref in node.inputs:
            eid = g.node_row_ptr[ref[0]] + ref[1]
            last[eid] = max(last[eid], nid)
    for ref in g.heads:
        last[g.node_row_ptr[ref[0]] + ref[1]] = end
    for nid in g.arg_nodes:
        last[g.node_row_ptr[nid]] = end
    regions: List[List[Tuple[int, int, int]]] = [[] for _ in op_nodes]
    for eid, sid in enumerate(memory.entry_storage):
        if sid not in memory.pool_offsets:
            continue
        at = memory.pool_offsets[sid]
        for call, nid in enumerate(op_nodes):
            if first[eid] <= nid <= last[eid]:
                regions[call].append((g.storage_ids[eid], at, at + g.entry_bytes(eid)))
    for call, (at, size) in enumerate(memory.windows):
        regions[call].append((-1, at, at + size))
    return regions


def check_sound(g: Graph, tables: GraphTables, memory: Any) -> None:
    """No two regions live in one call overlap (a __nop's input and output, which TVM gave
    one storage id while both live, are one tensor); everything is inside the arena."""
    assert overlaps(memory) == []
    for call, regions in enumerate(live_regions(g, tables, memory)):
        nonempty = sorted({r for r in regions if r[2] > r[1]})
        for i, (a, a0, a1) in enumerate(nonempty):
            assert a0 % 64 == 0 and a1 <= memory.arena_bytes, (call, a)
            for b, b0, b1 in nonempty[i + 1 :]:
                alias = a == b != -1 and a0 == b0
                assert alias or a1 <= b0 or b1 <= a0, f"call {call}: [{a0},{a1}) and [{b0},{b1})"


def check(g: Graph, tables: GraphTables, memory: Any) -> None:
    """Sound, and the plan meets the bound (each block rounded up to 64 bytes, the
    runtime's grid)."""
    check_sound(g, tables, memory)
    grid = [Block(b.what, -(-b.size // 64) * 64, b.first, b.last) for b, _ in memory.blocks]
    assert memory.lower_bound <= memory.arena_bytes == lower_bound(grid)


def nbytes(shape: Tuple[int, ...]) -> int:
    return 4 * math.prod(shape)


def test_chain_reuses_two_regions() -> None:
    """x -> a -> b -> c -> d: each intermediate is dead two calls later."""
    s = (1, 64)  # 256 B
    ops: List[Op] = [("f", [(0, 0)], [s]), ("f", [(1, 0)], [s]), ("f", [(2, 0)], [s]),
                     ("f", [(3, 0)], [s])]  # fmt: skip
    g, tables, memory = with_graph(graph({"x": s}, ops, [(4, 0)]), {"f": 128})
    check(g, tables, memory)
    # x all the time, the call's input and output, its window: 3 x 256 + 128.
    assert memory.lower_bound == 3 * 256 + 128 == memory.arena_bytes


def test_diamond() -> None:
    """x -> a, x -> b, (a, b) -> c: a is live while b is computed."""
    s = (1, 32)  # 128 B
    ops: List[Op] = [("f", [(0, 0)], [s]), ("f", [(0, 0)], [s]), ("add", [(1, 0), (2, 0)], [s])]
    g, tables, memory = with_graph(graph({"x": s}, ops, [(3, 0)]), {"f": 64, "add": 0})
    check(g, tables, memory)
    assert memory.arena_bytes == 4 * 128  # x, a, b, c at the add


def test_an_output_consumed_by_a_later_operator() -> None:
    """y is an output and the input of the next call: it lives from its call to the end."""
    s = (1, 64)
    ops: List[Op] = [("f", [(0, 0)], [s]), ("f", [(1, 0)], [s]), ("f", [(2, 0)], [s])]
    g, tables, memory = with_graph(graph({"x": s}, ops, [(1, 0), (3, 0)]), {"f": 256})
    check(g, tables, memory)
    y = tables.views[tables.outputs[0]].storage
    assert y in memory.pool_offsets
    (block,) = [b for b, _ in memory.blocks if b.what == f"pool {y}"]
    assert (block.first, block.last) == (0, 2)


def test_an_input_reused_late_and_tvm_sharing_undone() -> None:
    """x feeds the first and the last call (a skip connection); TVM put a and c in one
    storage id, which the planner splits into a pool each (they are never live together)."""
    s, wide = (1, 64), (1, 256)
    ops: List[Op] = [("f", [(0, 0)], [s]), ("g", [(1, 0)], [wide]), ("f", [(2, 0)], [s]),
                     ("add", [(3, 0), (0, 0)], [s])]  # fmt: skip
    g = graph({"x": s}, ops, [(4, 0)], storage=[0, 1, 2, 1, 3])
    ids = tensor_storage_ids(g)
    assert ids[1] != ids[3]  # a and c: no longer one pool
    tables, memory = planned(g, {"f": 64, "g": 1024})
    check(g, tables, memory)
    x = tables.views[tables.args[0].view].storage
    (block,) = [b for b, _ in memory.blocks if b.what == f"pool {x}"]
    assert (block.first, block.last) == (0, len(tables.ops) - 1)


def test_zero_size_workspaces_take_nothing() -> None:
    s = (1, 16)
    ops: List[Op] = [("f", [(0, 0)], [s]), ("f", [(1, 0)], [s])]
    g, tables, memory = with_graph(graph({"x": s}, ops, [(2, 0)]), {})
    check(g, tables, memory)
    assert memory.windows == [(0, 0), (0, 0)]
    assert memory.tables().windows == () and memory.tables().window_of == (0, 0)  # no table
    assert memory.arena_bytes == 3 * 64


def test_one_huge_workspace() -> None:
    """One call takes 1 MiB of scratch: the others' tensors fit beside it, nothing is
    reserved twice, and the window lies where no live tensor is."""
    s = (1, 256)  # 1 KiB
    ops: List[Op] = [("f", [(0, 0)], [s]), ("huge", [(1, 0)], [s]), ("f", [(2, 0)], [s])]
    g, tables, memory = with_graph(graph({"x": s}, ops, [(3, 0)]), {"huge": 1 << 20, "f": 512})
    check(g, tables, memory)
    assert memory.arena_bytes == (1 << 20) + 3 * 1024  # x, the huge call's in and out
    assert memory.largest_window == 1 << 20


def test_a_nop_reshape_keeps_its_tensor_in_one_pool() -> None:
    """A __nop's input and output are one tensor (TVM shares their storage id)."""
    ops: List[Op] = [("f", [(0, 0)], [(2, 8)]), ("__nop", [(1, 0)], [(16,)]),
                     ("f", [(2, 0)], [(16,)])]  # fmt: skip
    g = graph({"x": (16,)}, ops, [(3, 0)], storage=[0, 1, 1, 2])
    ids = tensor_storage_ids(g)
    assert ids[1] == ids[2]
    tables, memory = planned(g, {"f": 64})
    check(g, tables, memory)
    assert len(tables.ops) == 2  # the __nop vanished: its output is a view of the pool


def test_random_graphs_are_planned_soundly_near_the_bound() -> None:
    """Random DAGs (long-lived skip connections, three functions' windows): every plan is
    sound, most are on the 64-byte bound, none far above it."""
    rng = np.random.default_rng(7)
    excess = []
    for _ in range(60):
        n = int(rng.integers(2, 12))
        ops: List[Op] = []
        for i in range(n):
            refs = sorted({int(r) for r in rng.integers(0, i + 1, size=rng.integers(1, 3))})
            ops.append((f"f{i % 3}", [(r, 0) for r in refs], [(1, int(rng.integers(1, 600)))]))
        windows = {f"f{k}": int(rng.integers(0, 4)) * 512 for k in range(3)}
        g, tables, memory = with_graph(graph({"x": (1, 64)}, ops, [(n, 0)]), windows)
        check_sound(g, tables, memory)
        grid = [Block(b.what, -(-b.size // 64) * 64, b.first, b.last) for b, _ in memory.blocks]
        excess.append(memory.arena_bytes / lower_bound(grid) - 1)
    assert np.mean(excess) < 0.01 and max(excess) < 0.2
    assert sum(1 for e in excess if e == 0) >= len(excess) * 3 // 4


def test_greedy_first_fit_fills_gaps() -> None:
    blocks = [Block("a", 256, 0, 1), Block("b", 256, 2, 3), Block("c", 128, 1, 2)]
    offsets = place(blocks, lambda b: (-b.size,))
    assert offsets[0] == offsets[1] == 0 and offsets[2] == 256


def _json_run(project: Project, model: GeneratedModel) -> None:
    """Builds ``project`` and runs it once: outputs bit-exact to the model's reference."""
    project.build()
    inputs = model.sample_inputs()
    with project.session(timeout=30) as session:
        got = session.run(inputs)
    want = model.reference(inputs)
    assert got.keys() == want.keys()
    for name, array in want.items():
        assert np.array_equal(got[name], array), name


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def _arena(src: Path, old: int, new: int) -> None:
    """The firmware's arena (its one, shared ``mlf_arena``) and the model's size of it."""
    _edit(
        src / "mlf_models.h", f"#define MLF_ARENA_BYTES {old}u", f"#define MLF_ARENA_BYTES {new}u"
    )
    _edit(src / "model_chain_add_3.c", f"#define ARENA_BYTES {old}u", f"#define ARENA_BYTES {new}u")


def test_json_graphs_keep_tvm_storage(tmp_path: Path) -> None:
    """graph_format=json: the device parses TVM's own storage ids (no plan). The factory's
    chain of three adds: its TVM storage plan puts x and the three sums in ids 0, 1, 2, 1: three
    1,024-byte pools where one per entry takes four. The firmware gets the archive's graph.json
    as it is and no plan; it runs bit-exact in TVM's layout (3,072 B) and is refused one byte
    less: what it needs is what it parsed. The control: the same firmware with the sharing
    undone in its graph.json (ids 0, 1, 2, 3; state for four pools) is refused in that arena,
    and runs in 4,096 B."""
    model = chain_add(3)
    assert model.lowered.storage_ids == [0, 1, 2, 1] and model.storage_bytes == [1024] * 3
    archive = model.write(tmp_path / "chain.tar")
    project = Project.generate(archive, tmp_path / "p", options={"graph_format": "json"})
    (info,) = project.models
    assert info["graph_format"] == "json" and info["memory_plan"] is None
    assert info["sizes"]["arena_bytes"] == 3 * 1024
    src = project.dir / "src"
    graph_json = src / "graph_chain_add_3.json"
    member = "executor-config/graph/chain_add_3.graph"
    assert graph_json.read_bytes() == model.members()[member]  # TVM's graph, as it is
    model_c = src / "model_chain_add_3.c"
    assert "mlf_graph_parse_json(" in model_c.read_text()
    _json_run(project, model)

    # One byte less: the runtime refuses, its need being the layout it parsed.
    _arena(src, 3072, 3071)
    with pytest.raises(DeviceError, match="arena too small"):
        _json_run(project, model)

    # The control: TVM's sharing undone in the firmware's graph.json (state for four pools).
    graph = json.loads(graph_json.read_text())
    assert graph["attrs"]["storage_id"][1] == [0, 1, 2, 1]
    graph["attrs"]["storage_id"][1] = [0, 1, 2, 3]
    graph_json.write_text(json.dumps(graph))
    _edit(
        model_c,
        "STATE_BYTES (MLF_EXECUTOR_STATE_BYTES(1u, 3u,",
        "STATE_BYTES (MLF_EXECUTOR_STATE_BYTES(1u, 4u,",
    )
    _arena(src, 3071, 3072)
    with pytest.raises(DeviceError, match="arena too small"):
        _json_run(project, model)
    _arena(src, 3072, 4096)
    _json_run(project, model)
    assert live_children() == []


@pytest.mark.parametrize("sizes", [[0], [64, 0, 64], [4096]])
def test_bound_of_windows_alone(sizes: List[int]) -> None:
    blocks = [Block(f"w{i}", n, i, i) for i, n in enumerate(sizes)]
    assert lower_bound(blocks) == max(sizes)


def test_corpus_graphs_are_planned_soundly_near_the_bound(mlf_corpus: Path) -> None:
    """Every real TVM archive (graph and AOT): sound, and within 3 % of the liveness lower
    bound or on it at the runtime's 64-byte grid (the tiny mlp: 16-byte tensors each take a
    64-byte slot)."""
    from conftest import corpus_archives

    from project_api.board import load_board
    from project_api.generate.plan import plan_models
    from project_api.read import open_archive

    board = load_board("qemu-mps2-an385")
    for archive in corpus_archives(aot=True):
        with open_archive(archive) as opened:
            for plan in plan_models(opened, "*", board):
                memory = plan.memory
                check_sound(plan.kind.graph(plan.model), plan.tables, memory)
                grid = [
                    Block(b.what, -(-b.size // 64) * 64, b.first, b.last) for b, _ in memory.blocks
                ]
                assert memory.arena_bytes <= max(1.03 * memory.lower_bound, lower_bound(grid))
                assert memory.arena_bytes <= plan.tvm_plan_bytes


def test_windows_follow_the_runtime_lifo_rule(tmp_path: Path) -> None:
    """Each block from the next 64-byte boundary, a 4-byte link for each block below the
    topmost (crt/include/mlf_runtime.h); sizes that are not literals: TVM's figure with a
    padding block and a link per allocation call, never less than the calls can take."""
    from types import SimpleNamespace

    from project_api.generate.operator_workspace import function_windows
    from project_api.generate.sizes import figure_bytes, lifo_bytes

    alloc = "  void* {v} = TVMBackendAllocWorkspace(1, dev_id, {n}, 0, 8);\n"
    head = "TVM_DLL int32_t {f}(void* args, int32_t* t, int32_t n) {{\n"
    source = tmp_path / "lib1.c"
    source.write_text(
        head.format(f="dw")  # KWS's depthwise convolution: two nested blocks
        + alloc.format(v="a", n="(uint64_t)24192")
        + alloc.format(v="b", n="(uint64_t)32000")
        + "  return 0;\n}\n"
        + head.format(f="pad")
        + alloc.format(v="a", n="(uint64_t)1392")  # one block: no link, fits 1408
        + "  return 0;\n}\n"
        + head.format(f="caller")
        + alloc.format(v="a", n="(uint64_t)100")
        + "  pad(args, t, n);\n  return 0;\n}\n"
        + head.format(f="twenty")
        + "".join(alloc.format(v=f"b{i}", n="size") for i in range(20))
        + "  return 0;\n}\n"
    )
    figures = [{"function_name": "twenty", "workspace": [{"workspace_size_bytes": 320}]}]
    model = SimpleNamespace(
        sources=[source], metadata={"memory": {"functions": {"operator_functions": figures}}}
    )
    windows = function_windows(model, ["dw", "pad", "caller", "twenty", "object_only"], 999)
    assert windows["dw"] == 56256 == 24192 + 32000 + 4 + 60  # 56,192 before the link
    assert windows["pad"] == 1408
    assert windows["caller"] == 1536 == 128 + 4 + 1392 + 12  # pad's block on top of its own
    # Twenty 16-byte blocks need 1,308 B; TVM's figure says 320, the rule before gave 576.
    assert lifo_bytes([16] * 20) == 1308 <= windows["twenty"] == 1600
    assert windows["object_only"] == 999  # nothing tells: the model-wide estimate
    assert function_windows(model, ["dw"], 999, adapter={"dw": 2752})["dw"] == 59008
    # Without the C, one block per 16 bytes of the figure: still enough for twenty.
    assert figure_bytes(320, None) >= lifo_bytes([16] * 20)


def test_peak_names_the_call_that_sets_it() -> None:
    blocks = [Block("a", 100, 0, 1), Block("b", 50, 1, 2), Block("c", 120, 2, 3)]
    assert peak(blocks) == (170, 2)  # b and c live during call 2
    assert peak([]) == (0, -1)


def test_a_pool_that_grows_holds_its_live_bytes_only() -> None:
    """A pool whose tensors grow (an output that overwrites and outgrows its input) holds 64
    bytes during calls 0 and 1, 192 after: a tensor live at call 0 only fits beside it."""
    grows = Block("g", 192, 0, 3, ((0, 1, 64), (2, 3, 192)))
    other = Block("a", 128, 0, 0)
    assert peak([grows, other]) == (192, 0)
    offsets = place([grows, other], lambda b: (-b.size,))
    assert offsets == [0, 64]
    assert arena_end([grows, other], offsets) == 192
    # the control: held at its largest over its whole life, they take 320 bytes
    flat = Block("g", 192, 0, 3)
    assert peak([flat, other])[0] == 320
    assert arena_end([flat, other], place([flat, other], lambda b: (-b.size,))) == 320
