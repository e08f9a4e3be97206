"""TVM 0.14's own host drives our firmware: ``tvm.micro.Session`` over the Project API
transport of a project that TVM's client generated from ``template_project/`` with
``project_type=host_driven``, as a TVM user's script does (tests/tvm_driver.py runs that
script in a venv of its own, tests/tvm_host.py builds the venv).

Graph executor (``create_local_graph_executor`` with the archive's graph JSON and params),
the same graph called operator by operator on tensors allocated on the device, the time
evaluator, and the AOT executor, on the host board and on qemu-mps2-an385; outputs equal to
the corpus references bit for bit.
"""

from __future__ import annotations

import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest
from conftest import CMSIS_NN_SKIP, corpus_archive, corpus_case, requires_arm

from project_api.resources import template_dir

pytestmark = [pytest.mark.slow]


def driver_spec(
    project_dir: Path, board: str, steps: List[Dict[str, Any]], **options: Any
) -> Dict[str, Any]:
    return {
        "template_dir": str(template_dir()),
        "project_dir": str(project_dir),
        "tvm_version": "0.14.0",
        "options": {"board": board, "project_type": "host_driven", **options},
        "steps": steps,
    }


def run_driver(tvm_host: Any, work: Path, spec: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    return tvm_host.run(spec, work, timeout=timeout)  # type: ignore[no-any-return]


def failure(result: Dict[str, Any]) -> str:
    error: Optional[Dict[str, str]] = result["error"]
    if error is None:
        return ""
    return f"{error['type']}: {error['message']}\n{error['traceback']}\n{result['log'][-3000:]}"


def archive_case(stem: str) -> Dict[str, Any]:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"corpus archive {stem}.tar is absent")
    return corpus_case(archive)


def assert_bit_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert got.tobytes() == want.tobytes(), f"{what}: {got} != {want}"


def protocol_spec(work: Path) -> Dict[str, Any]:
    case = archive_case("mlp_default")
    return driver_spec(
        work / "mlp",
        "host",
        [{"do": "generate", "archive": str(case["archive"])}, {"do": "session", "actions": []}],
        device_protocol="mlf",
        timeout_sec=3,  # open_transport's start timeout: TVM gives up after 3 s, not 10
    )


def test_our_protocol_firmware_fails_tvm_handshake(tvm_run: Runs, mlf_corpus: Path) -> None:
    """A caller that asks for our own device protocol gets it, and TVM's Session cannot open
    it: the harness sees TVM's own error (what issue 28 reported)."""
    result = tvm_run.get(PROTOCOL)
    assert [s["ok"] for s in result["steps"]] == [True, False], failure(result)
    assert result["error"] is not None
    assert "session start handshake failed" in result["error"]["message"], failure(result)


# --- TVM's flows, one driver run per board and archive ------------------------------------------

# device_graph: tvm.graph_executor.create, refused by a default firmware (saying how not to be).
GRAPH_ACTIONS = ("graph", "device_graph", "operators", "op_time")
# Over QEMU's UART every byte is emulated: the op-by-op run (all params copied again) is left
# to the host board; the graph run and an operator's time evaluator cover the firmware.
QEMU_GRAPH_ACTIONS = ("graph", "device_graph", "op_time")
BOARDS = [
    pytest.param("host", id="host"),
    pytest.param("qemu-mps2-an385", id="an385", marks=[requires_arm, pytest.mark.qemu]),
]

# QEMU's UART takes about 5 KB/s from the host: KWS's 56 KB of params cost 40 s there (the
# bench measures it); mnist's 24 KB keep the QEMU graph run short.
GRAPH_STEM = {"host": "kws_int8", "qemu-mps2-an385": "mnist8"}

# A driver run of this module: ("flows", board, stem, *options) for TVM's flows on a corpus
# archive (flows_spec), or one of the runs below.
Key = Tuple[Any, ...]
PROTOCOL: Key = ("protocol",)
CMSIS_NN: Key = ("cmsis_nn",)


def flows(board: str, stem: str, **options: Any) -> Key:
    return ("flows", board, stem, *sorted(options.items()))


def operator_module(board: str) -> Key:
    return ("op_module", board)


