"""Params file against its graph, and bad members surfacing through open_archive."""

from __future__ import annotations

import numpy as np
import pytest
from mlf_builders import mlf_files, small_graph, with_json, write_dir

from project_api.errors import GraphError, ParamsError
from project_api.read import BFLOAT16, Graph, open_archive, save_params
from project_api.read.layout import check_params_against_graph

PARAMS = "parameters/default.params"
GRAPH = "executor-config/graph/default.graph"


def bad_params(tmp_path, params, location, fragment):
    files = mlf_files(7)
    files[PARAMS] = save_params(params)
    with pytest.raises(ParamsError) as info:
        open_archive(write_dir(tmp_path / "a", files))
    assert info.value.member == PARAMS
    assert info.value.location == location, str(info.value)
    assert fragment in info.value.problem, str(info.value)


def test_param_not_a_graph_input(tmp_path):
    params = {"p0": np.zeros(4, np.float32), "p9": np.zeros(1, np.float32)}
    bad_params(tmp_path, params, "p9", f"is not an input of the graph {GRAPH}")


def test_param_shape_disagrees(tmp_path):
    bad_params(
        tmp_path,
        {"p0": np.zeros((2, 2), np.float32)},
        "p0",
        f"shape [2, 2] but {GRAPH} attrs.shape[1][1] is [4]",
    )


def test_param_dtype_disagrees(tmp_path):
    bad_params(
        tmp_path,
        {"p0": np.zeros(4, np.int32)},
        "p0",
        f"dtype int32 but {GRAPH} attrs.dltype[1][1] is float32",
    )


def test_fewer_params_make_more_inputs(tmp_path):
    files = mlf_files(7)
    files[PARAMS] = save_params({})
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        assert [spec.name for spec in archive.model().inputs] == ["x", "p0"]


def test_bool_and_bfloat16_params_match_graph_spelling():
    graph_data = small_graph()
    graph_data["attrs"]["dltype"][1][1] = "bool"
    graph = Graph.from_dict(graph_data, GRAPH)
    check_params_against_graph({"p0": np.zeros(4, np.bool_)}, PARAMS, graph)
    graph_data["attrs"]["dltype"][1][1] = "bfloat16"
    graph = Graph.from_dict(graph_data, GRAPH)
    check_params_against_graph({"p0": np.zeros(4, np.uint16).view(BFLOAT16)}, PARAMS, graph)


def test_corrupt_params_file_is_reported_with_offset(tmp_path):
    files = mlf_files(7)
    files[PARAMS] = files[PARAMS][:-2]
    with pytest.raises(ParamsError, match=f"{PARAMS}: offset .*: truncated"):
        open_archive(write_dir(tmp_path / "a", files))


def test_bad_graph_is_reported_with_member(tmp_path):
    files = with_json(mlf_files(7), GRAPH, lambda g: g["heads"].append([7, 0, 0]))
    with pytest.raises(GraphError, match=f"{GRAPH}: heads\\[1\\]: node id 7 out of range"):
        open_archive(write_dir(tmp_path / "a", files))


def test_graph_not_utf8(tmp_path):
    files = mlf_files(7)
    files[GRAPH] = b"\xff\xfe"
    with pytest.raises(GraphError, match="not UTF-8"):
        open_archive(write_dir(tmp_path / "a", files))


def test_second_model_is_validated_too(tmp_path):
    files = mlf_files(7, ["a", "b"])
    files["parameters/b.params"] = b"junk"
    with pytest.raises(ParamsError, match="parameters/b.params"):
        open_archive(write_dir(tmp_path / "m", files))
