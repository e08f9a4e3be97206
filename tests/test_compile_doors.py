"""A ``.tflite`` through the doors that hand the model to someone else's code: ``export
model.tflite`` built into a user firmware that is not ours (tests/export_user.py: its own
main.c, start-up and linker script), on the host and on qemu-mps2-an385, bit-exact with
LiteRT's reference kernels; the module is named after the file, as every door names a
``.tflite`` compiled on the fly. And TVM 0.14's own Project API client calling
``generate_project`` on a ``.tflite``, then building and running the project; and TVM's
``AotModule`` running an archive compiled with ``--interface packed``."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from conftest import CMSIS_NN_SKIP, REPO_ROOT, cmsis_nn_given, requires_arm
from export_user import Exported, build_cmake, build_make, check_outputs, run_firmware

from project_api.board import load_board
from project_api.generate.export import export_library
from project_api.generate.model_source import tflite_module_name

litert = pytest.importorskip(
    "ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert, the test extra) is the oracle"
)

KWS = REPO_ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"


def kws_model() -> Path:
    if not KWS.is_file():
        pytest.skip(f"{KWS} is absent (the shared models live in ../shared/models)")
    return KWS


def litert_case(model: Path, seed: int) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """One random input (by LiteRT's input name) and LiteRT's reference output."""
    interpreter = litert.Interpreter(
        model_path=str(model), experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    interpreter.allocate_tensors()
    detail = interpreter.get_input_details()[0]
    x = np.random.default_rng(seed).integers(-128, 128, tuple(detail["shape"])).astype(np.int8)
    interpreter.set_tensor(detail["index"], x)
    interpreter.invoke()
    want = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    return {detail["name"]: x}, want


@pytest.mark.parametrize(
    "file, name",
    [
        ("kws_ref_model.tflite", "kws_ref_model"),
        ("ad01-int8 (v2).tflite", "ad01_int8_v2"),
        ("3x.tflite", "model_3x"),
        ("int.tflite", "model_int"),
        ("tvm_kws.tflite", "model_tvm_kws"),
        ("mlf_x.tflite", "model_mlf_x"),
        ("__a.tflite", "a"),
        ("é.tflite", "model"),
        ("x" * 60 + ".tflite", "x" * 40),
    ],
)
def test_a_tflite_is_named_after_its_file(file: str, name: str) -> None:
    """The module name every door gives a .tflite: a free C prefix made of the file's stem."""
    from project_api.generate.export.target import check_c_name

    assert tflite_module_name(Path("/models") / file) == name
    check_c_name(name, "module name")  # export takes it as it is


def export_tflite(tmp: Path, board: str, monkeypatch: pytest.MonkeyPatch, seed: int) -> Exported:
    """``export kws_ref_model.tflite`` without ``--name``: the C prefix is the file's stem."""
    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp / "cache"))
    model = kws_model()
    target = tmp / "export"
    info = export_library(model, target, board=board)
    name = tflite_module_name(model)
    assert name == "kws_ref_model"
    assert [m["name"] for m in info["models"]] == [name]
    header = (target / "src" / f"{name}.h").read_text()
    assert f"{name.upper()}_INPUT0_SCALE" in header  # the .tflite's quantization, stated
    inputs, want = litert_case(model, seed)
    assert len(np.unique(want)) > 2, "degenerate reference"
    return Exported(target, name, inputs, [want])


def test_export_tflite_into_a_user_firmware_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = load_board("host")
    models = [export_tflite(tmp_path, "host", monkeypatch, seed=1)]
    app = build_cmake(tmp_path / "user", models, board, mode="subdirectory")
    check_outputs(run_firmware(app, board), models)