def flows_spec(work: Path, board: str, stem: str, **options: Any) -> Dict[str, Any]:
    """TVM's client generates, builds and flashes a project for the corpus archive ``stem`` on
    ``board`` with only board and project_type given (as TVM users do), opens a Session and
    does every flow that fits the archive."""
    case = archive_case(stem)
    archive = str(case["archive"])
    inputs = str(case["inputs_npz"])
    if "_aot" in stem:
        names: Tuple[str, ...] = ("aot",)
    elif options.get("device_graph_executor"):
        names = ("device_graph",)
    else:
        names = GRAPH_ACTIONS if board == "host" else QEMU_GRAPH_ACTIONS
    actions = [{"do": n, "archive": archive, "inputs": inputs, "key": n} for n in names]
    # mnist's graph goes as tvmc run sends it: load_params(bytes), set_input(**inputs).
    actions[0]["load_params"] = stem == "mnist8"
    return driver_spec(
        work / "project",
        board,
        [{"do": "generate", "archive": archive}, {"do": "session", "actions": actions}],
        **options,
    )


def keys_of(test: str, params: Dict[str, Any]) -> List[Key]:
    """The runs a test of this module reads, from its name and parameters."""
    board, stem = params.get("board", "host"), params.get("stem", "")
    return {
        "test_our_protocol_firmware_fails_tvm_handshake": [PROTOCOL],
        "test_tvm_client_gets_a_microtvm_firmware": [flows(board, GRAPH_STEM[board])],
        "test_graph_executor": [flows(board, stem)],
        "test_graph_executor_on_device": [flows(board, stem, device_graph_executor=True)],
        "test_graph_executor_on_device_is_opt_in": [flows(board, GRAPH_STEM[board])],
        "test_operators_on_device_tensors": [flows("host", "kws_int8")],
        "test_time_evaluator_of_an_operator": [flows(board, GRAPH_STEM[board])],
        "test_aot_executor": [flows(board, stem)],
        "test_operator_module": [operator_module(board)],
        "test_graph_executor_with_cmsis_nn": [CMSIS_NN],
        "test_sessions_reopen": [flows("host", "kws_int8")],
    }.get(test, [])


class Runs:
    """The module's driver runs, each done once, two at a time: a run is a chain of mostly
    single-core steps (Python servers, a firmware or QEMU answering TVM's RPC; only its build
    takes both cores), so two of them take little more wall time than one. The runs of the
    selected tests all start with the first test that asks; ``get`` waits for one."""

    def __init__(
        self,
        host: Any,
        factory: pytest.TempPathFactory,
        pool: ThreadPoolExecutor,
        cmsis_nn: Optional[Path],
    ) -> None:
        self._host, self._factory, self._pool, self._cmsis_nn = host, factory, pool, cmsis_nn
        self._started: Dict[Key, Future[Dict[str, Any]]] = {}

    def start(self, key: Key) -> None:
        if key not in self._started:
            name = re.sub(r"[^\w-]+", "_", "-".join(str(part) for part in key))
            work = self._factory.mktemp(f"tvm-{name[:60]}")
            self._started[key] = self._pool.submit(self._run, key, work)

    def get(self, key: Key) -> Dict[str, Any]:
        self.start(key)
        return self._started[key].result()

    def _run(self, key: Key, work: Path) -> Dict[str, Any]:
        case: Optional[Dict[str, Any]] = None
        timeout = 600.0
        if key[0] == "flows":
            _, board, stem, *options = key
            case = archive_case(stem)
            spec = flows_spec(work, board, stem, **dict(options))
        elif key == PROTOCOL:
            spec, timeout = protocol_spec(work), 240.0
        elif key[0] == "op_module":
            spec, timeout = operator_module_spec(work, key[1]), 300.0
        elif key == CMSIS_NN:
            if self._cmsis_nn is None:
                pytest.skip(CMSIS_NN_SKIP)
            case = archive_case("kws_int8_cmsisnn")
            spec = cmsis_nn_spec(work, case, self._cmsis_nn)
        else:
            raise AssertionError(f"no such run {key}")
        result = run_driver(self._host, work / "driver", spec, timeout=timeout)
        result["case"] = case
        result["project_dir"] = Path(spec["project_dir"])
        return result


@pytest.fixture(scope="module")
def tvm_run(
    request: pytest.FixtureRequest,
    tvm_host: Any,
    tmp_path_factory: pytest.TempPathFactory,
    cmsis_nn_checkout: Optional[Path],
) -> Iterator[Runs]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = Runs(tvm_host, tmp_path_factory, pool, cmsis_nn_checkout)
        for item in request.session.items:
            if item.module is request.module:
                callspec = getattr(item, "callspec", None)
                params = dict(callspec.params) if callspec is not None else {}
                for key in keys_of(getattr(item, "originalname", item.name), params):
                    runs.start(key)
        try:
            yield runs
        finally:
            pool.shutdown(cancel_futures=True)


def action(result: Dict[str, Any], name: str) -> Dict[str, Any]:
    steps = {s["do"]: s for s in result["steps"]}
    assert steps.get("generate", {}).get("ok"), failure(result)
    session = steps.get("session", {})
    for done in session.get("actions", []):
        if done["do"] == name:
            assert "error" not in done, f"{name}: {done.get('error')}\n{done.get('trace')}"
            return dict(done)
    raise AssertionError(f"{name} was not done\n{failure(result)}")


