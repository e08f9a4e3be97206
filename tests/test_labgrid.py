"""Runs through a real labgrid lab on loopback: a labgrid-coordinator, a labgrid-exporter
that exports a board's serial console (ser2net, started by the exporter, behind a
NetworkSerialPort), a place created and tagged with labgrid-client; the "board" is a host
firmware whose console is a pty, as a board on a USB serial port would be."""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys
import time
import tty
import uuid
from pathlib import Path
from typing import Iterator, List, Tuple

import numpy as np
import pytest

from project_api.cli import main
from project_api.driver import Project
from project_api.errors import TransportError
from project_api.modelgen import catalog, compare_outputs
from project_api.run.base import reap, spawn

BIN = Path(sys.executable).parent
TOOLS = ("labgrid-coordinator", "labgrid-exporter", "labgrid-client")


def _tool(name: str) -> str:
    found = shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)
    if found is None:
        pytest.skip(f"needs {name} (pip install labgrid)")
    return found


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("ser2net") is None, reason="needs ser2net (apt-get install ser2net)"
    ),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def client(coordinator: str, *args: str, user: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, **({"LG_USERNAME": user} if user else {}))
    return subprocess.run(
        [_tool("labgrid-client"), "-x", coordinator, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    # The coordinator keeps its state (places.yaml, resources.yaml) in its working directory.
    state = tmp_path_factory.mktemp("coordinator")
    argv = [_tool("labgrid-coordinator"), "-l", f"127.0.0.1:{port}"]
    proc = spawn(argv, cwd=str(state))
    try:
        wait_for_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        reap(proc)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Project, Path, dict]:
    root = tmp_path_factory.mktemp("lab")
    model = catalog()["scalar"]()
    archive = model.write(root / "scalar.tar")
    project = Project.generate(archive, root / "p", board="host")
    project.build()
    inputs = model.sample_inputs()
    np.savez(root / "in.npz", **inputs)
    np.savez(root / "scalar.inputs.npz", **inputs)  # the references matrix looks for
    np.savez(root / "scalar.outputs.npz", **model.reference(inputs))
    return project, root / "in.npz", model.reference(inputs)


class Board:
    """A host firmware on a pty, exported by its own labgrid-exporter, in its own place."""

    def __init__(self, coordinator: str, firmware: Path, work: Path) -> None:
        self.coordinator = coordinator
        self.place = f"mlf-{uuid.uuid4().hex[:8]}"
        self.master, self.slave = pty.openpty()
        tty.setraw(self.slave)
        self.firmware = spawn(
            [str(firmware)], stdin=self.master, stdout=self.master, stderr=subprocess.DEVNULL
        )
        config = work / f"{self.place}.yaml"
        config.write_text(
            f"{self.place}-console:\n  RawSerialPort:\n    port: {os.ttyname(self.slave)}\n"
            "    speed: 115200\n"
        )
        self.exporter = spawn(
            [_tool("labgrid-exporter"), "-c", coordinator, "-n", self.place,
             "--hostname", "127.0.0.1", str(config)],
        )  # fmt: skip
        self._wait_for_resource()
        for args in (["create"], ["add-match", f"{self.place}/*/*"], ["set-tags", "board=host"]):
            done = client(coordinator, "-p", self.place, *args)
            assert done.returncode == 0, done.stderr

    def _wait_for_resource(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.place in client(self.coordinator, "resources").stdout:
                return
            time.sleep(0.2)
        raise AssertionError("the exporter never registered its console")

    def close(self) -> None:
        client(self.coordinator, "-p", self.place, "delete")
        for proc in (self.exporter, self.firmware):
            reap(proc)
        for fd in (self.master, self.slave):
            os.close(fd)


@pytest.fixture(scope="module")
def board(
    coordinator: str, built: Tuple[Project, Path, dict], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Board]:
    """One board for the tests that leave it as they found it, released with its exporter up
    (as a lab's board outlives the runs on it): a board's setup costs a few labgrid-client
    calls, each a second or so."""
    lab_board = Board(coordinator, built[0].firmware, tmp_path_factory.mktemp("board"))
    try:
        yield lab_board
    finally:
        lab_board.close()


@pytest.fixture
def own_board(
    coordinator: str, built: Tuple[Project, Path, dict], tmp_path: Path
) -> Iterator[Board]:
    """A board of the test's own (it kills the exporter)."""
    lab_board = Board(coordinator, built[0].firmware, tmp_path)
    try:
        yield lab_board
    finally:
        lab_board.close()


def _run_argv(
    board: Board, built: Tuple[Project, Path, dict], tmp_path: Path, *extra: str
) -> List[str]:
    project, inputs, _ = built
    argv = ["run", str(project.dir), "--input", str(inputs), "--output", str(tmp_path / "o.npz")]
    argv += ["--labgrid", board.place, "--labgrid-coordinator", board.coordinator, *extra]
    return [sys.executable, "-c", "import sys; from project_api.cli import main; sys.exit(main())",
            *argv]  # fmt: skip


def run_on(
    board: Board, built: Tuple[Project, Path, dict], tmp_path: Path, *extra: str
) -> Tuple[int, str, str]:
    done = subprocess.run(
        _run_argv(board, built, tmp_path, *extra), capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def test_run_through_the_coordinator(board: Board, built, tmp_path: Path) -> None:
    status, out, err = run_on(board, built, tmp_path)
    assert status == 0, err
    outputs = dict(np.load(tmp_path / "o.npz"))
    assert compare_outputs(outputs, built[2]) == []
    show = client(board.coordinator, "-p", board.place, "show").stdout
    assert "acquired: None" in show  # released at the end


def test_place_held_by_another_user(board: Board, built, tmp_path: Path) -> None:
    assert client(board.coordinator, "-p", board.place, "acquire", user="alice").returncode == 0
    try:
        _held_by_alice(board, built, tmp_path)
    except BaseException:  # the board is the next tests' too: never left acquired
        client(board.coordinator, "-p", board.place, "release", "-k", user="alice")
        raise


def _held_by_alice(board: Board, built, tmp_path: Path) -> None:
    status, _, err = run_on(board, built, tmp_path)
    assert status == 2
    assert f"cannot acquire labgrid place {board.place!r}" in err and "alice" in err
    assert "--labgrid-wait" in err
    # Released once the run says it waits (not after a fixed delay: under load the run may
    # reach the place later than any delay).
    waiting = f"waiting for labgrid place {board.place} (acquired by"
    proc = subprocess.Popen(
        _run_argv(board, built, tmp_path, "--labgrid-wait"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines: List[str] = []
        for line in proc.stderr:
            lines.append(line)
            if waiting in line:
                break
        assert any(waiting in line for line in lines), "".join(lines)
        client(board.coordinator, "-p", board.place, "release", user="alice")
        err = "".join(lines) + proc.stderr.read()
        status = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status == 0, err


def test_coordinator_unreachable(built, capsys: pytest.CaptureFixture) -> None:
    project, inputs, _ = built
    port = free_port()
    status = main(
        ["run", str(project.dir), "--input", str(inputs), "--labgrid", "nowhere",
         "--labgrid-coordinator", f"127.0.0.1:{port}", "--timeout", "20"]
    )  # fmt: skip
    assert status == 2
    err = capsys.readouterr().err
    assert f"the labgrid coordinator at 127.0.0.1:{port} is unreachable" in err


def test_a_lab_that_is_not_there_is_found_before_building(
    board: Board, built, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    archive = built[1].parent / "scalar.tar"
    port = free_port()
    for place, coordinator, message in (
        ("nowhere", f"127.0.0.1:{port}", f"127.0.0.1:{port} is unreachable"),
        ("no-such-place", board.coordinator, "labgrid place 'no-such-place'"),
    ):
        argv = ["run", str(archive), "--labgrid", place, "--labgrid-coordinator", coordinator]
        assert main(argv + ["--project-dir", str(tmp_path / place)]) == 2
        err = capsys.readouterr().err
        assert message in err and "generating" not in err, err
        assert not (tmp_path / place).exists()


def test_exporter_gone_mid_run(own_board: Board, built) -> None:
    board = own_board
    project = built[0]
    project.run_overrides.update(labgrid_place=board.place, labgrid_coordinator=board.coordinator)
    try:
        with project.session(timeout=10.0) as session:
            session.run(dict(np.load(built[1])))
            os.killpg(board.exporter.pid, signal.SIGKILL)  # the exporter and its ser2net
            subprocess.run(["pkill", "-KILL", "-f", os.ttyname(board.slave)], check=False)
            with pytest.raises(TransportError):
                for _ in range(20):
                    session.run(dict(np.load(built[1])))
    finally:
        project.run_overrides.clear()
    show = client(board.coordinator, "-p", board.place, "show").stdout
    assert "acquired: None" in show


def test_matrix_on_a_place_and_a_local_board(board: Board, built, tmp_path: Path, capsys) -> None:
    archive = built[1].parent / "scalar.tar"
    argv = ["matrix", str(archive), "--board", "host", "--labgrid", f"{board.place}=host"]
    argv += ["--labgrid-coordinator", board.coordinator, "--jobs", "2", "--json"]
    assert main(argv) == 0
    cells = json.loads(capsys.readouterr().out)
    assert [(c["target"], c["status"]) for c in cells] == [
        ("host", "pass"),
        (f"host@{board.place}", "pass"),
    ]
    assert "acquired: None" in client(board.coordinator, "-p", board.place, "show").stdout
