"""metadata.json rules and file-name agreement: one bad input per rule."""

from __future__ import annotations

import pytest
from mlf_builders import mlf_files, operator_files, with_json, write_dir

from project_api.errors import MetadataError
from project_api.read import open_archive


def bad(tmp_path, files, location, fragment):
    with pytest.raises(MetadataError) as info:
        open_archive(write_dir(tmp_path / "a", files))
    assert info.value.member == "metadata.json"
    assert info.value.location == location, str(info.value)
    assert fragment in info.value.problem, str(info.value)


def edit_model(version, edit, names="default"):
    """Edit the (first) per-model dict of a version-``version`` archive."""

    def apply(meta):
        edit(meta["modules"]["default"] if version >= 7 else meta)

    return with_json(mlf_files(version, names), "metadata.json", apply)


def test_not_json(tmp_path):
    files = mlf_files(7)
    files["metadata.json"] = b'{"version": 7,'
    bad(tmp_path, files, "line 1 column 15", "not valid JSON")


def test_not_an_object(tmp_path):
    files = mlf_files(7)
    files["metadata.json"] = b"[7]"
    bad(tmp_path, files, "", "top level must be a JSON object")


def test_version_missing(tmp_path):
    bad(
        tmp_path,
        with_json(mlf_files(7), "metadata.json", lambda m: m.pop("version")),
        "version",
        "missing",
    )


def test_version_not_integer(tmp_path):
    bad(
        tmp_path,
        with_json(mlf_files(7), "metadata.json", lambda m: m.update(version="7")),
        "version",
        "must be an integer",
    )


@pytest.mark.parametrize("version", [0, 8])
def test_version_out_of_range(tmp_path, version):
    files = with_json(mlf_files(7), "metadata.json", lambda m: m.update(version=version))
    bad(tmp_path, files, "version", f"unsupported version {version}")


def test_v7_without_modules(tmp_path):
    files = with_json(mlf_files(7), "metadata.json", lambda m: m.pop("modules"))
    bad(tmp_path, files, "modules", "missing")


def test_v7_modules_empty(tmp_path):
    files = with_json(mlf_files(7), "metadata.json", lambda m: m.update(modules={}))
    bad(tmp_path, files, "modules", "non-empty object")


def test_v7_module_not_object(tmp_path):
    files = with_json(mlf_files(7), "metadata.json", lambda m: m["modules"].update(default=[]))
    bad(tmp_path, files, "modules.default", "must be an object")


def test_v7_key_and_model_name_disagree(tmp_path):
    files = edit_model(7, lambda m: m.update(model_name="other"))
    bad(tmp_path, files, "modules.default.model_name", "is 'other' but the module key")


@pytest.mark.parametrize(
    "version, location", [(6, "model_name"), (7, "modules.default.model_name")]
)
def test_model_name_missing(tmp_path, version, location):
    bad(tmp_path, edit_model(version, lambda m: m.pop("model_name")), location, "missing")


def test_model_name_not_string(tmp_path):
    bad(tmp_path, edit_model(6, lambda m: m.update(model_name=3)), "model_name", "must be a str")


def test_model_name_unusable(tmp_path):
    bad(
        tmp_path, edit_model(6, lambda m: m.update(model_name="../x")), "model_name", "not a usable"
    )


def test_style_required_from_v4(tmp_path):
    bad(tmp_path, edit_model(4, lambda m: m.pop("style")), "style", "required since version 4")


def test_style_unknown(tmp_path):
    bad(tmp_path, edit_model(6, lambda m: m.update(style="half")), "style", "must be one of")


def test_executors_missing(tmp_path):
    bad(tmp_path, edit_model(6, lambda m: m.pop("executors")), "executors", "missing")


def test_executors_not_list(tmp_path):
    bad(
        tmp_path,
        edit_model(6, lambda m: m.update(executors="graph")),
        "executors",
        "must be a list",
    )


def test_executor_unknown(tmp_path):
    bad(
        tmp_path, edit_model(6, lambda m: m.update(executors=["vm"])), "executors", "exactly one of"
    )


def test_runtimes_key_of_early_versions(tmp_path):
    bad(tmp_path, edit_model(2, lambda m: m.update(runtimes=[])), "runtimes", "exactly one of")


def test_target_wrong_type(tmp_path):
    bad(tmp_path, edit_model(6, lambda m: m.update(target="c")), "target", "object or a list")


def test_target_missing(tmp_path):
    bad(tmp_path, edit_model(7, lambda m: m.pop("target")), "modules.default.target", "object or")


def test_target_entry_not_string(tmp_path):
    bad(tmp_path, edit_model(6, lambda m: m.update(target=["c", 1])), "target[1]", "not a string")


def test_memory_wrong_type(tmp_path):
    bad(tmp_path, edit_model(6, lambda m: m.update(memory="big")), "memory", "must be an object")