def assert_outputs(result: Dict[str, Any], key: str) -> None:
    reference = np.load(str(result["case"]["outputs_npz"]))
    for name in reference.files:
        got = result["arrays"].get(f"{key}.{name}")
        assert got is not None, f"{key}: no {name} ({sorted(result['arrays'])})"
        assert_bit_equal(got, reference[name], f"{key} {name}")


@pytest.mark.parametrize("board", BOARDS)
def test_tvm_client_gets_a_microtvm_firmware(tvm_run: Runs, board: str) -> None:
    """generate_project through TVM's client, project_type host_driven, no protocol named:
    the project records device_protocol=microtvm and a Session opens on it."""
    from project_api.driver import Project

    result = tvm_run.get(flows(board, GRAPH_STEM[board]))
    action(result, "graph")
    project = Project.open(result["project_dir"])
    assert project.options.get("device_protocol") == "microtvm"
    session = next(s for s in result["steps"] if s["do"] == "session")
    assert set(session["timeouts"]) == {
        "session_start_retry_timeout_sec",
        "session_start_timeout_sec",
        "session_established_timeout_sec",
    }


GRAPH_CASES = [
    pytest.param("host", "kws_int8", id="host-kws_int8"),
    pytest.param("host", "mnist8", id="host-mnist8"),
    pytest.param(
        "qemu-mps2-an385", "mnist8", id="an385-mnist8", marks=[requires_arm, pytest.mark.qemu]
    ),
]


@pytest.mark.parametrize("board, stem", GRAPH_CASES)
def test_graph_executor(tvm_run: Runs, board: str, stem: str) -> None:
    """create_local_graph_executor with the archive's graph JSON and params (mnist: loaded as
    tvmc run does, load_params of the params bytes): set_input, run,
    get_output equal to TVM's reference bit for bit."""
    result = tvm_run.get(flows(board, stem))
    done = action(result, "graph")
    assert done["outputs"] == ["output0"]
    assert_outputs(result, "graph")


DEVICE_GRAPH_CASES = [
    pytest.param("host", "kws_int8", id="host-kws_int8"),
    pytest.param(
        "qemu-mps2-an385", "mnist8", id="an385-mnist8", marks=[requires_arm, pytest.mark.qemu]
    ),
]


@pytest.mark.parametrize("board, stem", DEVICE_GRAPH_CASES)
def test_graph_executor_on_device(tvm_run: Runs, board: str, stem: str) -> None:
    """With device_graph_executor, tvm.contrib.graph_executor.create over the session: the
    device parses the graph JSON and runs the graph. Counts and index lookups, load_params of
    the archive's params bytes, set_input by name and index, get_input giving back what was
    set, get_output with and without an array, the time evaluator of its run."""
    result = tvm_run.get(flows(board, stem, device_graph_executor=True))
    done = action(result, "device_graph")
    inputs = dict(np.load(str(result["case"]["inputs_npz"])))
    reference = np.load(str(result["case"]["outputs_npz"]))
    assert done["num_outputs"] == len(reference.files)
    assert done["num_inputs"] > len(inputs)  # inputs and params: TVM counts both
    assert done["index_known"] >= 0 and done["index_unknown"] == -1
    assert done["load_params"] == "ok"
    assert len(done["run_s"]) == 1 and done["run_s"][0] > 0
    assert_outputs(result, "device_graph")
    for index, name in enumerate(reference.files):
        got = result["arrays"][f"device_graph.into{index}"]
        assert_bit_equal(got, reference[name], f"get_output({index}, out)")
    for name, value in inputs.items():
        assert_bit_equal(result["arrays"][f"device_graph.input.{name}"], value, f"input {name}")


@pytest.mark.parametrize("board", BOARDS)
def test_graph_executor_on_device_is_opt_in(tvm_run: Runs, board: str) -> None:
    """A default firmware keeps its receive buffer and device memory small: the device's
    answer to tvm.graph_executor.create says which option to set, and the session goes on."""
    result = tvm_run.get(flows(board, GRAPH_STEM[board]))
    session = {s["do"]: s for s in result["steps"]}["session"]
    (refused,) = [a for a in session["actions"] if a["do"] == "device_graph"]
    assert "device_graph_executor=true" in refused.get("error", ""), refused
    action(result, "op_time")  # done after it, in the same session


