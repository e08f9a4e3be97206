"""What the runtime's tables ask of a graph (read.graph_runtime): refused when the archive is
read, not when ``generate`` checks its tables. One bad graph per rule, with its JSON path."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
from conftest import corpus_archive, corpus_archives
from mlf_builders import clone, small_graph, tar_files, with_json, write_dir

from project_api.errors import GraphError
from project_api.generate.table_check import table_problems
from project_api.generate.tables import compile_graph
from project_api.read import Graph, open_archive
from project_api.read.graph_runtime import MAX_COUNT, tensor_views

MEMBER = "executor-config/graph/default.graph"
Edit = Callable[[Dict[str, Any]], None]


def bad(edit: Edit, location: str, fragment: str, base: Any = None) -> None:
    data = clone(base) if base is not None else small_graph()
    edit(data)
    refused(data, location, fragment)


def refused(data: Dict[str, Any], location: str, fragment: str) -> None:
    with pytest.raises(GraphError) as info:
        Graph.from_dict(data, MEMBER)
    assert info.value.location == location, str(info.value)
    assert fragment in info.value.problem, str(info.value)


def flat_graph(nulls: int, ops: List[Dict[str, Any]], shapes: List[List[int]]) -> Dict[str, Any]:
    """``nulls`` inputs (all arg nodes) then ``ops`` (dicts with func, inputs, outputs), every
    entry in storage 0; ``shapes`` per entry (float32)."""
    nodes: List[Dict[str, Any]] = [
        {"op": "null", "name": f"x{i}", "inputs": []} for i in range(nulls)
    ]
    row_ptr = list(range(nulls + 1))
    for op in ops:
        attrs = {
            "func_name": op["func"],
            "num_inputs": str(len(op["inputs"])),
            "num_outputs": str(op["outputs"]),
        }
        nodes.append({"op": "tvm_op", "name": op["func"], "attrs": attrs, "inputs": op["inputs"]})
        row_ptr.append(row_ptr[-1] + op["outputs"])
    assert len(shapes) == row_ptr[-1]
    return {
        "nodes": nodes,
        "arg_nodes": list(range(nulls)),
        "heads": [[len(nodes) - 1, 0, 0]],
        "node_row_ptr": row_ptr,
        "attrs": {
            "dltype": ["list_str", ["float32"] * len(shapes)],
            "shape": ["list_shape", shapes],
            "storage_id": ["list_int", [0] * len(shapes)],
        },
    }


def test_small_graph_tables_agree_with_the_reader() -> None:
    graph = Graph.from_dict(small_graph(), MEMBER)
    tables = compile_graph(graph)
    assert len(tensor_views(graph)) == len(tables.views)
    assert table_problems(tables, {}) == []


# --- __nop and __copy ----------------------------------------------------------------------------


def test_nop_changing_the_size() -> None:
    def edit(data: Dict[str, Any]) -> None:
        data["nodes"][3]["attrs"]["func_name"] = "__nop"
        data["attrs"]["shape"][1][3] = [1, 2]

    bad(edit, "nodes[3]", "__nop node 'tvmgen_default_fused_nn_relu' turns 16 bytes into 8")


def test_copy_of_two_inputs() -> None:
    bad(
        lambda data: data["nodes"][2]["attrs"].update(func_name="__copy"),
        "nodes[2]",
        "has 2 inputs and 1 outputs; a __copy takes one tensor and gives one",
    )


# --- the tables' 16-bit counts -------------------------------------------------------------------


def test_too_many_storage_pools() -> None:
    bad(
        lambda data: data["attrs"]["storage_id"][1].__setitem__(3, MAX_COUNT),
        "attrs.storage_id[1][3]",
        f"makes {MAX_COUNT + 1} storage pools",
    )


def test_too_many_inputs_and_params() -> None:
    n = MAX_COUNT + 1
    data = flat_graph(n, [], [[1]] * n)
    data["heads"] = [[0, 0, 0]]
    refused(data, "arg_nodes", f"{n} inputs and params")


def test_operator_with_too_many_tensors() -> None:
    n = MAX_COUNT
    data = flat_graph(1, [{"func": "split", "inputs": [[0, 0, 0]], "outputs": n}], [[1]] * (n + 1))
    refused(data, "nodes[1]", f"takes {n + 1} tensors")


def test_too_many_functions() -> None:
    n = MAX_COUNT + 1
    ops = [{"func": f"f{i}", "inputs": [[0, 0, 0]], "outputs": 1} for i in range(n)]
    data = flat_graph(1, ops, [[1]] * (n + 1))
    refused(data, f"nodes[{n}].attrs.func_name", f"more than {MAX_COUNT} distinct")


def test_too_many_tensor_views() -> None:
    n = 40_000  # two operators of n outputs, each output its own shape (x0 shares one)
    ops = [{"func": f"f{j}", "inputs": [[0, 0, 0]], "outputs": n} for j in range(2)]
    data = flat_graph(1, ops, [[1]] + [[i + 1] for i in range(n)] + [[i + 1, 1] for i in range(n)])
    refused(data, "attrs", f"{2 * n} distinct tensor views")


# --- the real corpus ---------------------------------------------------------------------------


def test_corpus_graphs_list_every_null_node_and_pass_the_tables_check() -> None:
    archives = corpus_archives()
    if not archives:
        pytest.skip("no graph archives in the corpus (MLF_PROJECT_CORPUS)")
    for path in archives:
        with tarfile.open(path) as tar:
            for info in tar.getmembers():
                if "executor-config/graph/" not in info.name or not info.isfile():
                    continue
                stream = tar.extractfile(info)
                assert stream is not None
                raw = json.loads(stream.read())
                nulls = [nid for nid, node in enumerate(raw["nodes"]) if node["op"] == "null"]
                assert sorted(raw["arg_nodes"]) == nulls, f"{path.name}: {info.name}"
        with open_archive(path) as archive:
            for model in archive.models:
                graph = model.require_graph()
                tables = compile_graph(graph)
                assert len(tensor_views(graph)) == len(tables.views), path.name
                assert table_problems(tables, {}) == [], path.name


def test_corpus_graph_with_a_param_left_out_of_arg_nodes(tmp_path: Path) -> None:
    archive = corpus_archive("mlp_default")
    if archive is None:
        pytest.skip("no mlp_default.tar in the corpus (MLF_PROJECT_CORPUS)")
    files = with_json(tar_files(archive), "executor-config/graph/default.graph",
                      lambda graph: graph.update(arg_nodes=[0]))  # fmt: skip
    with pytest.raises(GraphError, match=r"arg_nodes: does not list node 1 \("):
        open_archive(write_dir(tmp_path / "a", files))
