"""The QEMU boards end to end: the seam test firmware (tests/firmware_qemu/) is built with the
board's toolchain file, rendered linker script and C seam, then driven through QemuRunner and
pyserial on every QEMU board.

Also the runner's failure paths (QEMU missing, exiting, silent, the firmware crashing,
hanging, the test raising or the interpreter exiting mid-run): each ends with a clear error
within its time-out and no QEMU process left behind.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Tuple, TypeVar

import pytest
from conftest import REPO_ROOT, child_processes, requires_arm

from project_api.board import ArmCpu, Board, list_boards, load_board
from project_api.errors import FlashError
from project_api.resources import crt_dir
from project_api.run.base import live_children, reap
from project_api.run.qemu import (
    EXIT_ABORT,
    EXIT_FAULT,
    QemuRunner,
    describe_exit,
    with_console_fd,
)

# The Arm ones (qemu-system-arm); the RISC-V boards have their own: test_qemu_riscv.py.
QEMU_BOARDS = [board.name for board in list_boards() if board.is_qemu and board.arch == "cortex-m"]
FIRMWARE_SOURCE = Path(__file__).resolve().parent / "firmware_qemu"
GREETING = b"SEAM\n"
SYNC_KEY = 0x33  # echoed as 0x69 ('i'), a byte no greeting holds
TIMEOUT = 10.0
T = TypeVar("T")
# Measured figures, printed at the end of the session (pytest -s shows them).
MEASURED: Dict[str, Dict[str, float]] = {}


# --- helpers ------------------------------------------------------------------------------


def process_alive(pid: int) -> bool:
    """True while ``pid`` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.02)
    return False


def our_qemu_processes() -> List[int]:
    """qemu-system-arm processes whose parent is this test process (zombies aside)."""
    return [c.pid for c in child_processes(("qemu-system",)) if c.state != "Z"]


def read_exactly(port, count: int) -> bytes:
    data = b""
    deadline = time.monotonic() + TIMEOUT
    while len(data) < count and time.monotonic() < deadline:
        data += port.read(count - len(data))
    assert len(data) == count, f"expected {count} bytes, got {data!r}"
    return data


def measure(port, iterations: int, *, dribble: bool = False) -> Tuple[int, int]:
    """Ticks of ``iterations`` rounds of a 2-instruction loop, and the tick rate. With
    ``dribble`` the command goes out a byte at a time with pauses, so the firmware waits for
    input a different number of instructions than when it arrives at once."""
    command = b"t" + struct.pack("<I", iterations)
    if dribble:
        for byte in command:
            port.write(bytes([byte]))
            port.flush()
            time.sleep(0.003)
    else:
        port.write(command)
    ticks, tick_hz = struct.unpack("<QQ", read_exactly(port, 16))
    return ticks, tick_hz


@pytest.fixture(autouse=True)
def no_children_left():
    yield
    leftovers = live_children()
    for proc in leftovers:
        reap(proc)  # killed and forgotten, so one leak fails one test, not every later one
    assert not leftovers, f"children left running: {[p.args for p in leftovers]}"
    assert our_qemu_processes() == []


# --- building the seam test firmware --------------------------------------------------------


