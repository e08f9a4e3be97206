"""Misbehaving firmware through ``mlf-project run``, on ``host`` and under QEMU: a crash, a
hang inside an operator, garbage instead of frames, and an operator error each end with exit
status 2 and one line saying what happened, within the time-out, with no firmware or QEMU
process left behind. Also: models too big for a board are refused before anything is built,
with the numbers.

The misbehaving firmware is the factory's ``failing`` model whose ``fail_if`` operator is
patched (its generated C, as a test-only archive) to do the bad thing its int32 input
``fail`` selects; one build per board serves every case.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest
from conftest import child_processes, corpus_case, have_tool, requires_arm
from mlf_builders import write_tar

from project_api.cli import main
from project_api.driver import Project
from project_api.errors import FitError
from project_api.modelgen import catalog, params_sized
from project_api.run.base import live_children, reap

pytestmark = pytest.mark.slow

HOST = "host"
QEMU = "qemu-mps2-an385"
SMALL = "qemu-lm3s6965evb"
TIMEOUT = 2.0  # --timeout of every misbehaving run
# A run must end this long after its time-out at the latest (start-up, build check, reaping).
SLACK = 5.0

# --- the misbehaving firmware --------------------------------------------------------------

# What the patched operator does for each value of the model's ``fail`` input.
BEHAVIOURS = {"none": 0, "crash": 1, "hang": 2, "garbage": 3, "text": 4, "operator_error": 5}

PROLOGUE = """
#include <stddef.h>
#include <stdint.h>
/* The firmware's console link (crt/include/mlf_platform.h): what a broken operator could
 * scribble on. */
void mlf_platform_write(const uint8_t* buf, size_t n);
#if defined(__arm__)
#define MLF_TEST_BAD_ADDRESS 0xF0000000u /* nothing answers there on MPS2: a bus fault */
#else
#define MLF_TEST_BAD_ADDRESS 16u /* below mmap_min_addr: SIGSEGV */
#endif
static void mlf_test_garbage(int text) {
  uint32_t state = 0x12345678u;
  uint8_t chunk[64];
  for (;;) {
    for (size_t i = 0; i < sizeof(chunk); ++i) {
      state ^= state << 13;
      state ^= state >> 17;
      state ^= state << 5;
      chunk[i] = text ? (uint8_t)('a' + state % 26u) : (uint8_t)state;
    }
    mlf_platform_write(chunk, sizeof(chunk));
  }
}
"""

FAIL_IF = "  if (((int32_t*)p1_1)[0] != 0) {\n    return -1;\n  }\n"
MISBEHAVE = """  switch (((int32_t*)p1_1)[0]) {
    case 0: break;
    case 1: *(volatile uint32_t*)(uintptr_t)MLF_TEST_BAD_ADDRESS = 0xDEADu; break;
    case 2: for (;;) { __asm__ volatile(""); }
    case 3: mlf_test_garbage(0); break;
    case 4: mlf_test_garbage(1); break;
    default: return -1;
  }
"""


def misbehaving_archive(path: Path) -> Path:
    members = catalog()["failing"]().members()
    key = next(k for k in members if k.endswith("lib1.c"))
    text = members[key].decode()
    assert FAIL_IF in text, "the failing model's fail_if operator changed: update this test"
    text = text.replace("#include <math.h>\n", "#include <math.h>\n" + PROLOGUE, 1)
    members[key] = text.replace(FAIL_IF, MISBEHAVE).encode()
    return write_tar(path, members)


def inputs_file(directory: Path, behaviour: str) -> Path:
    path = directory / f"{behaviour}.npz"
    if not path.exists():
        x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)
        np.savez(path, x=x, fail=np.array(BEHAVIOURS[behaviour], dtype=np.int32))
    return path


@pytest.fixture(scope="module")
def misbehaving(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """board -> built Project (or the exception its build raised); both boards at once."""
    root = tmp_path_factory.mktemp("misbehaving")
    archive = misbehaving_archive(root / "misbehaving.tar")
    arm = have_tool("arm-none-eabi-gcc") and have_tool("qemu-system-arm")
    boards = [HOST] + ([QEMU] if arm else [])

    def one(board: str) -> Any:
        try:
            project = Project.generate(archive, root / board, board=board)
            project.build()
            return project
        except Exception as err:  # noqa: BLE001 - raised by the test of that board
            return err

    with ThreadPoolExecutor(max_workers=2) as pool:
        built = dict(zip(boards, pool.map(one, boards)))
    return {"root": root, "built": built}


def project_for(misbehaving: Dict[str, Any], board: str) -> Project:
    project = misbehaving["built"][board]
    if isinstance(project, Exception):
        raise project
    return project


# --- running the CLI with a watchdog, and looking for leftovers ----------------------------


def run_cli_bounded(
    capsys: pytest.CaptureFixture,
    argv: List[Any],
    limit: float,
    meanwhile: Optional[Callable[[], None]] = None,
) -> Tuple[int, str, str, float, bool]:
    """``mlf-project ARGV`` in a thread: (status, stdout, stderr, seconds, hung). When it has
    not returned after ``limit`` seconds it hung: its children are killed (which closes the
    link under it) so that the test can go on and report the hang. ``meanwhile`` runs in
    this thread while the command runs."""
    result: Dict[str, int] = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("status", main([str(a) for a in argv])), daemon=True
    )
    began = time.monotonic()
    thread.start()
    if meanwhile is not None:
        meanwhile()
    thread.join(max(0.0, limit - (time.monotonic() - began)))
    hung = thread.is_alive()
    if hung:
        for proc in live_children():
            reap(proc, grace=0.2)
        thread.join(10.0)
    seconds = time.monotonic() - began
    captured = capsys.readouterr()
    return result.get("status", -1), captured.out, captured.err, seconds, hung


def children_left(prefixes: Tuple[str, ...] = ("qemu-system", "firmware")) -> List[str]:
    """Children left behind, zombies included (an unreaped child is a leak too)."""
    return [f"{c.pid} {c.name} ({c.state})" for c in child_processes(prefixes)]


def open_fds() -> List[str]:
    """What this process's open descriptors point at (a pty, a pipe, a log file)."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the descriptor listdir itself used is gone
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
    return sorted(targets)


