"""AOT models on the host beside graph models: an archive mixing both kinds, linked into one
firmware or run one at a time; every AOT form (interface c and packed, with and without USMP)
through both project types; and a model whose entry point fails."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from mlf_builders import aot_files, aot_reference, tar_files, write_dir

from project_api.cli import main
from project_api.driver import Project
from project_api.modelgen import catalog, compare_outputs
from project_api.run.base import live_children

pytestmark = pytest.mark.slow

X = np.array([[1.0, 2.5, -3.0, 4.0]], dtype=np.float32)
FORMS = {
    "c": {},
    "c_usmp": {"usmp": True},
    "packed": {"interface": "packed"},
    "tuple": {"outputs": [("output0", 3), ("output1", 6)]},
}


def cli(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def mixed_archive(root: Path) -> Tuple[Path, Any]:
    """A version 7 archive holding the factory's graph model mlp and the AOT model aotm."""
    graph_model = catalog()["mlp"]()
    tree = root / "mixed"
    write_dir(tree, tar_files(graph_model.write(root / "mlp.tar")))
    metadata = json.loads((tree / "metadata.json").read_text())
    aot = aot_files("aotm")
    metadata["modules"].update(json.loads(aot.pop("metadata.json"))["modules"])
    write_dir(tree, aot)
    (tree / "metadata.json").write_text(json.dumps(metadata, indent=2))
    return tree, graph_model


def test_graph_and_aot_models_in_one_archive(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    archive, graph_model = mixed_archive(tmp_path)
    project = Project.generate(archive, tmp_path / "both", model="*")
    kinds = {m["name"]: m["executor"] for m in project.info["models"]}
    assert kinds == {"mlp": "graph", "aotm": "aot"}
    project.build()
    graph_inputs = graph_model.sample_inputs()
    with project.session(timeout=30) as session:
        for _ in range(2):  # alternately: each model binds its own workspace
            got = session.run({"x": X}, model="aotm")
            assert compare_outputs(got, aot_reference(X)) == []
            got = session.run(graph_inputs, model="mlp")
            assert compare_outputs(got, graph_model.reference(graph_inputs)) == []
    np.savez(tmp_path / "x.npz", x=X)
    status, _, err = cli(
        capsys, "run", archive, "--model", "aotm", "--input", tmp_path / "x.npz",
        "--output", tmp_path / "one.npz",
    )  # fmt: skip
    assert status == 0, err
    assert compare_outputs(dict(np.load(tmp_path / "one.npz")), aot_reference(X)) == []
    assert live_children() == []


@pytest.fixture(scope="module")
def built_forms(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Project]:
    """Every form as either project type, built two at a time (as the e2e modules build)."""
    root = tmp_path_factory.mktemp("aot")
    jobs = []
    for form, kwargs in FORMS.items():
        archive = write_dir(root / f"{form}.mlf", aot_files(**kwargs))
        samples = root / f"{form}.samples.npz"
        np.savez(samples, x=X, **aot_reference(X, kwargs.get("outputs")))
        jobs.append((form, "host_driven", archive, None))
        jobs.append((form, "standalone", archive, {"sample_inputs": str(samples)}))

    def build(job: Tuple[str, str, Path, Any]) -> Tuple[str, Project]:
        form, project_type, archive, options = job
        project = Project.generate(
            archive, root / f"{form}-{project_type}", project_type=project_type, options=options
        )
        project.build()
        return f"{form}-{project_type}", project

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(build, jobs))


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_aot_form_host_driven(form: str, built_forms: Dict[str, Project]) -> None:
    project = built_forms[f"{form}-host_driven"]
    with project.session(timeout=30) as session:
        for _ in range(3):  # the workspace is reset between runs
            outputs = session.run({"x": X})
            assert compare_outputs(outputs, aot_reference(X, FORMS[form].get("outputs"))) == []
        used = session.last_stats.workspace_bytes
    planned = project.info["models"][0]["sizes"]["workspace_bytes"]
    assert (used == 0) if form == "c_usmp" else (0 < used <= planned)
    assert live_children() == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_aot_form_standalone(form: str, built_forms: Dict[str, Project]) -> None:
    result = built_forms[f"{form}-standalone"].run_standalone(timeout=30)
    assert result.status == "pass" and result.exit_status == 0, result.text
    expected = aot_reference(X, FORMS[form].get("outputs"))
    assert compare_outputs(result.outputs_of(0, 0), expected) == []


def test_failing_entry_point_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    files = aot_files()
    lib1 = "codegen/host/src/default_lib1.c"
    files[lib1] = files[lib1].replace(b"  return 0;\n}\nTVM_DLL", b"  return -1;\n}\nTVM_DLL", 1)
    archive = write_dir(tmp_path / "bad.mlf", files)
    np.savez(tmp_path / "x.npz", x=X)
    status, _, err = cli(capsys, "run", archive, "--input", tmp_path / "x.npz")
    errors = [line for line in err.splitlines() if "error:" in line]
    assert status == 2 and len(errors) == 1
    assert "operator returned an error 'tvmgen_default_run'" in errors[0]
    assert live_children() == []