class FirmwareBuilder:
    """Builds tests/firmware_qemu for a board once per session (CMake + the board's toolchain
    file and linker script), the way a generated project will be built."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: Dict[str, Path] = {}

    def __call__(self, board: Board) -> Path:
        if board.name not in self.built:
            self.built[board.name] = self._build(board)
        return self.built[board.name]

    def _build(self, board: Board) -> Path:
        out = self.root / board.name
        out.mkdir(parents=True, exist_ok=True)
        linker_script = out / "linker.ld"
        linker_script.write_text(board.render_linker_script())
        include_dirs = [crt_dir() / "include", *board.seam_include_dirs()]
        definitions = [f"{k}={v}" for k, v in board.compile_definitions().items()]
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = [
            "cmake",
            *generator,
            "-S",
            str(FIRMWARE_SOURCE),
            "-B",
            str(out / "build"),
            *board.cmake_args(),
            "-DMLF_SEAM_SOURCES=" + ";".join(str(p) for p in board.seam_sources()),
            "-DMLF_SEAM_INCLUDE_DIRS=" + ";".join(str(p) for p in include_dirs),
            "-DMLF_BOARD_DEFINITIONS=" + ";".join(definitions),
            f"-DMLF_LINKER_SCRIPT={linker_script}",
        ]
        for command in (configure, ["cmake", "--build", str(out / "build")]):
            result = subprocess.run(command, capture_output=True, text=True)
            assert result.returncode == 0, (
                f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return out / "build" / "seam_test.elf"


@pytest.fixture(scope="session")
def firmware_builder(tmp_path_factory) -> FirmwareBuilder:
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake on PATH (pip install cmake)")
    return FirmwareBuilder(tmp_path_factory.mktemp("seam"))


@pytest.fixture(scope="session", autouse=True)
def report_measurements():
    yield
    if MEASURED:
        print("\nQEMU measurements (board: figure = value)")
        for board, figures in sorted(MEASURED.items()):
            text = ", ".join(f"{key} = {value:g}" for key, value in sorted(figures.items()))
            print(f"  {board}: {text}")


def start(board: Board, firmware: Path, **kwargs) -> Tuple[QemuRunner, object]:
    """QEMU running the seam firmware, which has answered its greeting."""
    runner = QemuRunner(board, firmware, **kwargs)
    port = runner.start(TIMEOUT)
    try:
        # Asked, not awaited from boot, and asked again while unanswered: a USART that drops
        # input until the firmware enables it (netduinoplus2) loses a byte sent before the
        # CPU got that far.
        deadline = time.monotonic() + TIMEOUT
        port.write(b"g")
        first = port.read(1)
        while not first and time.monotonic() < deadline:
            port.write(b"g")
            first = port.read(1)
        assert first + read_exactly(port, len(GREETING) - 1) == GREETING
        # A greeting asked again may still be on its way: an echo answered after it (the
        # firmware serves in order) marks where the link is in step.
        port.write(b"e\x01" + bytes([SYNC_KEY]))
        while True:
            byte = read_exactly(port, 1)
            if byte == bytes([SYNC_KEY ^ 0x5A]):
                break
            assert byte in GREETING, f"unexpected byte {byte!r} before the echo"
    except BaseException:
        runner.stop()
        raise
    return runner, port


# --- every QEMU board ---------------------------------------------------------------------


def side_by_side(
    request: pytest.FixtureRequest,
    firmware_builder: FirmwareBuilder,
    test: str,
    scenario: Callable[[Board, Path], T],
) -> Dict[str, Future[T]]:
    """``scenario`` on every board the selected cases of ``test`` name, all at once (a QEMU
    here mostly waits: for bytes, a time-out or a sleep), each board's result or exception
    for its case to check. Every QEMU is reaped before this returns, so none outlives the
    first case's check that no child is left."""
    boards = [
        load_board(item.callspec.params["board_name"])
        for item in request.session.items
        if item.module is request.module and getattr(item, "originalname", "") == test
    ]
    firmware = {board.name: firmware_builder(board) for board in boards}
    with ThreadPoolExecutor(max_workers=max(1, len(boards))) as pool:
        return {b.name: pool.submit(scenario, b, firmware[b.name]) for b in boards}


def echo_float_log_and_exit(board: Board, firmware: Path) -> QemuRunner:
    runner, port = start(board, firmware)
    with runner:
        MEASURED.setdefault(board.name, {})["start_s"] = round(runner.startup_seconds, 3)
        payload = bytes(range(256))
        for offset in range(0, len(payload), 200):
            chunk = payload[offset : offset + 200]
            port.write(b"e" + bytes([len(chunk)]) + chunk)
            assert read_exactly(port, len(chunk)) == bytes(b ^ 0x5A for b in chunk)

        port.write(b"p")  # faults on hard-float boards unless the seam enabled the FPU
        assert struct.unpack("<f", read_exactly(port, 4))[0] == 4.0

        port.write(b"l")
        assert read_exactly(port, 1) == b"L"

        port.write(b"x\x2a")
        assert runner.wait(TIMEOUT) == 42
    return runner


