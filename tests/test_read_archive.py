"""open_archive over every layout TVM wrote: versions 1-7, multi-model, operator, AOT,
tar/gzip/directory inputs, ./ prefixes, extraction ownership."""

from __future__ import annotations

import numpy as np
import pytest
from mlf_builders import (
    STANDALONE_CRT,
    aot_files,
    mlf_files,
    operator_files,
    with_json,
    write_dir,
    write_tar,
)

from project_api.errors import ArchiveError, MlfProjectError, UnsupportedModelError
from project_api.read import Archive, Graph, Model, TensorSpec, open_archive

GRAPH_AT = {
    1: "runtime-config/graph/graph.json",
    2: "runtime-config/graph/graph.json",
    3: "runtime-config/graph/graph.json",
    4: "runtime-config/graph/graph.json",
    5: "executor-config/graph/graph.json",
    6: "executor-config/graph/graph.json",
    7: "executor-config/graph/default.graph",
}


def check_small_model(model: Model) -> None:
    assert model.executor == "graph"
    assert model.inputs == [TensorSpec("x", (1, 4), "float32")]
    assert model.outputs == [TensorSpec("output0", (1, 4), "float32")]
    assert list(model.params) == ["p0"]
    assert model.param_count == 1 and model.params_bytes == 16
    assert model.storage_bytes == 16 * 3  # sids 0, 1, 2 of 16 bytes each
    assert model.op_count == 2
    assert model.operator_functions == [
        f"tvmgen_{model.name}_fused_add",
        f"tvmgen_{model.name}_fused_nn_relu",
    ]
    assert isinstance(model.require_graph(), Graph)
    assert [p.suffix for p in model.sources] == [".c", ".c"]


@pytest.mark.parametrize("version", range(1, 8))
def test_every_version(tmp_path, version):
    path = write_tar(tmp_path / "m.tar", mlf_files(version))
    with open_archive(path) as archive:
        assert archive.version == version
        model = archive.model()
        assert model.name == "default"
        assert model.graph_member == GRAPH_AT[version]
        assert model.params_member == "parameters/default.params"
        assert model.params_path == archive.root / "parameters/default.params"
        assert model.style == "full-model"
        check_small_model(model)
        assert archive.metadata["version"] == version


def test_target_forms_are_normalised(tmp_path):
    with open_archive(write_dir(tmp_path / "v5", mlf_files(5))) as archive:
        assert archive.model().targets == ["c -keys=cpu -model=host"]
    with open_archive(write_dir(tmp_path / "v6", mlf_files(6))) as archive:
        assert archive.model().targets == ["c -keys=cpu"]


def test_v5_dict_target_is_ordered_by_device_type(tmp_path):
    files = with_json(
        mlf_files(5), "metadata.json", lambda m: m.update(target={"2": "cuda", "1": "c"})
    )
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        assert archive.model().targets == ["c", "cuda"]


@pytest.mark.parametrize("version, workspace", [(1, 0), (4, 128), (5, 128), (6, 128), (7, 128)])
def test_workspace_from_metadata(tmp_path, version, workspace):
    with open_archive(write_dir(tmp_path / "a", mlf_files(version))) as archive:
        assert archive.model().workspace_bytes == workspace


def test_workspace_picks_the_host_device(tmp_path):
    def edit(meta):
        meta["modules"]["default"]["memory"]["functions"]["main"] = [
            {"device": 2, "workspace_size_bytes": 999},
            {"device": 1, "workspace_size_bytes": 77},
        ]

    files = with_json(mlf_files(7), "metadata.json", edit)
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        assert archive.model().workspace_bytes == 77


