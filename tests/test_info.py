"""``mlf-project info``: text and --json output, exit status, and the real TVM corpus."""

from __future__ import annotations

import json

import pytest
from conftest import corpus_case
from mlf_builders import (
    aot_files,
    dmlc_string,
    mblob,
    mblob_c_source,
    mlf_files,
    operator_files,
    write_dir,
    write_tar,
)

from project_api.cli import main

JSON_MODEL_KEYS = {
    "name",
    "executor",
    "inputs",
    "outputs",
    "params_bytes",
    "storage_bytes",
    "workspace_bytes",
    "external_dependencies",
}


def run_info(capsys, *args):
    status = main(["info", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def test_text_output(tmp_path, capsys):
    status, out, err = run_info(capsys, write_tar(tmp_path / "m.tar", mlf_files(7)))
    assert status == 0 and err == ""
    assert "Model Library Format version 7, 1 model" in out
    assert "model default: graph executor, full-model" in out
    assert "x  float32[1, 4]  16 bytes" in out
    assert "output0  float32[1, 4]  16 bytes" in out
    assert "params: 1 tensors, 16 bytes" in out
    assert "storage plan: 48 bytes" in out
    assert "workspace (metadata): 128 bytes" in out
    assert "operators: 2 calls, 2 functions" in out
    assert "tvmgen_default_fused_nn_relu" in out
    assert "external dependencies: none" in out


def test_json_output(tmp_path, capsys):
    status, out, _ = run_info(capsys, write_tar(tmp_path / "m.tar", mlf_files(5)), "--json")
    assert status == 0
    data = json.loads(out)
    assert data["version"] == 5
    (model,) = data["models"]
    assert set(model) >= JSON_MODEL_KEYS
    assert model["inputs"] == [{"name": "x", "shape": [1, 4], "dtype": "float32"}]
    assert model["outputs"] == [{"name": "output0", "shape": [1, 4], "dtype": "float32"}]
    assert (model["params_bytes"], model["storage_bytes"], model["workspace_bytes"]) == (
        16,
        48,
        128,
    )
    assert model["external_dependencies"] == []
    assert model["operator_functions"] == [
        "tvmgen_default_fused_add",
        "tvmgen_default_fused_nn_relu",
    ]


def test_aot_and_operator_archives(tmp_path, capsys):
    status, out, _ = run_info(capsys, write_dir(tmp_path / "aot", aot_files()))
    assert status == 0
    assert "model default: aot executor" in out
    assert "storage plan: - (no graph)" in out
    assert "tvm_standalone_crt (mlf_path: ./runtime @ 0.14.0)" in out
    status, out, _ = run_info(capsys, write_dir(tmp_path / "op", operator_files()), "--json")
    assert status == 0
    assert json.loads(out)["models"][0]["executor"] == "operator"


def test_bad_archive_exits_2_with_one_line(tmp_path, capsys):
    files = mlf_files(7)
    files["parameters/default.params"] = b"\x00" * 40
    status, out, err = run_info(capsys, write_tar(tmp_path / "m.tar", files))
    assert status == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("mlf-project info: error: parameters/default.params: offset 0: bad")


def test_missing_archive(tmp_path, capsys):
    status, _, err = run_info(capsys, tmp_path / "nope.tar", "--json")
    assert status == 2 and "no such file or directory" in err


def test_export_library_artifact_is_explained(tmp_path, capsys):
    blob = mblob([dmlc_string("cuda") + b"\x00" * 12])
    tar = write_tar(tmp_path / "deploy.tar", {"devc.c": mblob_c_source(blob).encode()})
    status, _, err = run_info(capsys, tar)
    assert status == 2 and err.count("\n") == 1
    assert "export_library artifact" in err and "library (compiled host code) -> [cuda]" in err
    assert "tvm.micro.export_model_library_format" in err


def corpus_params():
    from conftest import corpus_archives

    archives = corpus_archives()
    return archives or [pytest.param(None, id="no-corpus")]


@pytest.mark.parametrize("archive", corpus_params(), ids=lambda p: getattr(p, "stem", str(p)))
def test_real_corpus_info_matches_reference(mlf_corpus, archive, capsys):
    if archive is None:
        pytest.skip(f"no *.tar in {mlf_corpus}")
    case = corpus_case(archive)
    status, out, err = run_info(capsys, archive, "--json")
    assert status == 0, err
    data = json.loads(out)
    models = {model["name"]: model for model in data["models"]}
    assert sorted(models) == sorted(case.get("all_models", [case["model_name"]]))
    model = models[case["model_name"]]
    assert model["executor"] == case["executor"]
    expected_inputs = [
        {"name": name, "shape": shape, "dtype": dtype}
        for name, (shape, dtype) in case["inputs"].items()
    ]
    expected_outputs = [
        {"name": name, "shape": shape, "dtype": dtype}
        for name, (shape, dtype) in case["outputs"].items()
    ]
    assert model["inputs"] == expected_inputs
    assert model["outputs"] == expected_outputs
    assert model["storage_bytes"] > 0 and model["op_count"] > 0
    if "members" in case:
        sources = [m[2:] for m in case["members"] if m.startswith("./codegen/")]
        assert model["sources"] == sources
        assert f"./{model['graph']}" in case["members"]
        assert f"./{model['params']}" in case["members"]


GOOD_DEP = {"short_name": "foo", "url": "./foo", "url_type": "path"}


@pytest.mark.parametrize(
    "deps, fragment",
    [
        ([{**GOOD_DEP, "url_type": "svn"}], "(foo): 'url_type' 'svn' is not one of git, url"),
        ([{**GOOD_DEP, "short_name": "foo bar;$(x)"}], "'short_name' 'foo bar;$(x)' must be"),
        ([{**GOOD_DEP, "license": "MIT"}], "unknown key(s) license"),
        ([GOOD_DEP, {**GOOD_DEP, "url": "/tmp"}], "'foo' is declared twice with different url"),
        ([{**GOOD_DEP, "url_type": "git"}], "'version_spec' is required for a git dependency"),
        ([{**GOOD_DEP, "url_type": "mlf_path", "url": "../.."}], "must be a relative path inside"),
        ([{**GOOD_DEP, "url_type": "mlf_path", "url": "nothing"}], "is not a directory of the"),
    ],
)
def test_bad_external_dependencies_are_refused_as_generate_does(tmp_path, capsys, deps, fragment):
    archive = write_tar(tmp_path / "m.tar", mlf_files(6, dependencies=deps))
    status, out, err = run_info(capsys, archive, "--json")
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("mlf-project info: error: ") and fragment in err
    assert main(["generate", str(archive), str(tmp_path / "p")]) == 2
    generate_err = capsys.readouterr().err.splitlines()[-1]
    assert generate_err.replace("generate", "info", 1) == err.rstrip("\n")


def test_dependencies_are_not_fetched_or_looked_for(tmp_path, capsys):
    deps = [
        {
            "short_name": "a",
            "url": "https://example.invalid/a.git",
            "url_type": "git",
            "version_spec": "v1",
        },
        {"short_name": "b", "url": "/nonexistent/dir", "url_type": "path"},
    ]
    status, out, _ = run_info(
        capsys, write_tar(tmp_path / "m.tar", mlf_files(6, dependencies=deps))
    )
    assert status == 0 and "a (git: https://example.invalid/a.git @ v1)" in out
