"""The CLI in pipes and under Ctrl-C: a reader that goes away ends us quietly with the status
a shell gives SIGPIPE; Ctrl-C during a build or a run ends with one line, status 130, and
no process of ours left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
from conftest import have_tool
from mlf_builders import mlf_files, write_tar

from project_api.modelgen import catalog

ENTRY = "import sys; from project_api.cli import main; sys.exit(main())"
MARK = "MLF_SIGNAL_TEST"


def marked_processes(mark: str) -> List[Tuple[int, str]]:
    """Every process started with ``MARK=mark``, and their descendants: a confined build gets
    an allow-listed environment without the mark (policies.build_environment)."""
    needle = f"{MARK}={mark}".encode()
    names: Dict[int, str] = {}
    parents: Dict[int, int] = {}
    marked = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        try:
            status = (entry / "status").read_text()
            names[pid] = (entry / "comm").read_text().strip()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("PPid:"):
                parents[pid] = int(line.split()[1])
        if needle in environ.split(b"\0"):
            marked.add(pid)
    found = []
    for pid, name in names.items():
        seen = pid
        for _ in range(64):  # up the tree to a marked ancestor, or to its root
            if seen in marked:
                found.append((pid, name))
                break
            if seen not in parents:
                break
            seen = parents[seen]
    return found


def start_cli(*argv: object) -> Tuple[subprocess.Popen, str]:
    """``mlf-project argv`` in a session of its own, as a shell starts a foreground job."""
    mark = uuid.uuid4().hex
    env = dict(os.environ, **{MARK: mark})
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        # a shell gives its foreground job SIGINT's default, whatever it was given itself (a
        # parent such as `cmd &` in a script ignores SIGINT, and the ignoring is inherited)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, mark


def wait_for(mark: str, names: Tuple[str, ...], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for _, name in marked_processes(mark):
            if name.startswith(names):
                return name
        time.sleep(0.02)
    raise AssertionError(f"none of {names} started within {timeout} s")


def interrupt_and_check(proc: subprocess.Popen, mark: str, command: str) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        # not interrupted: end it and every marked process (QEMU runs in a session of its
        # own) before failing, so nothing outlives the test
        for pid, _ in marked_processes(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.communicate()
        raise
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text
    assert text.strip().splitlines()[-1] == f"mlf-project {command}: interrupted"
    deadline = time.monotonic() + 5
    while marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked_processes(mark) == []


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    archive = write_tar(tmp_path / "m.tar", mlf_files(7))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (`| head`) has gone before we write
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "info", str(archive), "--json"],
        stdout=write_end,
        stderr=subprocess.PIPE,
    )
    os.close(write_end)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGPIPE
    assert err == b""


def test_an_open_pipe_is_not_mistaken_for_a_closed_one(tmp_path: Path) -> None:
    archive = write_tar(tmp_path / "m.tar", mlf_files(7))
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "info", str(archive)], capture_output=True, timeout=60
    )
    assert done.returncode == 0 and b"model default" in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(not have_tool("cmake"), reason="needs cmake")
def test_ctrl_c_during_a_build(tmp_path: Path) -> None:
    archive = catalog()["scalar"]().write(tmp_path / "scalar.tar")
    proc, mark = start_cli("run", archive, "--project-dir", tmp_path / "p", "--board", "host")
    wait_for(mark, ("cmake", "ninja", "cc1", "gcc", "cc", "make"), timeout=60)
    interrupt_and_check(proc, mark, "run")


@pytest.mark.slow
@pytest.mark.skipif(
    not (have_tool("qemu-system-arm") and have_tool("arm-none-eabi-gcc")),
    reason="needs qemu-system-arm and arm-none-eabi-gcc",
)
def test_ctrl_c_during_a_run_on_qemu(tmp_path: Path) -> None:
    model = catalog()["scalar"]()
    archive = model.write(tmp_path / "scalar.tar")
    np.savez(tmp_path / "in.npz", **model.sample_inputs())
    # profile runs the model --repeat times in one session: long enough to interrupt.
    proc, mark = start_cli(
        "profile", archive, "--board", "qemu-mps2-an385", "--input", tmp_path / "in.npz",
        "--project-dir", tmp_path / "p", "--repeat", "1000000",
    )  # fmt: skip
    wait_for(mark, ("qemu-system-arm",), timeout=300)
    time.sleep(1.0)  # well into the session
    interrupt_and_check(proc, mark, "profile")
