"""The model factory's archives: validity, TVM's shapes, storage plans, edge cases."""

from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path
from typing import Dict, List, Set

import numpy as np
import pytest

from project_api.modelgen import (
    GeneratedModel,
    Network,
    catalog,
    chain_add,
    compare_outputs,
    params_sized,
    write_multi_model_archive,
)
from project_api.modelgen.emit import OPERATOR_FILE_HEADER, _OnePerLine, dmlc_json, registry_source
from project_api.read import load_params, open_archive

CATALOG = catalog()
FAST = [name for name in CATALOG if name != "chain_add_400"]


@pytest.fixture(scope="module")
def models() -> Dict[str, GeneratedModel]:
    return {name: factory() for name, factory in CATALOG.items()}


def graph_of(model: GeneratedModel) -> dict:
    return json.loads(model.graph_json)


def metadata_of(model: GeneratedModel, **kwargs: object) -> dict:
    return json.loads(model.members(**kwargs)["metadata.json"])  # type: ignore[arg-type]


# --- every catalog model -------------------------------------------------------------------


@pytest.mark.parametrize("name", FAST)
def test_archive_passes_the_reader(
    name: str, models: Dict[str, GeneratedModel], tmp_path: Path
) -> None:
    model = models[name]
    path = model.write(tmp_path / f"{name}.tar")
    with open_archive(path) as archive:
        assert archive.version == model.default_version
        read = archive.model(model.name)
        assert [s.name for s in read.inputs] == [s.name for s in model.inputs]
        assert [(s.shape, s.dtype) for s in read.inputs] == [
            (s.shape, s.dtype) for s in model.inputs
        ]
        assert [(s.shape, s.dtype) for s in read.outputs] == [
            (s.shape, s.dtype) for s in model.outputs
        ]
        assert set(read.params) == set(model.params)
        for key, array in model.params.items():
            np.testing.assert_array_equal(read.params[key], array)
        assert read.workspace_bytes == model.workspace_size_bytes
        assert sorted(read.operator_functions) == model.function_names


@pytest.mark.parametrize("name", FAST)
def test_reference_has_one_output_per_spec(name: str, models: Dict[str, GeneratedModel]) -> None:
    model = models[name]
    inputs = model.sample_inputs(7)
    assert [(k, v.shape, str(v.dtype)) for k, v in inputs.items()] == [
        (s.name, s.shape, s.dtype) for s in model.inputs
    ]
    outputs = model.reference(inputs)
    assert list(outputs) == [f"output{i}" for i in range(len(model.outputs))]
    for spec, array in zip(model.outputs, outputs.values()):
        assert (array.shape, str(array.dtype)) == (spec.shape, spec.dtype)
        assert np.all(np.isfinite(array))


@pytest.mark.parametrize("name", FAST)
def test_storage_plan_never_overlaps_live_tensors(
    name: str, models: Dict[str, GeneratedModel]
) -> None:
    """Independent check of the planner: simulate liveness over the graph JSON."""
    graph = graph_of(models[name])
    sids = graph["attrs"]["storage_id"][1]
    row = graph["node_row_ptr"]
    heads = {row[n] + i for n, i, _ in graph["heads"]}
    pinned = {row[n] for n in graph["arg_nodes"]} | heads
    last_use: Dict[int, int] = {}
    for nid, node in enumerate(graph["nodes"]):
        for src, index, _ in node["inputs"]:
            last_use[row[src] + index] = nid
    nops = {
        row[nid]: row[node["inputs"][0][0]] + node["inputs"][0][1]
        for nid, node in enumerate(graph["nodes"])
        if node.get("attrs", {}).get("func_name") == "__nop"
    }
    for nid, node in enumerate(graph["nodes"]):
        if node["op"] == "null" or row[nid] in nops:
            continue
        for out in range(row[nid], row[nid + 1]):
            for other in range(row[nid]):
                root = nops.get(other, other)
                alive = root in pinned or other in pinned or last_use.get(other, -1) >= nid
                alive = alive or any(
                    last_use.get(k, -1) >= nid for k, v in nops.items() if v == other
                )
                if alive:
                    assert sids[out] != sids[other], f"entry {out} overwrites live entry {other}"