def test_operators_on_device_tensors(tvm_run: Runs) -> None:
    """The KWS graph called operator by operator from Python on tensors made with
    tvm.nd.empty(..., device=session.device): no executor anywhere, same outputs."""
    result = tvm_run.get(flows("host", "kws_int8"))
    done = action(result, "operators")
    assert done["calls"] >= 5
    assert_outputs(result, "operators")


@pytest.mark.parametrize("board", BOARDS)
def test_time_evaluator_of_an_operator(tvm_run: Runs, board: str) -> None:
    """lib.time_evaluator(op, session.device, number, repeat) runs on the device's timer."""
    done = action(tvm_run.get(flows(board, GRAPH_STEM[board])), "op_time")
    assert len(done["results"]) == 2
    assert all(0 < r < 10 for r in done["results"]), done


@pytest.mark.parametrize(
    "board, stem",
    [
        pytest.param("host", "kws_int8_aot_packed", id="host-kws_int8_aot_packed"),
        pytest.param("host", "mnist8_aot", id="host-mnist8_aot"),  # interface c, float
        pytest.param(
            "qemu-mps2-an385",
            "kws_int8_aot_packed",
            id="an385-kws_int8_aot_packed",
            marks=[requires_arm, pytest.mark.qemu],
        ),
    ],
)
def test_aot_executor(tvm_run: Runs, board: str, stem: str) -> None:
    """AotModule(session.create_aot_executor()) on AOT archives (the packed interface TVM's
    host-driven flow builds, and the c interface): get_input_info, get_input().copyfrom, run,
    get_output bit-equal; time_evaluator("run")."""
    result = tvm_run.get(flows(board, stem))
    done = action(result, "aot")
    assert done["num_inputs"] == 1
    assert all(0 < r < 10 for r in done["results"]), done
    assert_outputs(result, "aot")


def operator_module_spec(work: Path, board: str) -> Dict[str, Any]:
    from mlf_builders import operator_add_files, write_tar

    archive = write_tar(work / "add.tar", operator_add_files())
    return driver_spec(
        work / "project",
        board,
        [
            {"do": "generate", "archive": str(archive)},
            {"do": "session", "actions": [{"do": "op_module"}]},
        ],
    )


@pytest.mark.parametrize("board", BOARDS)
def test_operator_module(tvm_run: Runs, board: str) -> None:
    """An operator-only archive (what AutoTVM's build function exports: functions, no graph)
    through TVM's client and Session: random_fill, the function by name on tensors allocated on
    the device, time_evaluator of ``__tvm_main__`` as AutoTVM's runner measures a trial."""
    result = tvm_run.get(operator_module(board))
    done = action(result, "op_module")
    arrays = result["arrays"]
    assert_bit_equal(arrays["op.c"], arrays["op.a"] + arrays["op.b"], "add")
    assert np.any(arrays["op.filled"] != 0), "random_fill left the tensor zero"
    assert len(done["results"]) == 3 and all(0 < r < 10 for r in done["results"]), done


def cmsis_nn_spec(work: Path, case: Dict[str, Any], cmsis_nn: Path) -> Dict[str, Any]:
    actions = [{"do": "graph", "archive": str(case["archive"]), "inputs": str(case["inputs_npz"]),
                "key": "graph"}]  # fmt: skip
    return driver_spec(
        work / "project",
        "host",
        [
            {"do": "generate", "archive": str(case["archive"])},
            {"do": "session", "actions": actions},
        ],
        cmsis_path=str(cmsis_nn),
    )


def test_graph_executor_with_cmsis_nn(tvm_run: Runs, cmsis_nn_checkout: Optional[Path]) -> None:
    """A graph archive whose operators call CMSIS-NN (functions TVM left out of its registry)
    through TVM's client with ``cmsis_path``, as TVM's templates took it: equal to the
    CMSIS-NN reference bit for bit."""
    if cmsis_nn_checkout is None:
        pytest.skip(CMSIS_NN_SKIP)
    result = tvm_run.get(CMSIS_NN)
    action(result, "graph")
    assert_outputs(result, "graph")


def test_sessions_reopen(tvm_host: Any, tvm_run: Runs, tmp_path: Path) -> None:
    """Session after Session on one project (AutoTVM opens one per trial): each starts the
    firmware again, shakes hands and serves."""
    project_dir = tvm_run.get(flows("host", "kws_int8"))["project_dir"]
    session = {"do": "session", "actions": [{"do": "system_lib"}, {"do": "copy", "nbytes": 4096}]}
    spec = driver_spec(project_dir, "host", [session, session, session])
    result = run_driver(tvm_host, tmp_path / "driver", spec, timeout=300)
    assert [s["ok"] for s in result["steps"]] == [True, True, True], failure(result)
    for step in result["steps"]:
        assert [a["do"] for a in step["actions"] if "error" not in a] == ["system_lib", "copy"]