def error_line(err: str) -> str:
    """The one line ``mlf-project run`` printed for its error (asserting there is one)."""
    lines = [line for line in err.splitlines() if line.startswith("mlf-project run: error:")]
    assert len(lines) == 1, err
    return lines[0]


# --- the cases ---------------------------------------------------------------------------------

# (board, behaviour) -> a pattern the error line must match.
EXPECTED = {
    (HOST, "crash"): r"device link closed while waiting for the reply to RUN: the device "
    r"process was killed by SIGSEGV",
    (QEMU, "crash"): r"device link closed while waiting for the reply to RUN: firmware fault "
    r"\(status 250\): HardFault .*pc=0x[0-9a-f]{8} .*cfsr=0x[0-9a-f]{8} .*bfar=0xf0000000",
    (HOST, "hang"): rf"no reply to RUN within {TIMEOUT:g} s",
    (QEMU, "hang"): rf"no reply to RUN within {TIMEOUT:g} s",
    (HOST, "garbage"): r"corrupt frame|garbage",
    (QEMU, "garbage"): r"corrupt frame|garbage",
    (HOST, "text"): rf"no reply to RUN within {TIMEOUT:g} s .*garbage",
    (QEMU, "text"): rf"no reply to RUN within {TIMEOUT:g} s .*garbage",
    (HOST, "operator_error"): r"the device refused RUN: .*operator",
    (QEMU, "operator_error"): r"the device refused RUN: .*operator",
}


def _cases() -> List[Any]:
    cases = []
    for board, behaviour in EXPECTED:
        marks: List[Any] = []
        if board != HOST:
            marks += [pytest.mark.qemu, requires_arm]
        cases.append(pytest.param(board, behaviour, id=f"{board}-{behaviour}", marks=marks))
    return cases


@pytest.mark.parametrize("board, behaviour", _cases())
def test_misbehaving_firmware_gives_a_clear_error_in_time(
    board: str,
    behaviour: str,
    misbehaving: Dict[str, Any],
    capsys: pytest.CaptureFixture,
) -> None:
    project = project_for(misbehaving, board)
    inputs = inputs_file(misbehaving["root"], behaviour)
    fds = open_fds()
    argv = ["run", project.dir, "--input", inputs, "--timeout", TIMEOUT]
    status, out, err, seconds, hung = run_cli_bounded(capsys, argv, TIMEOUT + SLACK)
    try:
        assert not hung, f"mlf-project run hung: still running {TIMEOUT + SLACK:g} s after start"
        assert status == 2, out + err
        line = error_line(err)
        assert re.search(EXPECTED[(board, behaviour)], line), line
        assert seconds < TIMEOUT + SLACK
    finally:
        assert live_children() == []
        assert children_left() == []
    leaked = Counter(open_fds()) - Counter(fds)
    assert not leaked, f"descriptors left open: {sorted(leaked)}"  # the pty, QEMU's pipes


