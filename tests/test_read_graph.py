"""graph.json model and validation: one bad input per rule, with its JSON path."""

from __future__ import annotations

import json

import pytest
from mlf_builders import clone, small_graph

from project_api.errors import GraphError
from project_api.read import Graph

MEMBER = "executor-config/graph/default.graph"


def test_small_graph_parses():
    graph = Graph.from_json(json.dumps(small_graph()), MEMBER)
    assert graph.num_entries == 4
    assert [node.op for node in graph.nodes] == ["null", "null", "tvm_op", "tvm_op"]
    assert graph.nodes[2].inputs == [(0, 0, 0), (1, 0, 0)]
    assert graph.nodes[2].attrs["func_name"] == "tvmgen_default_fused_add"
    assert graph.arg_nodes == [0, 1]
    assert graph.heads == [(3, 0, 0)]
    assert graph.shapes == [(1, 4), (4,), (1, 4), (1, 4)]
    assert graph.dtypes == ["float32"] * 4
    assert graph.storage_ids == [0, 1, 2, 0]
    assert graph.device_index == [1, 1, 1, 1]
    assert graph.storage_scope is None
    assert graph.entry_id(3, 0) == 3
    assert [nid for nid, _ in graph.op_nodes()] == [2, 3]
    assert graph.storage_plan() == {0: 16, 1: 16, 2: 16}
    assert graph.entry_bytes(1) == 16
    assert graph.node_id("p0") == 1 and graph.node_id("nope") is None


def multi_output_graph():
    """A split node with 2 outputs, both heads; entries 0 (x), 1-2 (split), 3 (a scalar)."""
    graph = small_graph()
    graph["nodes"] = [
        {"op": "null", "name": "x", "inputs": []},
        {
            "op": "tvm_op",
            "name": "split",
            "attrs": {"func_name": "split", "num_inputs": "1", "num_outputs": "2"},
            "inputs": [[0, 0]],
        },
        {
            "op": "tvm_op",
            "name": "reshape",
            "attrs": {"func_name": "take", "num_inputs": "1", "num_outputs": "1"},
            "inputs": [[1, 1]],
        },
    ]
    graph["arg_nodes"] = [0]
    graph["heads"] = [[1, 0, 0], [2, 0, 0]]
    graph["node_row_ptr"] = [0, 1, 3, 4]
    graph["attrs"] = {
        "dltype": ["list_str", ["int8", "int8", "int8", "int8"]],
        "shape": ["list_shape", [[4], [2], [2], []]],
        "storage_id": ["list_int", [0, 1, 2, 2]],
        "storage_scope": ["list_str", ["global"] * 4],
    }
    return graph


def test_multi_output_scalar_and_entry_versions():
    graph = Graph.from_dict(multi_output_graph(), MEMBER)
    assert graph.num_entries == 4
    assert graph.nodes[1].num_outputs == 2
    assert graph.entry_id(1, 1) == 2
    assert graph.entry_bytes(3) == 1  # scalar: one element
    assert graph.storage_plan() == {0: 4, 1: 2, 2: 2}
    assert graph.storage_scope == ["global"] * 4
    assert graph.device_index is None


def test_unknown_top_level_keys_are_ignored():
    data = small_graph()
    data["metadata"] = {"anything": 1}
    assert Graph.from_dict(data, MEMBER).num_entries == 4


def bad(edit, location, fragment, base=None):
    data = clone(base if base is not None else small_graph())
    edit(data)
    with pytest.raises(GraphError) as info:
        Graph.from_dict(data, MEMBER)
    assert info.value.member == MEMBER
    assert info.value.location == location, str(info.value)
    assert fragment in info.value.problem, str(info.value)
    assert MEMBER in str(info.value) and location in str(info.value)