def test_multi_model_sources_do_not_mix_prefix_names(tmp_path):
    path = write_tar(tmp_path / "multi.tar", mlf_files(7, ["mlp", "mlp_big", "big"]))
    with open_archive(path) as archive:
        assert [m.name for m in archive.models] == ["mlp", "mlp_big", "big"]
        for model in archive.models:
            check_small_model(model)
            assert [p.name for p in model.sources] == [
                f"{model.name}_lib0.c",
                f"{model.name}_lib1.c",
            ]
            assert model.graph_member == f"executor-config/graph/{model.name}.graph"
        assert archive.model("mlp_big").name == "mlp_big"
        with pytest.raises(UnsupportedModelError, match="3 models .mlp, mlp_big, big."):
            archive.model()
        with pytest.raises(UnsupportedModelError, match="no model 'nope'.*mlp, mlp_big, big"):
            archive.model("nope")


def test_sources_sorted_by_lib_number(tmp_path):
    files = mlf_files(7)
    for index in (2, 10, 3):
        files[f"codegen/host/src/default_lib{index}.c"] = b"int a;\n"
    files["codegen/host/lib/default_lib0.o"] = b"\x7fELF"
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        model = archive.model()
        names = [p.name for p in model.sources]
        assert names == [f"default_lib{i}.c" for i in (0, 1, 2, 3, 10)]
        assert [p.name for p in model.objects] == ["default_lib0.o"]
        assert model.include_dirs == []


def test_operator_style_archive(tmp_path):
    with open_archive(write_tar(tmp_path / "op.tar", operator_files())) as archive:
        model = archive.model()
        assert archive.version == 7
        assert (model.name, model.executor, model.style) == ("add_op", "operator", "operator")
        assert model.graph is None and model.params == {} and model.params_member is None
        assert [p.name for p in model.sources] == ["lib0.c"]
        assert model.operator_functions == ["add"]
        with pytest.raises(UnsupportedModelError, match="operator-style.*graph executor"):
            model.require_graph()


def test_aot_archive(tmp_path):
    with open_archive(write_tar(tmp_path / "aot.tar", aot_files())) as archive:
        model = archive.model()
        assert model.executor == "aot"
        assert model.graph is None and model.graph_member is None
        assert model.inputs == [TensorSpec("x", (1, 4), "float32")]
        assert model.outputs == [TensorSpec("output", (8,), "int8")]
        assert model.include_dirs == [archive.root / "codegen/host/include"]
        assert model.external_dependencies == [STANDALONE_CRT]
        # TVM's CRT under ./runtime is not the model's code
        assert [p.name for p in model.sources] == ["default_lib0.c", "default_lib1.c"]
        assert model.storage_bytes == 0
        with pytest.raises(UnsupportedModelError, match='AOT model.*Executor\\("graph"\\)'):
            model.require_graph()


def test_aot_tuple_outputs_in_the_headers_order(tmp_path):
    # metadata.json sorts its keys (output10 before output2): the header keeps TVM's order
    outputs = [(f"output{i}", 1) for i in (0, 1, 2, 10)]
    with open_archive(write_dir(tmp_path / "a", aot_files(outputs=outputs))) as archive:
        names = [spec.name for spec in archive.model().outputs]
        assert names == ["output0", "output1", "output2", "output10"]


def test_external_dependencies_v6(tmp_path):
    dep = {
        "short_name": "cmsis-nn",
        "url": "https://x/y.git",
        "url_type": "git",
        "version_spec": "v4.1.0",
    }
    files = mlf_files(6, dependencies=[dep])
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        assert archive.model().external_dependencies == [dep]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("suffix", [".tar", ".tar.gz", ".mlf"])
@pytest.mark.parametrize("dot_prefix", [True, False])
def test_container_variants(tmp_path, gz, suffix, dot_prefix):
    path = write_tar(tmp_path / f"m{suffix}", mlf_files(7), gz=gz, dot_prefix=dot_prefix)
    with open_archive(path) as archive:
        check_small_model(archive.model())


def test_temporary_extraction_is_removed_on_close(tmp_path):
    archive = open_archive(write_tar(tmp_path / "m.tar", mlf_files(7)))
    root = archive.root
    assert (root / "metadata.json").is_file()
    archive.close()
    assert not root.exists()
    archive.close()  # idempotent