@pytest.mark.parametrize("name", FAST)
def test_params_and_inputs_own_their_storage(name: str, models: Dict[str, GeneratedModel]) -> None:
    graph = graph_of(models[name])
    sids = graph["attrs"]["storage_id"][1]
    row = graph["node_row_ptr"]
    args = [sids[row[n]] for n in graph["arg_nodes"]]
    assert len(set(args)) == len(args)
    nop_outputs = {
        row[nid]
        for nid, node in enumerate(graph["nodes"])
        if node.get("attrs", {}).get("func_name") == "__nop"
    }
    others = [
        sids[e]
        for e in range(row[-1])
        if e not in {row[n] for n in graph["arg_nodes"]} | nop_outputs
    ]
    assert not set(args) & set(others)


def test_archives_are_reproducible(tmp_path: Path) -> None:
    first = CATALOG["cnn_int8"]().write(tmp_path / "a.tar").read_bytes()
    second = CATALOG["cnn_int8"]().write(tmp_path / "b.tar").read_bytes()
    assert first == second
    zipped_a = CATALOG["mlp"]().write(tmp_path / "a.tgz", gzip=True).read_bytes()
    zipped_b = CATALOG["mlp"]().write(tmp_path / "b.tgz", gzip=True).read_bytes()
    assert (
        zipped_a == zipped_b
        and gzip.decompress(zipped_a)[:512]
        == CATALOG["mlp"]().write(tmp_path / "c.tar").read_bytes()[:512]
    )
    with open_archive(tmp_path / "a.tgz") as archive:
        assert archive.model().name == "mlp"


def test_tar_layout_is_tvms(tmp_path: Path) -> None:
    path = CATALOG["mlp"]().write(tmp_path / "mlp.tar")
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[0] == "." and all(n.startswith("./") for n in names[1:])
    assert names == [
        ".",
        "./codegen",
        "./codegen/host",
        "./codegen/host/src",
        "./codegen/host/src/mlp_lib0.c",
        "./codegen/host/src/mlp_lib1.c",
        "./executor-config",
        "./executor-config/graph",
        "./executor-config/graph/mlp.graph",
        "./metadata.json",
        "./parameters",
        "./parameters/mlp.params",
        "./src",
        "./src/mlp.relay",
    ]
    assert {(m.uid, m.gid, m.uname, m.mtime) for m in members} == {(0, 0, "root", 1704067200)}
    assert {m.mode for m in members if m.isfile()} == {0o644}


# --- C sources ---------------------------------------------------------------------------------


def registry_names(source: str) -> List[str]:
    blob = re.search(r'\n    "(.*)",    _tvm_func_array', source).group(1)  # type: ignore[union-attr]
    raw = blob.encode().decode("unicode_escape").encode("latin-1")
    count = int.from_bytes(raw[:2], "little")
    names = raw[2:].split(b"\0")
    assert names[-1] == b"" and len(names) - 1 == count
    return [n.decode() for n in names[:-1]]


def test_registry_lists_every_function_sorted(models: Dict[str, GeneratedModel]) -> None:
    model = models["many_functions"]
    members = model.members()
    source = members["codegen/host/src/many_functions_lib0.c"].decode()
    names = registry_names(source)
    assert names == sorted(names) == model.function_names and len(names) == 40
    assert source.startswith("#include <tvm/runtime/crt/module.h>\n")
    assert "const TVMModule* TVMSystemLibEntryPoint(void) {" in source
    array = re.findall(r"\(TVMBackendPackedCFunc\)(\w+),", source)
    assert array == names
    assert {
        "codegen/host/src/many_functions_lib1.c",
        "codegen/host/src/many_functions_lib2.c",
    } <= set(members)