def set_(path, value):
    def edit(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def test_not_json():
    with pytest.raises(GraphError, match="line 1 column 2: not valid JSON"):
        Graph.from_json("{nodes", MEMBER)


def test_top_level_not_object():
    with pytest.raises(GraphError, match="top level must be a JSON object"):
        Graph.from_dict([], MEMBER)


@pytest.mark.parametrize("key", ["nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"])
def test_missing_top_level_key(key):
    bad(lambda d: d.pop(key), key, "missing")


def test_nodes_not_a_list():
    bad(set_(["nodes"], {}), "nodes", "must be a list")


def test_node_not_object():
    bad(set_(["nodes", 1], "p0"), "nodes[1]", "must be an object")


def test_node_bad_op():
    bad(set_(["nodes", 2, "op"], "relay_op"), "nodes[2].op", "must be 'null' or 'tvm_op'")


def test_node_name_missing():
    bad(lambda d: d["nodes"][0].pop("name"), "nodes[0].name", "missing or not a string")


def test_null_node_with_inputs():
    bad(set_(["nodes", 1, "inputs"], [[0, 0, 0]]), "nodes[1].inputs", "takes no inputs")


def test_op_attr_not_string():
    bad(set_(["nodes", 2, "attrs", "flatten_data"], 0), "nodes[2].attrs.flatten_data", "string")


@pytest.mark.parametrize("key", ["func_name", "num_inputs", "num_outputs"])
def test_op_attr_missing(key):
    bad(lambda d: d["nodes"][3]["attrs"].pop(key), f"nodes[3].attrs.{key}", "missing")


def test_op_num_outputs_not_a_count():
    bad(set_(["nodes", 3, "attrs", "num_outputs"], "one"), "nodes[3].attrs.num_outputs", "count")


def test_op_num_outputs_zero():
    bad(set_(["nodes", 3, "attrs", "num_outputs"], "0"), "nodes[3].attrs.num_outputs", "at least 1")


def test_op_num_inputs_disagrees():
    bad(set_(["nodes", 2, "attrs", "num_inputs"], "3"), "nodes[2].attrs.num_inputs", "has 2 inputs")


def test_input_entry_malformed():
    bad(set_(["nodes", 3, "inputs", 0], [2]), "nodes[3].inputs[0]", "must be [node_id, index")


def test_input_entry_node_out_of_range():
    bad(set_(["nodes", 3, "inputs", 0], [9, 0, 0]), "nodes[3].inputs[0]", "node id 9 out of range")


def test_input_entry_not_earlier_node():
    bad(set_(["nodes", 2, "inputs", 1], [3, 0, 0]), "nodes[2].inputs[1]", "not an earlier node")


def test_input_entry_index_out_of_range():
    bad(set_(["nodes", 3, "inputs", 0], [2, 1, 0]), "nodes[3].inputs[0]", "output index 1")


def test_row_ptr_wrong_length():
    bad(set_(["node_row_ptr"], [0, 1, 2, 3]), "node_row_ptr", "has 4 items, expected 5")


def test_row_ptr_not_starting_at_zero():
    bad(set_(["node_row_ptr"], [1, 2, 3, 4, 5]), "node_row_ptr[0]", "must be 0")


def test_row_ptr_decreasing():
    bad(set_(["node_row_ptr"], [0, 1, 0, 3, 4]), "node_row_ptr[2]", "spans -1 entries")


def test_row_ptr_span_disagrees_with_num_outputs():
    base = multi_output_graph()
    bad(set_(["node_row_ptr"], [0, 1, 2, 3]), "node_row_ptr[2]", "spans 1 entries but has 2", base)


def test_row_ptr_not_integer():
    bad(set_(["node_row_ptr", 4], "4"), "node_row_ptr[4]", "not an integer")


def test_arg_node_out_of_range():
    bad(set_(["arg_nodes"], [0, 7]), "arg_nodes[1]", "not a node id")


def test_arg_node_is_an_op():
    bad(set_(["arg_nodes"], [0, 2]), "arg_nodes[1]", "is a tvm_op")


def test_arg_node_duplicate():
    bad(set_(["arg_nodes"], [0, 1, 0]), "arg_nodes[2]", "listed twice")


def test_null_node_not_in_arg_nodes():
    # The params of an unlisted node would never be bound: the model would compute garbage.
    bad(set_(["arg_nodes"], [0]), "arg_nodes", "does not list node 1 ('p0'), a 'null' node")


def test_duplicate_input_names():
    bad(set_(["nodes", 1, "name"], "x"), "nodes[1].name", "input name 'x' also used by node 0")


def test_head_out_of_range():
    bad(set_(["heads"], [[3, 0, 0], [4, 0, 0]]), "heads[1]", "node id 4 out of range")


def test_head_index_out_of_range():
    bad(set_(["heads", 0], [3, 2, 0]), "heads[0]", "output index 2")


def test_head_malformed():
    bad(set_(["heads", 0], "3"), "heads[0]", "must be [node_id, index")


@pytest.mark.parametrize("key", ["storage_id", "shape", "dltype"])
def test_attr_list_missing(key):
    bad(lambda d: d["attrs"].pop(key), f"attrs.{key}", "missing")


def test_attrs_not_object():
    bad(set_(["attrs"], []), "attrs", "must be an object")


def test_attr_list_bad_form():
    bad(set_(["attrs", "shape"], [[1, 4]]), "attrs.shape", 'must be ["list_shape", [...]]')


@pytest.mark.parametrize(
    "key, wrong",
    [
        ("storage_id", "list_str"),
        ("shape", "list_int"),
        ("dltype", "list_shape"),
        ("device_index", "list_str"),
        ("storage_scope", "list_int"),
    ],
)
def test_attr_list_wrong_type_tag(key, wrong):
    data = small_graph()
    data["attrs"]["storage_scope"] = ["list_str", ["global"] * 4]
    bad(set_(["attrs", key, 0], wrong), f"attrs.{key}[0]", "type tag", data)


@pytest.mark.parametrize("key", ["storage_id", "shape", "dltype", "device_index"])
def test_attr_list_wrong_length(key):
    bad(lambda d: d["attrs"][key][1].pop(), f"attrs.{key}[1]", "has 3 items, expected 4 entries")


def test_unknown_dltype():
    bad(set_(["attrs", "dltype", 1, 2], "float8"), "attrs.dltype[1][2]", "unknown dtype 'float8'")


def test_negative_shape():
    bad(set_(["attrs", "shape", 1, 1], [-4]), "attrs.shape[1][1][0]", "non-negative integer")


def test_shape_not_a_list():
    bad(set_(["attrs", "shape", 1, 1], 4), "attrs.shape[1][1]", "not a shape list")


def test_shape_dim_not_integer():
    bad(set_(["attrs", "shape", 1, 3], [1, 4.0]), "attrs.shape[1][3][1]", "non-negative integer")


def test_storage_id_negative():
    bad(set_(["attrs", "storage_id", 1, 0], -1), "attrs.storage_id[1][0]", "not a storage id")


def test_device_index_not_integer():
    bad(set_(["attrs", "device_index", 1, 0], "cpu"), "attrs.device_index[1][0]", "not an integer")


def test_storage_scope_not_string():
    base = small_graph()
    base["attrs"]["storage_scope"] = ["list_str", ["global", 1, "global", "global"]]
    bad(lambda d: None, "attrs.storage_scope[1][1]", "not a string", base)


def test_duplicate_key():
    text = json.dumps(small_graph()).replace('"arg_nodes": [', '"heads": [], "arg_nodes": [', 1)
    with pytest.raises(GraphError, match=f"{MEMBER}: line 1 column .*: duplicate key 'heads'"):
        Graph.from_json(text, MEMBER)


def test_integer_too_long_for_python():
    text = json.dumps(small_graph()).replace('"arg_nodes": [0', '"arg_nodes": [' + "1" * 4301, 1)
    with pytest.raises(GraphError, match="not valid JSON: integer of 4301 digits"):
        Graph.from_json(text, MEMBER)