@pytest.fixture(scope="module")
def echoes(
    request: pytest.FixtureRequest, firmware_builder: FirmwareBuilder
) -> Dict[str, Future[QemuRunner]]:
    return side_by_side(
        request, firmware_builder, "test_echo_float_log_and_exit_status", echo_float_log_and_exit
    )


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_echo_float_log_and_exit_status(board_name, echoes):
    """Echo, a float computed on the device, a log line and an exit status, on every board
    (the boards side by side: see side_by_side)."""
    runner = echoes[board_name].result()
    assert "seam_test: diagnostic line" in runner.log
    assert runner.exit_reason() == "exited with status 42"
    assert runner.exit_status == 42
    assert not runner.running


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_icount_tick_counts_are_exact_instruction_counts(board_name, firmware_builder):
    board = load_board(board_name)
    firmware = firmware_builder(board)
    short, long = 100_000, 300_000  # iterations of a 2-instruction loop
    runs = []
    for dribble in (False, True):
        runner, port = start(board, firmware, icount=True)
        with runner:
            runs.append((measure(port, short, dribble=dribble), measure(port, long)))
    (short_a, long_a), (short_b, long_b) = runs
    assert (short_a, long_a) == (short_b, long_b), "icount tick counts differ between runs"

    tick_hz = short_a[1]
    assert tick_hz == board.timer.clock_hz
    instructions = 2 * (long - short)
    ticks = long_a[0] - short_a[0]
    per_tick = instructions / ticks
    assert per_tick == pytest.approx(board.instructions_per_tick(), rel=1e-4)
    assert runner.ticks_to_instructions(tick_hz) == pytest.approx(1e9 / tick_hz)
    MEASURED.setdefault(board_name, {}).update(
        {"instructions_per_tick": round(per_tick, 3), "ticks_for_600k_instr": long_a[0]}
    )


IDLE_SILENCE = 1.5


@dataclass(frozen=True)
class IdleWait:
    ticks: int  # counted by the firmware from before its "W" to the byte that woke it
    window: float  # host seconds from the "w" sent to the count read
    answer: bytes  # its echo of b"abc" after waking


def idle_wait(board: Board, firmware: Path) -> IdleWait:
    runner, port = start(board, firmware)
    with runner:
        began = time.monotonic()
        port.write(b"w")
        assert read_exactly(port, 1) == b"W"  # the firmware's count started before this
        time.sleep(IDLE_SILENCE)
        port.write(b"!")
        (ticks,) = struct.unpack("<Q", read_exactly(port, 8))
        window = time.monotonic() - began
        port.write(b"e\x03abc")
        return IdleWait(ticks, window, read_exactly(port, 3))


@pytest.fixture(scope="module")
def idle_waits(
    request: pytest.FixtureRequest, firmware_builder: FirmwareBuilder
) -> Dict[str, Future[IdleWait]]:
    """The selected boards' idle waits at once: each is mostly 1.5 s of silence, QEMU asleep."""
    return side_by_side(
        request, firmware_builder, "test_idle_wait_keeps_time_and_answers", idle_wait
    )


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_idle_wait_keeps_time_and_answers(board_name, idle_waits):
    """Waiting for input the firmware sleeps (WFI on the console's receive interrupt, interrupts
    masked). Across 1.5 s of silence, two SysTick wraps or more, its tick count stays within
    the host's own window (each wrap counted once), and the byte that ends the silence wakes
    it: it answers."""
    board = load_board(board_name)
    done = idle_waits[board_name].result()
    hz = board.timer.clock_hz
    assert IDLE_SILENCE * hz <= done.ticks <= done.window * hz * 1.01, (done, IDLE_SILENCE)
    assert done.answer == bytes(b ^ 0x5A for b in b"abc")