def test_workspace_not_a_byte_count(tmp_path):
    def edit(meta):
        meta["memory"]["functions"]["main"][0]["workspace_size_bytes"] = -1

    location = "modules.default.memory.functions.main[0].workspace_size_bytes"
    bad(tmp_path, edit_model(7, edit), location, "not a byte count")


def test_workspace_beyond_32_bits(tmp_path):
    def edit(meta):
        meta["memory"]["functions"]["main"][0]["workspace_size_bytes"] = 1 << 32

    location = "modules.default.memory.functions.main[0].workspace_size_bytes"
    bad(tmp_path, edit_model(7, edit), location, "sizes in 32 bits")


def test_dependencies_not_list(tmp_path):
    files = edit_model(6, lambda m: m.update(external_dependencies={}))
    bad(tmp_path, files, "external_dependencies", "must be a list")


def test_dependency_not_object(tmp_path):
    files = edit_model(6, lambda m: m.update(external_dependencies=["cmsis"]))
    bad(tmp_path, files, "external_dependencies[0]", "must be an object")


def test_dependency_field_missing(tmp_path):
    dep = {"short_name": "cmsis-nn", "url_type": "git", "version_spec": "v1"}
    files = edit_model(6, lambda m: m.update(external_dependencies=[dep]))
    bad(tmp_path, files, "external_dependencies[0].url", "missing or not a string")


def test_dependency_version_spec_not_string(tmp_path):
    dep = {"short_name": "c", "url": "u", "url_type": "git", "version_spec": 5}
    files = edit_model(6, lambda m: m.update(external_dependencies=[dep]))
    bad(tmp_path, files, "external_dependencies[0].version_spec", "must be a string")


def test_aot_io_size_not_multiple_of_dtype(tmp_path):
    def edit(meta):
        meta["executors"] = ["aot"]
        meta["memory"]["functions"]["main"][0]["inputs"] = {"x": {"size": 6, "dtype": "float32"}}

    bad(
        tmp_path,
        edit_model(7, edit),
        "modules.default.memory.functions.main.inputs.x.size",
        "not a byte size of float32",
    )


def test_aot_io_unknown_dtype(tmp_path):
    def edit(meta):
        meta["executors"] = ["aot"]
        meta["memory"]["functions"]["main"][0]["outputs"] = {"y": {"size": 4, "dtype": "q7"}}

    bad(
        tmp_path,
        edit_model(7, edit),
        "modules.default.memory.functions.main.outputs.y.dtype",
        "unknown dtype",
    )


def test_operator_style_may_stay_flat_in_v7(tmp_path):
    with open_archive(write_dir(tmp_path / "op", operator_files())) as archive:
        assert archive.model().executor == "operator"


# --- model name <-> file names --------------------------------------------------------


def test_params_file_named_after_another_model(tmp_path):
    files = mlf_files(6)
    files["parameters/other.params"] = files.pop("parameters/default.params")
    bad(
        tmp_path,
        files,
        "model_name",
        "needs parameters/default.params, but the archive holds other.params",
    )


def test_params_file_missing(tmp_path):
    files = mlf_files(7)
    del files["parameters/default.params"]
    bad(tmp_path, files, "modules.default.model_name", "holds nothing")


def test_v7_graph_named_after_another_model(tmp_path):
    files = mlf_files(7)
    files["executor-config/graph/other.graph"] = files.pop("executor-config/graph/default.graph")
    bad(
        tmp_path,
        files,
        "modules.default.model_name",
        "needs executor-config/graph/default.graph, but the archive holds other.graph",
    )


def test_v4_graph_missing(tmp_path):
    files = mlf_files(4)
    del files["runtime-config/graph/graph.json"]
    bad(tmp_path, files, "model_name", "needs runtime-config/graph/graph.json")


def test_duplicate_key(tmp_path):
    files = mlf_files(7)
    text = files["metadata.json"].decode()
    files["metadata.json"] = text.replace('"version": 7', '"version": 7, "version": 7', 1).encode()
    bad(tmp_path, files, "line 2 column 17", "duplicate key 'version'")


def test_duplicate_key_spelt_differently_in_a_model(tmp_path):
    files = mlf_files(7)
    text = files["metadata.json"].decode()
    text = text.replace(
        '"model_name": "default"', '"model_name": "default", "model\\u005fname": "x"'
    )
    files["metadata.json"] = text.encode()
    with pytest.raises(MetadataError, match="duplicate key 'model_name'"):
        open_archive(write_dir(tmp_path / "a", files))


def test_integer_too_long_for_python(tmp_path):
    files = mlf_files(7)
    files["metadata.json"] = b'{"version": ' + b"7" * 5000 + b"}"
    bad(tmp_path, files, "line 1 column 13", "integer of 5000 digits (the limit is 4300)")