def test_extract_to_is_kept(tmp_path):
    target = tmp_path / "out" / "model"
    with open_archive(write_tar(tmp_path / "m.tar", mlf_files(7)), extract_to=target) as archive:
        assert archive.root == target
    assert (target / "metadata.json").is_file()
    assert [p.name for p in tmp_path.joinpath("out").iterdir()] == ["model"]  # no staging left


def test_extract_to_non_empty_directory_is_refused_and_untouched(tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(ArchiveError, match="not empty"):
        open_archive(write_tar(tmp_path / "m.tar", mlf_files(7)), extract_to=target)
    assert (target / "keep.txt").read_text() == "mine"


def test_directory_input_is_never_deleted(tmp_path):
    root = write_dir(tmp_path / "extracted", mlf_files(7))
    with open_archive(root) as archive:
        assert isinstance(archive, Archive)
        assert archive.root == root
        check_small_model(archive.model())
    assert (root / "metadata.json").is_file()


def test_params_are_numpy_arrays(tmp_path):
    with open_archive(write_dir(tmp_path / "a", mlf_files(7))) as archive:
        np.testing.assert_array_equal(archive.model().params["p0"], np.arange(4, dtype=np.float32))


def test_rejected_archive_leaves_nothing(tmp_path):
    files = mlf_files(7)
    files["parameters/default.params"] = b"garbage"
    target = tmp_path / "dest"
    with pytest.raises(Exception, match="params"):
        open_archive(write_tar(tmp_path / "m.tar", files), extract_to=target)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tar"]


def test_empty_extract_to_survives_a_rejection(tmp_path):
    files = mlf_files(7)
    files["parameters/default.params"] = b"garbage"
    target = tmp_path / "dest"
    target.mkdir()
    with pytest.raises(MlfProjectError):
        open_archive(write_tar(tmp_path / "m.tar", files), extract_to=target)
    assert target.is_dir() and list(target.iterdir()) == []


def test_missing_file(tmp_path):
    with pytest.raises(ArchiveError, match="no such file"):
        open_archive(tmp_path / "absent.tar")


def test_random_file_is_not_an_archive(tmp_path):
    path = tmp_path / "noise.tar"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ArchiveError, match="not a Model Library Format archive"):
        open_archive(path)


def test_tar_without_metadata(tmp_path):
    path = write_tar(tmp_path / "x.tar", {"readme.txt": b"hi"})
    with pytest.raises(ArchiveError, match="no metadata.json"):
        open_archive(path)


def test_tar_with_nested_metadata_gets_a_hint(tmp_path):
    files = {f"model/{k}": v for k, v in mlf_files(7).items()}
    with pytest.raises(ArchiveError, match="found model/metadata.json"):
        open_archive(write_tar(tmp_path / "x.tar", files))


def test_directory_without_metadata(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArchiveError, match="no metadata.json"):
        open_archive(tmp_path / "empty")


def test_truncated_tar(tmp_path):
    raw = write_tar(tmp_path / "m.tar", mlf_files(7)).read_bytes()
    path = tmp_path / "cut.tar"
    path.write_bytes(raw[: len(raw) // 2])
    # Cut between members, tar sees an early end: the missing files are what gets reported.
    with pytest.raises(MlfProjectError):
        open_archive(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.tar", "m.tar"]


def test_truncated_member_data(tmp_path):
    files = mlf_files(7)
    files["zz_big.bin"] = b"\x01" * 5000
    raw = write_tar(tmp_path / "m.tar", files).read_bytes()
    path = tmp_path / "cut.tar"
    path.write_bytes(raw[: raw.index(b"./zz_big.bin") + 512 + 2000])  # header + 2000 of 5000
    with pytest.raises(ArchiveError, match="unreadable archive|truncated"):
        open_archive(path)


def test_real_corpus_opens(mlf_corpus):
    for path in sorted(mlf_corpus.glob("*.tar")):
        with open_archive(path) as archive:
            for model in archive.models:
                assert model.graph is not None
                assert model.sources