@requires_arm
@pytest.mark.qemu
def test_idle_wait_leaves_icount_counts_exact(firmware_builder):
    """Under -icount (sleep=on) a firmware that slept between commands still counts the same
    instructions for the same work."""
    board = load_board("qemu-mps2-an385")
    runner, port = start(board, firmware_builder(board), icount=True)
    with runner:
        before = measure(port, 100_000)
        time.sleep(1.0)
        assert measure(port, 100_000) == before


@requires_arm
@pytest.mark.qemu
def test_tick_counter_carries_past_the_24_bit_systick(firmware_builder):
    # 400 M instructions = 20 M ticks at 50 MHz: more than one 2**24-tick SysTick period, so
    # the overflow interrupt must carry into the 64-bit count (about 2 s of wall time).
    board = load_board("qemu-lm3s6965evb")
    runner, port = start(board, firmware_builder(board), icount=True)
    with runner:
        port.timeout = 30
        ticks, _ = measure(port, 200_000_000)
    assert ticks > 1 << 24
    assert ticks == pytest.approx(20_000_000, abs=3)  # + the interrupt's own instructions


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_hard_fault_ends_with_fault_status_and_registers(board_name, firmware_builder):
    board = load_board(board_name)
    runner, port = start(board, firmware_builder(board))
    with runner:
        began = time.monotonic()
        port.write(b"f")  # undefined instruction
        assert runner.wait(TIMEOUT) == EXIT_FAULT
        assert time.monotonic() - began < TIMEOUT
        reason = runner.exit_reason()
        assert reason is not None
        assert reason.startswith(f"firmware fault (status {EXIT_FAULT}): HardFault")
        if isinstance(board.cpu, ArmCpu) and board.cpu.armv6m:
            # ARMv6-M: every fault is a HardFault and no status register says why
            assert "cfsr=0x00000000 hfsr=0x00000000" in reason
            assert re.search(r"pc=0x000[0-3][0-9a-f]{4} ", reason), reason  # in its flash
        else:
            assert "cfsr=0x00010000" in reason  # UsageFault: undefined instruction


def hang_and_kill(board: Board, firmware: Path) -> None:
    runner, port = start(board, firmware)
    try:
        pid = runner.pid
        assert pid is not None
        port.write(b"h")
        assert runner.wait(0.5) is None  # still spinning: nobody ends it but us
        assert runner.stop() is None
        assert runner.exit_reason() == "stopped by the host (killed)"
        assert wait_gone(pid, 0.5)
        assert runner.stop() is None  # idempotent
    finally:
        runner.stop()  # a failed check leaves no QEMU spinning beside the other boards


@pytest.fixture(scope="module")
def hangs(request: pytest.FixtureRequest, firmware_builder: FirmwareBuilder) -> Dict[str, Future]:
    return side_by_side(request, firmware_builder, "test_hanging_firmware_is_killed", hang_and_kill)


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_hanging_firmware_is_killed(board_name, hangs):
    """A firmware spinning forever is still running after half a second and is killed by
    stop() (the boards side by side: see side_by_side)."""
    hangs[board_name].result()


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize(
    "board_name", [name for name in QEMU_BOARDS if load_board(name).family == "mps2"]
)
def test_bus_fault_reports_the_address(board_name, firmware_builder):
    board = load_board(board_name)
    runner, port = start(board, firmware_builder(board))
    with runner:
        port.write(b"b" + struct.pack("<I", 0xF0000000))  # nothing answers there on MPS2
        assert runner.wait(TIMEOUT) == EXIT_FAULT
        assert "bfar=0xf0000000" in (runner.exit_reason() or "")