def test_operator_files_start_like_tvms() -> None:
    for name, data in CATALOG["cnn_nchw"]().members().items():
        if re.search(r"_lib[1-9]\d*\.c$", name):
            text = data.decode()
            assert text.startswith(OPERATOR_FILE_HEADER)
            assert text.count("TVM_DLL int32_t tvmgen_cnn_nchw_fused_") == text.count(
                "return 0;\n}"
            )


ALLOC = re.compile(
    r"void\* (\w+) = TVMBackendAllocWorkspace\(1, dev_id, \(uint64_t\)(\d+), (\d), (\d+)\);"
)
FREE = re.compile(r"if \(TVMBackendFreeWorkspace\(1, dev_id, (\w+)\) != 0\) \{\n    return -1;")


def test_workspace_protocol_in_c(models: Dict[str, GeneratedModel]) -> None:
    model = models["cnn_int8"]
    source = model.members()["codegen/host/src/cnn_int8_lib1.c"].decode()
    peaks = []
    for function in source.split("TVM_DLL int32_t ")[1:]:
        allocs, frees = ALLOC.findall(function), FREE.findall(function)
        assert frees == [a[0] for a in reversed(allocs)]  # LIFO, every free checked
        assert function.count("== NULL) {\n    return -1;\n  }") == len(allocs)
        peaks.append(sum(-(-int(a[1]) // 64) * 64 for a in allocs))
        if len(allocs) == 2:
            assert [(a[0], a[2], a[3]) for a in allocs] == [
                ("pad_temp", "0", "16"),
                ("conv2d_nhwc", "0", "32"),
            ]
    assert model.workspace_size_bytes == max(peaks) > 0
    assert sorted(peaks)[-2] > 0  # two functions use the workspace


def test_function_names_follow_tvm(models: Dict[str, GeneratedModel]) -> None:
    assert models["mlp"].function_names == [
        "tvmgen_mlp_fused_nn_dense_add",
        "tvmgen_mlp_fused_nn_dense_add_nn_relu",
        "tvmgen_mlp_fused_nn_softmax",
    ]
    names = models["many_functions"].function_names
    assert (
        "tvmgen_many_functions_fused_add" in names and "tvmgen_many_functions_fused_add_39" in names
    )


def test_identical_operators_share_one_function() -> None:
    model = chain_add(100)
    graph = graph_of(model)
    ops = [n for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert len(ops) == 100 and {n["attrs"]["func_name"] for n in ops} == {
        "tvmgen_chain_add_100_fused_add"
    }


# --- edge cases --------------------------------------------------------------------------------


def test_long_names(models: Dict[str, GeneratedModel]) -> None:
    model = models["long_names"]
    longest = max(model.function_names, key=len)
    assert len(longest) > 120 and re.search(r"_[0-9a-f]{16}_?$", longest)
    assert len(model.inputs[0].name) > 80
    assert (
        registry_names(model.members()[f"codegen/host/src/{model.name}_lib0.c"].decode())
        == model.function_names
    )


def test_operator_with_more_than_nine_arguments(models: Dict[str, GeneratedModel]) -> None:
    graph = graph_of(models["many_args"])
    counts = [
        int(n["attrs"]["num_inputs"]) + int(n["attrs"]["num_outputs"])
        for n in graph["nodes"]
        if n["op"] == "tvm_op"
    ]
    assert max(counts) == 12


def test_multi_output_operator(models: Dict[str, GeneratedModel]) -> None:
    graph = graph_of(models["multi_output"])
    split = next(n for n in graph["nodes"] if n["op"] == "tvm_op")
    assert split["attrs"]["num_outputs"] == "4"
    assert [h[1] for h in graph["heads"]] == [0, 0, 3, 0]
    assert graph["node_row_ptr"][-1] == len(graph["attrs"]["shape"][1]) == 7
    assert graph["attrs"]["storage_id"][1][-1] == 0  # the reshaped input is an output


def test_scalar_shapes(models: Dict[str, GeneratedModel]) -> None:
    model = models["scalar"]
    shapes = graph_of(model)["attrs"]["shape"][1]
    assert shapes.count([]) >= 4  # input, param, two outputs
    assert model.params["p0"].shape == () and model.outputs[0].shape == ()
    assert (
        model.reference({"x": np.arange(8, dtype=np.float32), "scale": np.float32(2)})["output1"]
        == 56.5
    )


def test_multi_model_archive(tmp_path: Path) -> None:
    mlp, cnn = CATALOG["mlp"](), CATALOG["cnn_nchw"]()
    path = write_multi_model_archive([mlp, cnn], tmp_path / "two.tar")
    with open_archive(path) as archive:
        assert sorted(m.name for m in archive.models) == ["cnn_nchw", "mlp"]
    members = CATALOG["multi_model"]().members()
    assert sum(b"TVMSystemLibEntryPoint(void) {" in data for data in members.values()) == 2
    assert set(json.loads(members["metadata.json"])["modules"]) == {"mlp", "cnn_nchw"}
    with pytest.raises(ValueError, match="version 5 holds exactly one model"):
        CATALOG["multi_model"]().members(version=5)
    with pytest.raises(ValueError, match="must differ"):
        write_multi_model_archive([mlp, CATALOG["mlp"]()], tmp_path / "dup.tar")


def test_v5_flat_layout(models: Dict[str, GeneratedModel]) -> None:
    members = models["mlp_v5"].members()
    assert "executor-config/graph/graph.json" in members and "src/relay.txt" in members
    assert "parameters/mlp_v5.params" in members
    meta = json.loads(members["metadata.json"])
    assert meta["version"] == 5 and "modules" not in meta
    assert meta["target"] == {"1": "c -keys=cpu -model=host"}
    assert "inputs" not in meta["memory"]["functions"]["main"][0]
    assert json.loads(models["mlp_v6"].members()["metadata.json"])["target"] == [
        "c -keys=cpu -model=host"
    ]


def test_external_dependencies_on_demand(tmp_path: Path) -> None:
    dep = {"short_name": "cmsis-nn", "url": "https://github.com/ARM-software/CMSIS-NN.git",
           "url_type": "git", "version_spec": "v4.1.0"}  # fmt: skip
    meta = metadata_of(CATALOG["mlp"](), external_dependencies=[dep])
    assert meta["modules"]["mlp"]["external_dependencies"] == [dep]
    assert "external_dependencies" not in metadata_of(CATALOG["mlp"]())["modules"]["mlp"]


# --- graph, metadata and params details -----------------------------------------------------------


def test_metadata_v7(models: Dict[str, GeneratedModel]) -> None:
    model = models["cnn_int8"]
    meta = metadata_of(model)
    assert meta["version"] == 7
    module = meta["modules"]["cnn_int8"]
    assert module["executors"] == ["graph"] and module["style"] == "full-model"
    main = module["memory"]["functions"]["main"][0]
    assert (
        main["workspace_size_bytes"]
        == model.workspace_size_bytes
        == max(
            f["workspace"][0]["workspace_size_bytes"]
            for f in module["memory"]["functions"]["operator_functions"]
        )
    )
    assert main["inputs"] == {"input": {"dtype": "int8", "size": 1024}}
    assert main["outputs"] == {"output": {"dtype": "int8", "size": 10}}
    assert main["constants_size_bytes"] == sum(a.nbytes for a in model.params.values())
    sids = module["memory"]["sids"]
    assert [s["storage_id"] for s in sids] == list(range(len(sids)))
    assert [s["size_bytes"] for s in sids] == model.storage_bytes
    bindings = [s.get("input_binding") for s in sids if "input_binding" in s]
    assert bindings == ["input"] + [f"p{i}" for i in range(len(model.params))]
    multi = metadata_of(models["ops_zoo"])["modules"]["ops_zoo"]["memory"]["functions"]["main"][0]
    assert list(multi["outputs"]) == ["output0", "output1"]


def test_graph_nodes_like_tvm(models: Dict[str, GeneratedModel]) -> None:
    graph = graph_of(models["ops_zoo"])
    args = [graph["nodes"][n]["name"] for n in graph["arg_nodes"]]
    assert args[:2] == ["x", "z"] and args[2:] == [f"p{i}" for i in range(len(args) - 2)]
    assert graph["arg_nodes"][:2] == [0, 1]
    for node in graph["nodes"]:
        if node["op"] == "tvm_op":
            assert list(node["attrs"])[:4] == [
                "num_outputs",
                "num_inputs",
                "flatten_data",
                "func_name",
            ]
            assert all(isinstance(v, str) for v in node["attrs"].values())
            assert re.fullmatch(r"[0-9a-f]{16}", node["attrs"]["hash"])
    funcs = [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert "__copy" in funcs and "__nop" in funcs
    assert graph["attrs"]["device_index"][1] == [1] * graph["node_row_ptr"][-1]


def test_nop_output_shares_its_input_storage(models: Dict[str, GeneratedModel]) -> None:
    graph = graph_of(models["digits"])
    sids, row = graph["attrs"]["storage_id"][1], graph["node_row_ptr"]
    nop = next(
        i for i, n in enumerate(graph["nodes"]) if n.get("attrs", {}).get("func_name") == "__nop"
    )
    assert graph["nodes"][nop]["name"] == "reshape_nop"
    assert sids[row[nop]] == sids[row[graph["nodes"][nop]["inputs"][0][0]]] == 0


def test_chain_add_ping_pongs_between_two_storage_ids() -> None:
    for n in (10, 100, 400):
        model = chain_add(n)
        sids = graph_of(model)["attrs"]["storage_id"][1]
        assert sids[0] == 0 and set(sids[1:]) == {1, 2}
        assert sum(model.storage_bytes) == 3 * 1024
        assert len(model.params) == 0


def test_params_sized_scales() -> None:
    for nbytes in (1024, 64 * 1024, 4 * 1024 * 1024):
        total = sum(a.nbytes for a in params_sized(nbytes).params.values())
        assert abs(total - nbytes) <= max(0.05 * nbytes, 300)


def test_params_file_round_trips(models: Dict[str, GeneratedModel]) -> None:
    model = models["cnn_int8"]
    loaded = load_params(model.members()["parameters/cnn_int8.params"])
    assert list(loaded) == [f"p{i}" for i in range(len(model.params))]
    assert [a.dtype.name for a in loaded.values()] == [
        "int8",
        "int32",
        "int32",
        "int32",
        "int8",
        "int32",
        "int8",
        "int32",
    ]


def test_relay_placeholder(models: Dict[str, GeneratedModel]) -> None:
    text = models["mlp"].members()["src/mlp.relay"].decode()
    assert text.startswith("def @main(%x: Tensor[(1, 16), float32], %p0: Tensor[(32, 16), float32]")
    assert "%2 = tvmgen_mlp_fused_nn_softmax(%1) /* ty=Tensor[(1, 10), float32] */;" in text


# --- cross-checks with real TVM output -----------------------------------------------------------


def tvm_member(corpus: Path, archive: str, suffix: str) -> str:
    with tarfile.open(corpus / f"{archive}.tar") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(suffix))
        data = tar.extractfile(member)
        assert data is not None
        return data.read().decode()


def test_registry_matches_tvm_byte_for_byte(mlf_corpus: Path) -> None:
    for archive, mod in (("mnist8", "mnist"), ("kws_int8", "kws"), ("mlp_default", "default")):
        text = tvm_member(mlf_corpus, archive, f"{mod}_lib0.c")
        names = re.findall(r"\(TVMBackendPackedCFunc\)(\w+),", text)
        assert registry_source(names) == text


def test_graph_json_format_matches_tvm_byte_for_byte(mlf_corpus: Path) -> None:
    for archive, member in (("mnist8", "mnist.graph"), ("multi_out", "multi.graph")):
        text = tvm_member(mlf_corpus, archive, member)
        graph = json.loads(text)
        for node in graph["nodes"]:
            node["inputs"] = [_OnePerLine(e) for e in node["inputs"]]
        graph["heads"] = [_OnePerLine(h) for h in graph["heads"]]
        assert dmlc_json(graph) == text


def test_operator_header_and_plan_match_tvm_mlp(mlf_corpus: Path) -> None:
    assert tvm_member(mlf_corpus, "mlp_default", "default_lib1.c").startswith(OPERATOR_FILE_HEADER)
    rng = np.random.default_rng(0)
    net = Network("default")
    x = net.input("x", (1, 16))
    h = net.dense(x, rng.standard_normal((32, 16)), rng.standard_normal(32), relu=True)
    net.output(net.softmax(net.dense(h, rng.standard_normal((4, 32)))))
    ours = graph_of(net.build())
    theirs = json.loads(tvm_member(mlf_corpus, "mlp_default", "default.graph"))
    for key in ("arg_nodes", "heads", "node_row_ptr"):
        assert ours[key] == theirs[key]
    assert ours["attrs"]["storage_id"] == theirs["attrs"]["storage_id"]
    assert [n["name"] for n in ours["nodes"] if n["op"] == "null"] == ["x", "p0", "p1", "p2"]


# --- builder errors and helpers ------------------------------------------------------------------


def test_builder_rejects_bad_descriptions() -> None:
    with pytest.raises(ValueError, match="C identifier"):
        Network("bad-name")
    net = Network("bad")
    x = net.input("x", (1, 8))
    with pytest.raises(ValueError, match="disagree on K"):
        net.dense(x, np.zeros((4, 9), np.float32))
    with pytest.raises(ValueError, match="duplicate input"):
        net.input("x", (1, 8))
    with pytest.raises(ValueError, match="collides"):
        net.input("p3", (1,))
    with pytest.raises(ValueError, match="computed by an operator"):
        net.output(x)
    with pytest.raises(ValueError, match="no outputs"):
        net.build()
    with pytest.raises(ValueError, match="do not broadcast"):
        net.add(x, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="shift must be"):
        net.qdense(
            net.input("q", (1, 4), "int8"),
            np.zeros((2, 4), np.int8),
            np.zeros(2, np.int32),
            multiplier=1 << 30,
            shift=40,
        )


def test_reference_checks_inputs(models: Dict[str, GeneratedModel]) -> None:
    model = models["mlp"]
    with pytest.raises(KeyError, match="missing input 'x'"):
        model.reference({})
    with pytest.raises(ValueError, match=r"must be float32\[1, 16\]"):
        model.reference({"x": np.zeros((1, 16), np.float64)})


def test_compare_outputs() -> None:
    want = {"output0": np.array([1.0, 1e-9, -2.0], np.float32), "output1": np.array([3], np.int8)}
    close = {
        "output0": np.array([1.000005, 2e-9, -2.0], np.float32),
        "output1": np.array([3], np.int8),
    }
    assert compare_outputs(close, want) == []
    far = {"output0": np.array([1.1, 0.0, -2.0], np.float32), "output1": np.array([4], np.int8)}
    assert len(compare_outputs(far, want)) == 2
    assert compare_outputs({}, want) == ["output0: missing", "output1: missing"]


def test_catalog_names() -> None:
    expected: Set[str] = {"mlp", "cnn_nchw", "cnn_nhwc", "cnn_int8", "long_names", "many_args",
                          "multi_output", "scalar", "failing", "multi_model", "mlp_v5",
                          "chain_add_10", "chain_add_100", "chain_add_400", "params_1k",
                          "digits"}  # fmt: skip
    assert expected <= set(CATALOG)