@pytest.mark.parametrize(
    "board",
    [HOST, pytest.param(QEMU, marks=[pytest.mark.qemu, requires_arm])],
)
def test_the_misbehaving_firmware_behaves_when_asked_to(
    board: str, misbehaving: Dict[str, Any], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """The control: with ``fail`` = 0 the same firmware answers with the reference."""
    project = project_for(misbehaving, board)
    inputs = inputs_file(misbehaving["root"], "none")
    output = tmp_path / "out.npz"
    argv = ["run", project.dir, "--input", inputs, "--output", output, "--timeout", TIMEOUT]
    status, out, err, _, hung = run_cli_bounded(capsys, argv, TIMEOUT + SLACK)
    assert not hung and status == 0, out + err
    x = dict(np.load(inputs))["x"]
    np.testing.assert_array_equal(np.load(output)["output0"], np.maximum(x, 0) + 1)
    assert live_children() == [] and children_left() == []


@pytest.mark.parametrize(
    "board, expected",
    [
        (HOST, "the device process was killed by SIGKILL"),
        pytest.param(QEMU, "QEMU died of SIGKILL", marks=[pytest.mark.qemu, requires_arm]),
    ],
)
def test_device_killed_mid_run_through_the_cli(
    board: str, expected: str, misbehaving: Dict[str, Any], capsys: pytest.CaptureFixture
) -> None:
    """The firmware process dies under ``mlf-project run`` (here while it hangs in RUN, with
    a long time-out): the closed link is noticed at once, not at the time-out."""
    project = project_for(misbehaving, board)
    inputs = inputs_file(misbehaving["root"], "hang")
    killed: List[float] = []

    def kill_the_device() -> None:
        deadline = time.monotonic() + 20
        while not live_children() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # into the conversation, most likely the RUN
        for proc in live_children():
            os.kill(proc.pid, signal.SIGKILL)
            killed.append(time.monotonic())

    argv = ["run", project.dir, "--input", inputs, "--timeout", 30]
    status, out, err, _, hung = run_cli_bounded(capsys, argv, 40, kill_the_device)
    ended = time.monotonic()
    assert killed, "the firmware never started"
    assert not hung and status == 2, out + err
    assert ended - killed[0] < 5, "the death was noticed only at the time-out"
    line = error_line(err)
    # Under load the kill can land before the RUN (while a wake-up byte goes out): the cause
    # and the promptness are what count.
    assert "the device link closed while " in line and expected in line, line
    assert live_children() == [] and children_left() == []


# --- models that do not fit are refused before building --------------------------------------

FIT_RE = re.compile(
    r"(?P<region>RAM|flash): needs (?P<needed>\d+) bytes(?: before code)? \((?P<items>[^)]*)\) "
    r"but the board has (?P<available>\d+) \((?P<excess>\d+) too many\)"
)


def fit_numbers(line: str, region: str) -> Tuple[int, int, Dict[str, int]]:
    """(needed, available, items) of one region in a fit refusal, checked to add up."""
    match = next((m for m in FIT_RE.finditer(line) if m.group("region") == region), None)
    assert match is not None, f"no {region} numbers in: {line}"
    items = {}
    for item in match.group("items").split(", "):
        name, size = item.rsplit(" ", 1)
        items[name] = int(size)
    needed, available = int(match.group("needed")), int(match.group("available"))
    assert sum(items.values()) == needed, line
    assert int(match.group("excess")) == needed - available, line
    return needed, available, items


def assert_nothing_built(project_dir: Path, err: str) -> None:
    assert "configuring" not in err and "compiling" not in err
    written = sorted(p.name for p in project_dir.rglob("*")) if project_dir.exists() else []
    assert written == [], f"written before the refusal: {written}"


def test_a_model_too_big_for_the_ram_is_refused_before_building(
    mlf_corpus: Path, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """kws_int8 needs ~94 KiB of RAM (the liveness plan's arena: tensors and each operator's
    workspace window); the lm3s6965evb has 64 KiB."""
    case = corpus_case(mlf_corpus / "kws_int8.tar")
    argv = ["run", case["archive"], "--board", SMALL, "--input", case["inputs_npz"]]
    argv += ["--project-dir", tmp_path / "p"]
    status, out, err, _, hung = run_cli_bounded(capsys, argv, 60)
    assert not hung and status == 2, out + err
    line = error_line(err)
    assert f"model kws does not fit board {SMALL}: RAM:" in line
    needed, available, items = fit_numbers(line, "RAM")
    assert available == 64 * 1024 and needed > available
    # The model's own numbers are the board-independent ones of a project that fits.
    fits = Project.generate(Path(str(case["archive"])), tmp_path / "big", board=QEMU)
    planned = fits.info["fit"]["ram"]["items"]
    assert items["arena"] == planned["arena"] > 0
    assert "workspace" not in items and "workspace" not in planned  # in the arena
    assert items["stack"] == 4096  # the lm3s6965evb's
    assert "flash:" not in line  # 64 KiB of params fit its 256 KiB of flash
    assert_nothing_built(tmp_path / "p", err)


def test_a_model_too_big_for_the_flash_is_refused_before_building(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    model = params_sized(300 * 1024)  # ~300 KiB of weights; the lm3s6965evb has 256 KiB flash
    archive = model.write(tmp_path / "big.tar")
    with pytest.raises(FitError) as caught:
        Project.generate(archive, tmp_path / "api", board=SMALL)
    assert_nothing_built(tmp_path / "api", "")
    argv = ["run", archive, "--board", SMALL, "--project-dir", tmp_path / "p"]
    status, out, err, _, hung = run_cli_bounded(capsys, argv, 60)
    assert not hung and status == 2, out + err
    line = error_line(err)
    assert str(caught.value) in line
    assert f"model {model.name} does not fit board {SMALL}: flash:" in line
    needed, available, items = fit_numbers(line, "flash")
    assert available == 256 * 1024
    params_bytes = sum(a.nbytes for a in model.params.values())
    assert params_bytes <= items["params"] < params_bytes + 4096  # + the blob's headers
    assert "RAM:" not in line
    assert_nothing_built(tmp_path / "p", err)