@requires_arm
@pytest.mark.qemu
def test_abort_ends_with_abort_status(firmware_builder):
    board = load_board("qemu-mps2-an385")
    runner, port = start(board, firmware_builder(board))
    with runner:
        port.write(b"a\x05")
        assert runner.wait(TIMEOUT) == EXIT_ABORT
        assert runner.exit_reason() == f"firmware abort (status {EXIT_ABORT}): code 0x00000005"


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize(
    "board_name, expected",
    [
        # ARMv8-M: MSPLIM turns the overflow into a reported fault (UsageFault STKOF).
        ("qemu-mps2-an505", "cfsr=0x00100000"),
        # ARMv7-M: no stack limit. What follows depends on QEMU's build: older 7.2 packages
        # report a lockup (the fault handler cannot be entered); Debian's 7.2+dfsg-7+deb12u18
        # lets the pushes below RAM land, so a corrupted exception return faults (INVSTATE)
        # and the seam ends the firmware with a non-zero status. Either way it stops.
        ("qemu-mps2-an385", ("CPU lockup", "firmware fault", "exited with status")),
        # ARMv6-M: the pushes below SRAM fault, the HardFault cannot be entered: lockup.
        ("qemu-microbit", "CPU lockup"),
    ],
)
def test_stack_overflow_is_reported(board_name, expected, firmware_builder):
    board = load_board(board_name)
    runner, port = start(board, firmware_builder(board))
    with runner:
        port.write(b"o")
        status = runner.wait(TIMEOUT)
        assert status is not None, "stack overflow not detected within the time-out"
        assert status != 0
        reason = runner.exit_reason() or ""
        assert any(
            word in reason for word in ((expected,) if isinstance(expected, str) else expected)
        ), reason
        if status < 0:
            assert runner.log.rstrip().splitlines()[-1].startswith("[mlf-project] CPU lockup")


@requires_arm
@pytest.mark.qemu
def test_exception_inside_the_with_block_reaps_qemu(firmware_builder):
    board = load_board("qemu-mps2-an385")
    firmware = firmware_builder(board)
    pid = None
    with pytest.raises(RuntimeError, match="boom"), QemuRunner(board, firmware) as runner:
        runner.start(TIMEOUT)
        pid = runner.pid
        raise RuntimeError("boom")
    assert pid is not None and wait_gone(pid, 0.5)


