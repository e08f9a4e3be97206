"""End to end on the QEMU boards: the same generator, cross-built with each board's toolchain,
linker script and seam, run under qemu-system-arm through the device protocol.

Every factory model and every real TVM archive that fits runs on the default QEMU board
(qemu-mps2-an385) through ``mlf-project run`` and matches its reference; mlp runs on every
QEMU board, plus a hard-float model on each FPU board, int8 models on the M33 and on the
64 KiB lm3s6965evb, and a real TVM float model on the latter. Instruction counts under
``-icount`` repeat exactly; the standalone project type and the JSON graph format work under
QEMU; an operator failure and a machine that goes away give clear errors. (Crashing, hanging
and babbling firmware: test_e2e_faults.py.)

Builds are shared: a module fixture generates and builds every (model, board) pair once, two
at a time, in the order the tests come (each test waits for its own); ``mlf-project run
--project-dir`` then finds each project up to date.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest
from conftest import (
    CMSIS_NN_SKIP,
    cmsis_nn_dependency,
    cmsis_nn_given,
    corpus_archive,
    corpus_archives,
    corpus_case,
    requires_arm,
)

from project_api.board import list_boards
from project_api.cli import main
from project_api.driver import Project
from project_api.errors import DeviceError, TransportClosedError
from project_api.modelgen import GeneratedModel, catalog, compare_outputs
from project_api.run.base import live_children

pytestmark = [pytest.mark.slow, pytest.mark.qemu, requires_arm]

# The Arm ones (qemu-system-arm); the RISC-V boards have their own: test_qemu_riscv.py.
QEMU_BOARDS = [board.name for board in list_boards() if board.is_qemu and board.arch == "cortex-m"]
AN385 = "qemu-mps2-an385"
NETDUINO = "qemu-netduinoplus2"
# Every factory model runs on AN385: none needs an exclusion (the largest, chain_add_400,
# params_64k and many_functions, build in ~2-4 s and run in under a second).
FACTORY = sorted(catalog())
# Besides mlp on every board: (board, model, why). Corpus models are named by archive stem.
OTHER_BOARDS = [
    ("qemu-mps2-an386", "ops_zoo", "M4F hard float: exp, tanh, sigmoid through libm"),
    ("qemu-mps2-an500", "cnn_nhwc", "M7F hard float: convolutions and pooling"),
    ("qemu-mps2-an505", "kws_int8", "M33: a real TVM int8 model"),
    ("qemu-lm3s6965evb", "cnn_int8", "the 64 KiB M3: a factory int8 model"),
    ("qemu-lm3s6965evb", "mnist8", "the 64 KiB M3: a real TVM float model (47 KiB of RAM)"),
    ("qemu-mps2-an386", "kws_int8_aot_cmsisnn_usmp", "AOT + USMP + CMSIS-NN as a git dependency"),
    ("qemu-mps2-an505", "mnist8_aot", "M33: a real TVM AOT float model"),
    ("qemu-mps3-an547", "kws_int8", "M55 + Helium (Secure, ITCM): a real TVM int8 model"),
    ("qemu-netduinoplus2", "kws_int8", "STM32F405: the F4 USART and TIM2, 128 KiB of RAM"),
    ("qemu-netduinoplus2", "mnist8_aot", "STM32F405: a real TVM AOT float model"),
]
# AOT archives that need CMSIS-NN run on the M4F (qemu-mps2-an386, DSP kernels) only here
# (OTHER_BOARDS); on the M55's MVE kernels with every CMSIS-NN: test_cmsis_nn_releases.py.
AOT_CMSIS_NN = "_aot_cmsisnn"


def cli(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --- the shared builds ---------------------------------------------------------------------------


def corpus_wanted(archive: Path) -> bool:
    """Corpus archives CI runs: all, but CMSIS-NN ones only with CMSIS-NN at hand."""
    return "_cmsisnn" not in archive.name or cmsis_nn_given()


def corpus_kwargs(
    archive: Path, cmsis_nn: Optional[Path], model: Optional[str] = None
) -> Dict[str, Any]:
    case = corpus_case(archive)
    kwargs: Dict[str, Any] = {}
    if model is not None:
        kwargs["model"] = model
    elif "all_models" in case:
        kwargs["model"] = case["model_name"]
    if AOT_CMSIS_NN in archive.name:
        kwargs["options"] = {"dependencies": [cmsis_nn_dependency()]}
    elif "_cmsisnn" in archive.name:
        kwargs["options"] = {"cmsis_path": str(cmsis_nn)}
    return kwargs


# key(name, board[, "*"]) -> (archive, its pending build): the module's shared builds.
Builds = Dict[str, Tuple[Path, "Future[Any]"]]


def key(name: str, board: str, model: Optional[str] = None) -> str:
    return f"{name}{'+all' if model == '*' else ''}@{board}"


@pytest.fixture(scope="module")
def builds(
    tmp_path_factory: pytest.TempPathFactory, cmsis_nn_checkout: Optional[Path]
) -> Iterator[Builds]:
    """key(name, board[, "*"]) -> (archive, the built Project or the exception its build
    raised, once done) for every pair the tests of this module run. Built two at a time in
    the order the tests come, which start as their builds are done: their QEMU runs (one
    core each) go on beside the builds still to do."""
    root = tmp_path_factory.mktemp("qemu")
    archives: Dict[str, Path] = {}

    def archive_of(name: str) -> Optional[Path]:
        if name not in archives:
            if name in catalog():
                archives[name] = catalog()[name]().write(root / f"{name}.tar")
            elif corpus_archive(name) is not None:
                archives[name] = corpus_archive(name)  # type: ignore[assignment]
            else:
                return None  # no corpus here: its tests skip through mlf_corpus
        return archives[name]

    jobs: List[Tuple[str, Path, str, Dict[str, Any]]] = []

    def add(name: str, board: str, **kwargs: Any) -> None:
        archive = archive_of(name)
        if archive is not None:
            jobs.append((key(name, board, kwargs.get("model")), archive, board, kwargs))

    for name in FACTORY:
        add(name, AN385, **({"model": "*"} if catalog()[name]().companions else {}))
    for board in QEMU_BOARDS:
        if board != AN385:
            add("mlp", board)
    for board, name, _ in OTHER_BOARDS:
        if name in catalog():
            add(name, board)
        elif archive_of(name) is not None and corpus_wanted(archives[name]):
            add(name, board, **corpus_kwargs(archives[name], cmsis_nn_checkout))
    for archive in corpus_archives(aot=True):
        if corpus_wanted(archive) and AOT_CMSIS_NN not in archive.name:
            add(archive.stem, AN385, **corpus_kwargs(archive, cmsis_nn_checkout))
            if "all_models" in corpus_case(archive):
                add(archive.stem, AN385, **corpus_kwargs(archive, cmsis_nn_checkout, "*"))
    if archive_of("multi_module") is not None:
        add("multi_module", NETDUINO, **corpus_kwargs(archives["multi_module"], None, "*"))

    def one(job: Tuple[str, Path, str, Dict[str, Any]]) -> Any:
        name, archive, board, kwargs = job
        directory = root / name.replace("@", "__").replace("+", "_")
        try:
            project = Project.generate(archive, directory, board=board, **kwargs)
            project.build()
            return project
        except Exception as err:  # noqa: BLE001 - raised by the test that needs it
            return err

    pool = ThreadPoolExecutor(max_workers=2)
    try:
        yield {job[0]: (job[1], pool.submit(one, job)) for job in jobs}
    finally:
        pool.shutdown(cancel_futures=True)


def built(builds: Builds, name: str) -> Tuple[Path, Project]:
    archive, pending = builds[name]
    project = pending.result()
    if isinstance(project, Exception):
        raise project
    return archive, project


def save_npz(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    np.savez(str(path), **arrays)  # type: ignore[arg-type]


def all_inputs(model: GeneratedModel) -> Dict[str, np.ndarray]:
    inputs: Dict[str, np.ndarray] = {}
    for part in (model, *model.companions):
        inputs.update(part.sample_inputs())
    return inputs


# --- every factory model on AN385, mlp on every board ----------------------------------------


@pytest.mark.parametrize("name", FACTORY)
def test_factory_model_on_an385(
    name: str,
    builds: Builds,
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
) -> None:
    """Through ``mlf-project run ARCHIVE --board qemu-mps2-an385 --icount``; a multi-model
    archive runs with all its models linked into one firmware."""
    model = catalog()[name]()
    many = bool(model.companions)
    archive, project = built(builds, key(name, AN385, "*" if many else None))
    inputs = all_inputs(model)
    save_npz(tmp_path / "in.npz", inputs)
    status, out, err = cli(
        capsys, "run", archive, "--board", AN385, "--project-dir", project.dir, "--icount",
        "--input", tmp_path / "in.npz", "--output", tmp_path / "out.npz", "--json",
        *(["--model", "*"] if many else []),
    )  # fmt: skip
    assert status == 0, err
    assert "generating" not in err  # the shared build was reused, --icount notwithstanding
    document = json.loads(out)
    runs = {run["model"]: run for run in (document["models"] if many else [document])}
    parts = (model, *model.companions)
    assert sorted(runs) == sorted(part.name for part in parts)
    outputs = dict(np.load(tmp_path / "out.npz"))
    for part in parts:
        run = runs[part.name]
        assert run["board"] == AN385
        assert isinstance(run["instructions"], int) and run["instructions"] > 0
        mine = {k.split(".", 1)[1]: v for k, v in outputs.items() if k.startswith(f"{part.name}.")}
        got = mine if many else outputs
        assert compare_outputs(got, part.reference(part.sample_inputs())) == [], part.name
    assert live_children() == []


@pytest.fixture(scope="module")
def mlp_on_every_board(builds: Builds) -> Dict[str, Any]:
    return {board: builds[key("mlp", board)][1].result() for board in QEMU_BOARDS}


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_factory_model_on_every_qemu_board(board: str, mlp_on_every_board: Dict[str, Any]) -> None:
    project = mlp_on_every_board[board]
    if isinstance(project, Exception):
        raise project
    model = catalog()["mlp"]()
    inputs = model.sample_inputs()
    with project.session(timeout=30) as session:
        assert session.info.board == board
        outputs = session.run(inputs)
        assert session.last_stats.tick_hz == project.board.timer.clock_hz
    assert compare_outputs(outputs, model.reference(inputs)) == []
    assert live_children() == []


@pytest.mark.parametrize(
    "board, name", [pytest.param(b, n, id=f"{n}@{b}") for b, n, _ in OTHER_BOARDS]
)
def test_more_models_on_the_other_boards(
    board: str,
    name: str,
    builds: Builds,
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
) -> None:
    if name in catalog():
        model = catalog()[name]()
        inputs = model.sample_inputs()
        expected = model.reference(inputs)
    else:
        archive = corpus_archive(name)
        if archive is None:
            pytest.skip(f"no {name}.tar in the corpus (MLF_PROJECT_CORPUS)")
        if not corpus_wanted(archive):
            pytest.skip(CMSIS_NN_SKIP)
        case = corpus_case(archive)
        inputs = dict(np.load(str(case["inputs_npz"])))
        expected = dict(np.load(str(case["outputs_npz"])))
    _, project = built(builds, key(name, board))
    save_npz(tmp_path / "in.npz", inputs)
    status, out, err = cli(
        capsys, "run", project.dir, "--input", tmp_path / "in.npz", "--output",
        tmp_path / "out.npz", "--json",
    )  # fmt: skip
    assert status == 0, err
    assert json.loads(out)["board"] == board
    assert compare_outputs(dict(np.load(tmp_path / "out.npz")), expected, rtol=1e-5) == []
    assert live_children() == []


# --- the real TVM archives on AN385 ------------------------------------------------------------


def _corpus_params() -> List[Any]:
    archives = [a for a in corpus_archives(aot=True) if AOT_CMSIS_NN not in a.name]
    if not archives:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no corpus (MLF_PROJECT_CORPUS)"))]
    params = []
    for archive in archives:
        marks = []
        if not corpus_wanted(archive):
            marks.append(pytest.mark.skip(reason=CMSIS_NN_SKIP))
        params.append(pytest.param(archive, id=archive.stem, marks=marks))
    return params


@pytest.mark.parametrize("archive", _corpus_params())
def test_corpus_archive_on_an385(
    archive: Optional[Path],
    builds: Builds,
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
) -> None:
    """Outputs equal TVM's own: integers exactly, floats within 1e-5 relative (a multi-model
    archive: the model its reference is for)."""
    assert archive is not None
    case = corpus_case(archive)
    _, project = built(builds, key(archive.stem, AN385))
    status, out, err = cli(
        capsys, "run", project.dir, "--input", case["inputs_npz"], "--output",
        tmp_path / "out.npz", "--json",
    )  # fmt: skip
    assert status == 0, err
    assert json.loads(out)["model"] == case["model_name"]
    reference = dict(np.load(str(case["outputs_npz"])))
    assert compare_outputs(dict(np.load(tmp_path / "out.npz")), reference, rtol=1e-5) == []
    assert live_children() == []


@pytest.mark.parametrize("board", [AN385, NETDUINO])
def test_corpus_multi_model_archive_linked(
    board: str,
    mlf_corpus: Path,
    builds: Builds,
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
) -> None:
    """Both models of multi_module.tar in one firmware (on the M3, and on the STM32F405's
    128 KiB): the npz feeds mnist (checked against its reference), mlp runs on random
    inputs."""
    case = corpus_case(mlf_corpus / "multi_module.tar")
    _, project = built(builds, key("multi_module", board, "*"))
    assert [m["name"] for m in project.models] == case["all_models"]
    status, out, err = cli(
        capsys, "run", project.dir, "--model", "*", "--input", case["inputs_npz"], "--output",
        tmp_path / "all.npz", "--json",
    )  # fmt: skip
    assert status == 0, err
    assert "model mlp runs on deterministic random inputs" in err
    assert [d["model"] for d in json.loads(out)["models"]] == ["mlp", "mnist"]
    both = dict(np.load(tmp_path / "all.npz"))
    reference = dict(np.load(str(case["outputs_npz"])))
    assert compare_outputs({"output0": both["mnist.output0"]}, reference, rtol=1e-5) == []
    assert both["mlp.output0"].shape == (1, 4) and np.all(np.isfinite(both["mlp.output0"]))
    assert live_children() == []


# --- acceptance: reference outputs and repeatable instruction counts through the CLI -------------


def run_twice_with_icount(
    capsys: pytest.CaptureFixture,
    archive: Path,
    project: Project,
    inputs_npz: Path,
    reference: Dict[str, np.ndarray],
    tmp_path: Path,
    *extra: str,
) -> List[int]:
    counts = []
    for attempt in range(2):
        output = tmp_path / f"out{attempt}.npz"
        status, out, err = cli(
            capsys, "run", archive, "--board", AN385, "--icount", "--input", inputs_npz,
            "--output", output, "--json", "--project-dir", project.dir, *extra,
        )  # fmt: skip
        assert status == 0, err
        assert "generating" not in err
        document = json.loads(out)
        assert document["board"] == AN385
        counts.append(document["instructions"])
        assert compare_outputs(dict(np.load(output)), reference, rtol=1e-5) == []
    assert live_children() == []
    return counts


def test_corpus_archive_with_exact_instruction_counts(
    mlf_corpus: Path,
    builds: Builds,
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
) -> None:
    case = corpus_case(mlf_corpus / "kws_int8.tar")
    archive, project = built(builds, key("kws_int8", AN385))
    reference = dict(np.load(str(case["outputs_npz"])))
    counts = run_twice_with_icount(
        capsys, archive, project, Path(str(case["inputs_npz"])), reference, tmp_path
    )
    assert counts[0] is not None and counts[0] > 1_000_000
    assert counts[0] == counts[1]  # deterministic under -icount shift=0


def test_factory_model_with_exact_instruction_counts(
    builds: Builds, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    model = catalog()["cnn_int8"]()
    archive, project = built(builds, key("cnn_int8", AN385))
    inputs = model.sample_inputs()
    save_npz(tmp_path / "in.npz", inputs)
    counts = run_twice_with_icount(
        capsys, archive, project, tmp_path / "in.npz", model.reference(inputs), tmp_path
    )
    assert counts[0] is not None and counts[0] > 10_000
    assert counts[0] == counts[1]


# --- project types, graph formats, failures ------------------------------------------------------


@pytest.mark.parametrize("board", ["qemu-mps2-an386", "qemu-mps3-an547"])
def test_standalone_under_qemu(board: str, tmp_path: Path) -> None:
    model = catalog()["mlp"]()
    inputs = model.sample_inputs()
    save_npz(tmp_path / "s.npz", {**inputs, **model.reference(inputs)})
    archive = model.write(tmp_path / "mlp.tar")
    project = Project.generate(
        archive,
        tmp_path / "p",
        board=board,
        project_type="standalone",
        options={"sample_inputs": str(tmp_path / "s.npz"), "qemu_icount": True},
    )
    project.build()
    result = project.run_standalone(timeout=60)
    assert result.status == "pass" and result.exit_status == 0
    assert compare_outputs(result.outputs_of(0, 0), model.reference(inputs)) == []
    assert live_children() == []


def test_json_graph_under_qemu(tmp_path: Path) -> None:
    model = catalog()["cnn_int8"]()
    archive = model.write(tmp_path / "m.tar")
    project = Project.generate(
        archive, tmp_path / "p", board="qemu-mps2-an385", options={"graph_format": "json"}
    )
    project.build()
    inputs = model.sample_inputs()
    with project.session(timeout=30) as session:
        outputs = session.run(inputs)
    assert compare_outputs(outputs, model.reference(inputs)) == []


def test_operator_failure_and_crash_are_clear(builds: Builds) -> None:
    """An operator returning -1 is a DeviceError naming its node; a firmware that dies is a
    TransportClosedError saying how; QEMU is reaped."""
    from project_api.modelgen import failing_inputs

    model = catalog()["failing"]()
    _, project = built(builds, key("failing", AN385))
    with project.session(timeout=30) as session:
        with pytest.raises(DeviceError, match="operator") as caught:
            session.run(failing_inputs(fail=True))
        assert caught.value.node is not None
        # The tables carry no names on a microcontroller: the host names the function.
        assert re.search(r"operator returned an error '\w*fail_if\w*'", str(caught.value))
        outputs = session.run(failing_inputs(fail=False))
        assert compare_outputs(outputs, model.reference(failing_inputs(fail=False))) == []
        session.runner.stop()  # the machine goes away under the session
        with pytest.raises(TransportClosedError, match="stopped by the host"):
            session.run(failing_inputs(fail=False))
    assert live_children() == []
