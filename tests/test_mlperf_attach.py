"""``mlf-project attach``: the firmware's console exposed to a third-party tool. A separate
program written from the protocol's description (tests/mlperf/eembc_client.py, pyserial only)
connects to the printed pty path or socket:// URL and runs name, db load, db, infer 1 0 and
results; the reference outputs must come back. Then SIGTERM stops everything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from conftest import REPO_ROOT, requires_arm
from mlperf_support import CLIENT, mlperftiny_project, reference, reference_values

from project_api.run.base import reap, spawn

pytestmark = pytest.mark.slow


@pytest.fixture
def attached(request: pytest.FixtureRequest) -> Iterator[Dict[str, Any]]:
    form, board = request.param
    project = mlperftiny_project(form, board)
    command = [sys.executable, "-m", "project_api", "attach", str(project.dir), "--json"]
    proc = spawn(command, cwd=str(REPO_ROOT))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line, (proc.stderr.read() if proc.stderr else b"").decode()
        endpoints = json.loads(line)
        yield {"proc": proc, "form": form, **endpoints}
    finally:
        reap(proc, grace=10.0)


def run_client(url: str, form: str, tmp_path: Path) -> Dict[str, Any]:
    data = tmp_path / "input.bin"
    data.write_bytes(reference(form)[0])
    done = subprocess.run(
        [sys.executable, str(CLIENT), url, str(data)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def check_session(out: Dict[str, Any], form: str) -> None:
    assert out["name"] == ["m-name-dut-[mlf-project-api]"]
    assert out["load"] == ["m-[Expecting 490 bytes]", "m-load-done"]
    infer: List[str] = out["infer"]
    assert infer[:3] == ["m-warmup-start-0", "m-warmup-done", "m-infer-start-1"]
    assert [line.startswith("m-lap-us-") for line in infer[3:5]] == [True, True]
    assert out["results"] == [float(v) for v in reference_values(form)]


def stop(attached: Dict[str, Any]) -> None:
    proc = attached["proc"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    pid = attached.get("pid")
    if attached["board"] == "host" and pid is not None:
        time.sleep(0.2)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the firmware was reaped with attach


@pytest.mark.parametrize(
    "attached", [("graph", "host"), ("aot", "host")], indirect=True, ids=["graph", "aot"]
)
def test_a_separate_client_through_the_pty_and_the_socket(
    attached: Dict[str, Any], tmp_path: Path
) -> None:
    assert attached["pty"].startswith("/dev/") and attached["socket"].startswith("socket://")
    check_session(run_client(attached["pty"], attached["form"], tmp_path), attached["form"])
    # Again, through the TCP port, then the pty once more: the firmware kept serving.
    check_session(run_client(attached["socket"], attached["form"], tmp_path), attached["form"])
    check_session(run_client(attached["pty"], attached["form"], tmp_path), attached["form"])
    stop(attached)


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize(
    "attached",
    [("graph", "qemu-mps2-an385"), ("aot", "qemu-mps2-an385"), ("graph", "qemu-netduinoplus2")],
    indirect=True, ids=["graph", "aot", "graph-netduinoplus2"],
)  # fmt: skip
def test_a_separate_client_on_qemu(attached: Dict[str, Any], tmp_path: Path) -> None:
    check_session(run_client(attached["pty"], attached["form"], tmp_path), attached["form"])
    stop(attached)