INTERPRETER_EXIT_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {repo!r})
    from project_api.board import load_board
    from project_api.run.qemu import QemuRunner
    runner = QemuRunner(load_board("qemu-mps2-an385"), {firmware!r})
    runner.start(10)
    print(runner.pid, flush=True)
    sys.stdin.readline()       # the test has seen QEMU alive
    if {how!r} == "exit":
        sys.exit(0)            # atexit reaps QEMU
    if {how!r} == "exception":
        raise SystemError("unhandled")
    time.sleep(60)             # the test SIGKILLs us: PR_SET_PDEATHSIG takes QEMU down
    """
)


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize("how", ["exit", "exception", "sigkill"])
def test_interpreter_exit_takes_qemu_down(how, firmware_builder, tmp_path):
    firmware = firmware_builder(load_board("qemu-mps2-an385"))
    script = tmp_path / "child.py"
    script.write_text(
        INTERPRETER_EXIT_SCRIPT.format(repo=str(REPO_ROOT), firmware=str(firmware), how=how)
    )
    child = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        line = child.stdout.readline()
        assert line.strip().isdigit(), child.stderr.read() if child.stderr else line
        qemu_pid = int(line)
        assert process_alive(qemu_pid)
        child.stdin.write(b"go\n")
        child.stdin.flush()
        if how == "sigkill":
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=TIMEOUT)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    assert wait_gone(qemu_pid, 5.0), f"QEMU {qemu_pid} survived the interpreter ({how})"


# --- failure paths that need no cross toolchain ---------------------------------------------


def test_runner_refuses_non_qemu_board():
    with pytest.raises(FlashError, match="does not run under QEMU"):
        QemuRunner(load_board("host"), "fw.elf")


def test_missing_firmware_is_a_flash_error(tmp_path):
    runner = QemuRunner(load_board("qemu-mps2-an385"), tmp_path / "missing.elf")
    with pytest.raises(FlashError, match="does not exist"):
        runner.start(TIMEOUT)
    assert runner.stop() is None


def test_missing_qemu_is_a_flash_error_naming_it(tmp_path):
    firmware = tmp_path / "fw.elf"
    firmware.write_bytes(b"\x7fELF")
    runner = QemuRunner(load_board("qemu-mps2-an385"), firmware)
    runner.command[0] = "qemu-system-arm-not-installed"
    with pytest.raises(FlashError, match="qemu-system-arm-not-installed is not installed"):
        runner.start(TIMEOUT)


def _fake_qemu(tmp_path: Path, shell: str) -> QemuRunner:
    firmware = tmp_path / "fw.elf"
    firmware.write_bytes(b"\x7fELF")
    runner = QemuRunner(load_board("qemu-mps2-an385"), firmware)
    runner.command = ["sh", "-c", shell]
    return runner


def test_qemu_exiting_at_once_closes_the_link_and_says_why(tmp_path):
    runner = _fake_qemu(tmp_path, "echo 'qemu-system-arm: cannot load kernel' >&2; exit 1")
    try:
        runner.start(TIMEOUT)  # the pty is ours: open before QEMU runs, whatever QEMU does
        assert runner.wait(TIMEOUT) == 1
        reason = runner.link_closed_reason()
        assert "exited with status 1" in reason and "cannot load kernel" in reason
    finally:
        runner.stop()


def test_console_is_a_descriptor_qemu_inherits(tmp_path):
    """QEMU opens no pty of its own (a confined QEMU may open nothing for writing): the
    console UART is the master side of ours, handed over with -add-fd."""
    firmware = tmp_path / "fw.elf"
    firmware.write_bytes(b"\x7fELF")
    runner = QemuRunner(load_board("qemu-mps2-an385"), firmware)
    serial = runner.command[runner.command.index("-serial") + 1]
    assert serial == "/dev/fdset/1" and "pty" not in runner.command
    command = with_console_fd(runner.command, 7, 1)
    assert command[:3] == ["qemu-system-arm", "-add-fd", "fd=7,set=1"]
    assert with_console_fd(["sh", "-c", "true"], 7, 1) == ["sh", "-c", "true"]


def test_describe_exit_names_every_outcome():
    assert describe_exit(None) == "still running"
    assert describe_exit(0) == "exited normally (status 0)"
    assert describe_exit(3) == "exited with status 3"
    fault = "mlf: fault: exception=0x00000003 pc=0x00000100\n"
    assert describe_exit(EXIT_FAULT, fault).endswith("HardFault exception=0x00000003 pc=0x00000100")
    irq = "mlf: fault: exception=0x00000020 pc=0x00000100\n"
    assert describe_exit(EXIT_FAULT, irq).endswith("): IRQ exception=0x00000020 pc=0x00000100")
    assert "no report" in describe_exit(EXIT_ABORT, "")
    lockup = "qemu: fatal: Lockup: can't escalate 3 to HardFault\nR00=0\n"
    assert describe_exit(-6, lockup).startswith("CPU lockup")
    assert "SIGKILL" in describe_exit(-9, "")


def test_qemu_command_line():
    board = load_board("qemu-mps2-an386")
    command = board.qemu_command(Path("fw.elf"), icount=True, extra_args=["-d", "guest_errors"])
    assert command[:3] == ["qemu-system-arm", "-machine", "mps2-an386"]
    for flag in ("-nographic", "-monitor", "-serial", "-semihosting-config"):
        assert flag in command
    assert command[command.index("-serial") + 1] == "pty"
    # sleep=on: a firmware asleep in WFI lets virtual time follow the host's instead of
    # jumping to the next timer (which would turn every pause of the host into seconds).
    assert command[command.index("-icount") + 1] == "shift=0,align=off,sleep=on"
    assert command[-4:] == ["-d", "guest_errors", "-kernel", "fw.elf"]
    assert "-icount" not in board.qemu_command(Path("fw.elf"))
