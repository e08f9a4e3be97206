"""The CLI commands generate, build, flash and run: arguments, inputs, outputs, JSON, and one
clear error (exit status 2) per kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest

from project_api.cli import main
from project_api.modelgen import catalog, compare_outputs
from project_api.run.base import live_children

pytestmark = pytest.mark.slow


def cli(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def scalar_built(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    """The 'scalar' factory model (inputs x [8] and scale []) generated and built once."""
    root = tmp_path_factory.mktemp("cli")
    archive = catalog()["scalar"]().write(root / "scalar.tar")
    assert main(["generate", str(archive), str(root / "p")]) == 0
    assert main(["build", str(root / "p")]) == 0
    return archive, root / "p"


def test_generate_build_flash_run(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    archive, project = scalar_built
    status, out, err = cli(capsys, "flash", project)
    assert status == 0 and "nothing to flash" in out
    model = catalog()["scalar"]()
    inputs = model.sample_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    status, out, err = cli(
        capsys, "run", project, "--input", tmp_path / "in.npz", "--output", tmp_path / "o.npz"
    )
    assert status == 0, err
    assert "model scalar on host:" in out and "output0 float32[]" in out
    assert compare_outputs(dict(np.load(tmp_path / "o.npz")), model.reference(inputs)) == []
    assert live_children() == []


def test_json_document(scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    status, out, err = cli(capsys, "run", scalar_built[1], "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["outputs"] == {
        "output0": {"shape": [], "dtype": "float32"},
        "output1": {"shape": [], "dtype": "float32"},
    }
    assert document["seconds"] > 0 and document["ticks"] > 0
    assert document["instructions"] is None and document["board"] == "host"
    assert "runs on deterministic random inputs (x [8] float32, scale [] float32)" in err


def test_npy_input_for_a_one_input_model(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    model = catalog()["mlp"]()
    archive = model.write(tmp_path / "mlp.tar")
    inputs = model.sample_inputs()
    np.save(tmp_path / "x.npy", inputs["x"])
    status, out, err = cli(
        capsys, "run", archive, "--input", tmp_path / "x.npy", "--output", tmp_path / "o.npz",
        "--json",
    )  # fmt: skip
    assert status == 0, err
    assert json.loads(out)["project_dir"] is None  # a temporary project, already removed
    assert compare_outputs(dict(np.load(tmp_path / "o.npz")), model.reference(inputs)) == []


def test_generate_twice_needs_force(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    archive = scalar_built[0]
    assert cli(capsys, "generate", archive, tmp_path / "p")[0] == 0
    status, _, err = cli(capsys, "generate", archive, tmp_path / "p")
    assert status == 2 and "--force" in err
    assert cli(capsys, "generate", archive, tmp_path / "p", "--force")[0] == 0


# --- bad input: exit status 2 and a message that says what is wrong ----------------------------


def test_missing_input_lists_the_expected_inputs(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    np.savez(tmp_path / "in.npz", x=np.zeros(8, np.float32))
    status, _, err = cli(capsys, "run", scalar_built[1], "--input", tmp_path / "in.npz")
    assert status == 2
    assert "no input 'scale'" in err and "x [8] float32, scale [] float32" in err


def test_unknown_input_name(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    np.savez(tmp_path / "in.npz", x=np.zeros(8, np.float32), scale=np.float32(1), y=np.zeros(1))
    status, _, err = cli(capsys, "run", scalar_built[1], "--input", tmp_path / "in.npz")
    assert status == 2 and "unknown input 'y'" in err


def test_wrong_shape_or_dtype(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    np.savez(tmp_path / "in.npz", x=np.zeros(8, np.float64), scale=np.float32(1))
    status, _, err = cli(capsys, "run", scalar_built[1], "--input", tmp_path / "in.npz")
    assert status == 2 and "input 'x' is float64 [8]" in err


def test_npy_for_a_two_input_model(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    np.save(tmp_path / "x.npy", np.zeros(8, np.float32))
    status, _, err = cli(capsys, "run", scalar_built[1], "--input", tmp_path / "x.npy")
    assert status == 2 and "takes 2 inputs" in err


def test_unreadable_input_file(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    (tmp_path / "in.npz").write_text("not a zip")
    status, _, err = cli(capsys, "run", scalar_built[1], "--input", tmp_path / "in.npz")
    assert status == 2 and "not a readable .npz/.npy" in err
    status, _, err = cli(capsys, "run", scalar_built[1], "--input", tmp_path / "absent.npz")
    assert status == 2 and "no such file" in err


def test_board_of_a_project_cannot_change(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    status, _, err = cli(capsys, "run", scalar_built[1], "--board", "qemu-mps2-an385")
    assert status == 2 and "generated for board host, not qemu-mps2-an385" in err


def test_generation_option_on_a_generated_project(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    status, _, err = cli(capsys, "run", scalar_built[1], "-o", "graph_format=json")
    assert status == 2 and "option graph_format changes generation" in err


def test_icount_is_for_qemu(scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    status, _, err = cli(capsys, "run", scalar_built[1], "--icount")
    assert status == 2 and "--icount only applies to QEMU boards" in err


def test_no_such_target(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    status, _, err = cli(capsys, "run", tmp_path / "nothing.tar")
    assert status == 2 and "nothing.tar" in err


def test_bad_option_syntax(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    status, _, err = cli(capsys, "generate", scalar_built[0], tmp_path / "p", "-o", "novalue")
    assert status == 2 and "expected KEY=VALUE" in err


@pytest.mark.parametrize(
    "assignment, flag",
    [("board=qemu-mps2-an385", "--board"), ("project_type=standalone", "--project-type")],
)
def test_tvm_option_names_that_are_flags_here_are_refused(
    scalar_built: Tuple[Path, Path],
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
    assignment: str,
    flag: str,
) -> None:
    # -o board=... used to be accepted and ignored: the project came out for the host.
    status, _, err = cli(capsys, "generate", scalar_built[0], tmp_path / "p", "-o", assignment)
    assert status == 2 and flag in err
    assert not (tmp_path / "p").exists()


def test_build_and_flash_need_a_project(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    status, _, err = cli(capsys, "build", tmp_path)
    assert status == 2 and "not a generated project" in err
    status, _, err = cli(capsys, "flash", tmp_path)
    assert status == 2 and "not a generated project" in err


def test_flash_before_build(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    assert cli(capsys, "generate", scalar_built[0], tmp_path / "p")[0] == 0
    status, _, err = cli(capsys, "flash", tmp_path / "p")
    assert status == 2 and "build the project first" in err


def test_standalone_project_takes_no_input(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    args = ("generate", scalar_built[0], tmp_path / "p", "--project-type", "standalone")
    assert cli(capsys, *args)[0] == 0
    np.savez(tmp_path / "in.npz", x=np.zeros(8, np.float32), scale=np.float32(1))
    status, _, err = cli(capsys, "run", tmp_path / "p", "--input", tmp_path / "in.npz")
    assert status == 2 and "embedded when it was generated" in err


def test_project_type_of_a_project_cannot_change(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    status, _, err = cli(capsys, "run", scalar_built[1], "--project-type", "standalone")
    assert status == 2 and "is a host_driven project, not standalone" in err


@pytest.mark.parametrize("dtype", ["int4", "handle", "float32x4"])
def test_an_input_numpy_cannot_hold_is_refused_with_its_name(tmp_path: Path, dtype: str) -> None:
    """TVM can give a graph input a dtype numpy has no match for; run says so instead of a
    traceback, with or without --input."""
    from project_api.cli.inputs import load_inputs
    from project_api.errors import InputError

    model = {"name": "default", "inputs": [{"name": "x", "shape": [1, 16], "dtype": dtype}]}
    given = tmp_path / "in.npz"
    np.savez(given, x=np.zeros((1, 16), "int8"))
    for path in (None, str(given)):
        with pytest.raises(InputError, match=f"input 'x': .*{dtype}.* numpy arrays"):
            load_inputs(path, model)


def test_bad_run_arguments_are_refused_before_anything_is_generated(
    scalar_built: Tuple[Path, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    archive = scalar_built[0]
    cases = [
        (("--output", tmp_path / "absent" / "o.npz"), "no such directory"),
        (("--output", tmp_path), "is a directory"),
        (("--board", "nosuch"), "unknown board 'nosuch'"),
        (("--board", "host", "--icount"), "--icount only applies to QEMU boards, not host"),
    ]
    for extra, message in cases:
        status, out, err = cli(capsys, "run", archive, *extra)
        assert status == 2 and message in err, (extra, err)
        assert "generating" not in err and "Traceback" not in err
    for bad in ("-1", "0", "nan", "soon"):
        with pytest.raises(SystemExit) as exited:
            main(["run", str(archive), "--timeout", bad])
        assert exited.value.code == 2
        assert "--timeout" in capsys.readouterr().err


def test_a_standalone_mismatch_is_said_in_the_text_report(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    model = catalog()["scalar"]()
    archive = model.write(tmp_path / "scalar.tar")
    inputs = model.sample_inputs()
    wrong = {k: np.asarray(v) + 1 for k, v in model.reference(inputs).items()}
    np.savez(tmp_path / "samples.npz", **inputs, **wrong)
    status, out, err = cli(
        capsys, "run", archive, "--project-type", "standalone", "-o",
        f"sample_inputs={tmp_path / 'samples.npz'}",
    )  # fmt: skip
    assert status == 1 and "standalone check: mismatch" in out, (out, err)


def test_standalone_run_of_an_archive_directory_takes_npz_and_npy(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """An archive given as a directory is an archive, not a generated project: its --input
    becomes the embedded sample; a .npy is the one input of a one-input model."""
    from mlf_builders import tar_files, write_dir

    model = catalog()["mlp"]()
    write_dir(tmp_path / "mlp", tar_files(model.write(tmp_path / "mlp.tar")))
    inputs = model.sample_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    np.save(tmp_path / "in.npy", inputs["x"])
    for given in ("in.npz", "in.npy"):
        status, out, err = cli(
            capsys, "run", tmp_path / "mlp", "--project-type", "standalone",
            "--input", tmp_path / given, "--output", tmp_path / "out.npz",
        )  # fmt: skip
        assert status == 0, err
        assert compare_outputs(dict(np.load(tmp_path / "out.npz")), model.reference(inputs)) == []
    two = catalog()["scalar"]().write(tmp_path / "scalar.tar")
    status, _, err = cli(
        capsys, "run", two, "--project-type", "standalone", "--input", tmp_path / "in.npy"
    )
    assert status == 2 and "a .npy holds one array" in err and "Traceback" not in err


def test_version_is_printed(capsys: pytest.CaptureFixture) -> None:
    from project_api.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("mlf-project 0.")