@requires_arm
@pytest.mark.qemu
def test_export_tflite_into_a_user_firmware_on_an385(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = load_board("qemu-mps2-an385")
    models = [export_tflite(tmp_path, board.name, monkeypatch, seed=2)]
    app = build_make(tmp_path / "user", models, board)
    check_outputs(run_firmware(app, board), models)


@pytest.mark.slow
def test_tvm_project_api_client_generates_from_a_tflite(tvm_host: Any, tmp_path: Path) -> None:
    """TVM 0.14's own Project API client (tests/tvm_driver.py) calls generate_project with
    kws_ref_model.tflite as its model_library_format_path, builds and flashes the project
    through its server, opens tvm.micro.Session on it and runs the graph the project carries
    (model.tar, compiled into the cache): equal to LiteRT."""
    from project_api.resources import template_dir

    model = kws_model()
    inputs, want = litert_case(model, seed=3)
    np.savez(tmp_path / "inputs.npz", **inputs)
    project_dir = tmp_path / "project"
    action = {"do": "graph", "archive": str(project_dir / "model.tar"),
              "inputs": str(tmp_path / "inputs.npz"), "key": "graph"}  # fmt: skip
    spec = {
        "template_dir": str(template_dir()),
        "project_dir": str(project_dir),
        "tvm_version": "0.14.0",
        "options": {"board": "host", "project_type": "host_driven"},
        "steps": [
            {"do": "generate", "archive": str(model)},
            {"do": "session", "actions": [action]},
        ],
    }
    cache = tmp_path / "cache"
    result = tvm_host.run(spec, tmp_path / "driver", timeout=300,
                          env={"MLF_PROJECT_CACHE": str(cache)})  # fmt: skip
    error = result["error"]
    assert error is None, f"{error}\n{result['log'][-3000:]}"
    session = next(step for step in result["steps"] if step["do"] == "session")
    assert [a.get("error") for a in session["actions"]] == [None], session["actions"]
    assert len(list((cache / "compiled").glob("kws_ref_model-*.tar"))) == 1
    got = result["arrays"]["graph.output0"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.reshape(want.shape), want)


@pytest.mark.slow
def test_tvm_aot_executor_runs_a_compiled_packed_archive(tvm_host: Any, tmp_path: Path) -> None:
    """``compile --executor aot --interface packed`` writes what TVM's host-driven AOT flow
    runs: TVM 0.14's client generates the project, and ``AotModule(session.
    create_aot_executor())`` reads its input info, runs it and reads its output, as it does
    with TVM's own packed archives: equal to LiteRT."""
    from project_api.compile import compile_tflite
    from project_api.resources import template_dir

    model = kws_model()
    archive = compile_tflite(model, tmp_path / "kws_packed.tar", executor="aot",
                             interface="packed")  # fmt: skip
    inputs, want = litert_case(model, seed=4)
    np.savez(tmp_path / "inputs.npz", **inputs)
    action = {"do": "aot", "inputs": str(tmp_path / "inputs.npz"), "key": "aot",
              "number": 1, "repeat": 1}  # fmt: skip
    spec = {
        "template_dir": str(template_dir()),
        "project_dir": str(tmp_path / "project"),
        "tvm_version": "0.14.0",
        "options": {"board": "host", "project_type": "host_driven"},
        "steps": [
            {"do": "generate", "archive": str(archive)},
            {"do": "session", "actions": [action]},
        ],
    }
    result = tvm_host.run(spec, tmp_path / "driver", timeout=300)
    error = result["error"]
    assert error is None, f"{error}\n{result['log'][-3000:]}"
    session = next(step for step in result["steps"] if step["do"] == "session")
    assert [a.get("error") for a in session["actions"]] == [None], session["actions"]
    assert session["actions"][0]["num_inputs"] == 1
    got = result["arrays"]["aot.output0"]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


@pytest.mark.skipif(not cmsis_nn_given(), reason=CMSIS_NN_SKIP)
def test_run_a_tflite_with_cmsis_nn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``run model.tflite --cmsis-nn`` compiles with CMSIS-NN on the fly (CMSIS-NN v7.0.0 from
    ``--dependency``, resolved at the door as the archive names it) and runs exact; without
    the flag (the control) the same file is cached apart, in our own C only."""
    from compile_cases import tiny_model
    from conftest import cmsis_nn

    from project_api.cli import main

    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "cache"))
    where = cmsis_nn()
    url = where.git_url or str(where.tree)
    kind = "git" if where.git_url else "path"
    model = tmp_path / "tiny.tflite"
    model.write_bytes(tiny_model("int8"))
    inputs, want = litert_case(model, seed=3)
    np.savez(tmp_path / "in.npz", **inputs)
    dependency = f"short_name=cmsis-nn,url={url},url_type={kind}"
    if kind == "git":
        dependency += ",version_spec=v7.0.0"
    forms: Dict[bool, set] = {}
    for flag in (True, False):
        before = set((tmp_path / "cache" / "compiled").glob("*.tar"))
        argv = [
            "run",
            str(model),
            "--board",
            "host",
            "--input",
            str(tmp_path / "in.npz"),
            "--output",
            str(tmp_path / f"out{flag}.npz"),
            "--dependency",
            dependency,
        ]
        argv += ["--cmsis-nn"] if flag else []
        status = main(argv)
        err = capsys.readouterr().err
        assert status == 0, err
        got = np.load(tmp_path / f"out{flag}.npz")["output0"]
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        (archive,) = set((tmp_path / "cache" / "compiled").glob("*.tar")) - before
        with tarfile.open(archive) as tar:
            member = tar.extractfile(f"./src/{tflite_module_name(model)}.kernels.json")
            assert member is not None
            forms[flag] = {op["form"] for op in json.load(member)["operators"]}
    assert "cmsis-nn" in forms[True]
    assert forms[False] == {"ref"}


@pytest.mark.skipif(not cmsis_nn_given(), reason=CMSIS_NN_SKIP)
def test_a_door_compiles_for_its_boards_cpu_class(tmp_path: Path, cmsis_v7_checkout: Path) -> None:
    """A door compiles a .tflite by the rules of its board's CPU class (here an386's
    cortex-m-dsp, where KWS's AVERAGE_POOL_2D stays in our C); without a board (the control)
    by the default class's, and the two are cached apart."""
    from project_api.generate.model_source import archive_source

    model = kws_model()
    options = {"cmsis_nn": True, "cmsis_path": str(cmsis_v7_checkout), "cache_dir": tmp_path}
    why: Dict[str, Any] = {}
    for board in ("qemu-mps2-an386", None):
        archive = archive_source(model, None, options, load_board(board) if board else None)
        with tarfile.open(archive) as tar:
            member = tar.extractfile(f"./src/{tflite_module_name(model)}.kernels.json")
            assert member is not None
            why[str(board)] = {
                op["operator"]: (op["form"], op["why"]) for op in json.load(member)["operators"]
            }
    form, reason = why["qemu-mps2-an386"]["AVERAGE_POOL_2D"]
    assert (form, reason["by"], reason["cpu"]) == ("ref", "rule", "cortex-m-dsp")
    form, reason = why["None"]["AVERAGE_POOL_2D"]
    assert form == "cmsis-nn" and reason.get("cpu") != "cortex-m-dsp"
    assert len(list((tmp_path / "compiled").glob("*.tar"))) == 2


@pytest.mark.skipif(not cmsis_nn_given(), reason=CMSIS_NN_SKIP)
def test_the_cmsis_nn_a_door_names_is_in_the_cache_key(
    tmp_path: Path, cmsis_v7_checkout: Path
) -> None:
    """The archive records the scratch answers of the CMSIS-NN tree that gave them, so a door
    naming another tree compiles again, and the same tree hits the cache; without
    ``cmsis_nn`` (the control) where CMSIS-NN would come from changes nothing."""
    from compile_cases import tiny_model

    from project_api.generate.model_source import archive_source

    model = tmp_path / "tiny.tflite"
    model.write_bytes(tiny_model("int8"))
    other = tmp_path / "elsewhere"
    other.symlink_to(cmsis_v7_checkout)

    def source(cmsis_nn: bool, tree: Path) -> Path:
        options = {"cmsis_nn": cmsis_nn, "cmsis_path": str(tree), "cache_dir": tmp_path}
        return archive_source(model, None, options)

    first = source(True, cmsis_v7_checkout)
    assert source(True, cmsis_v7_checkout) == first
    assert source(True, other) != first
    assert source(False, cmsis_v7_checkout) == source(False, other)
