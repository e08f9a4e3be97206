"""The Python face of the pipeline: generate, build, flash, and talk to a firmware.

    project = Project.generate("model.tar", "out/proj", board="host")
    project.build()
    project.flash()
    with project.session() as session:
        outputs = session.run({"input_1": array})

The CLI and the Project API server use this same class.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from .board import Board, load_board
from .errors import FlashError, GenerateError, TransportTimeoutError

PathLike = Union[str, "Path"]
Progress = Callable[[str], None]

# Seconds a runner may take to bring the firmware's link up, per kind of board.
START_TIMEOUTS = {"host": 10.0, "qemu": 30.0, "real": 15.0}


class Project:
    """A generated firmware project directory (it contains ``model.tar``)."""

    dir: Path
    options: Dict[str, Any]

    def __init__(self, project_dir: Path, info: Dict[str, Any]) -> None:
        self.dir = Path(project_dir)
        self.info = info
        self.options = dict(info.get("options") or {})
        self.board: Board = load_board(str(info["board"]))
        self.project_type: str = str(info["project_type"])
        self.last_build: Any = None
        self.temporary = False  # a scratch project its creator deletes after use
        # How this run reaches the firmware, beyond the project's options (a labgrid place):
        # never written to project.json.
        self.run_overrides: Dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Project({str(self.dir)!r}, board={self.board.name!r}, {self.project_type})"

    # --- life cycle -----------------------------------------------------------------------

    @classmethod
    def generate(
        cls,
        archive: PathLike,
        project_dir: PathLike,
        *,
        board: str = "host",
        project_type: str = "host_driven",
        model: Optional[str] = None,
        options: Optional[Mapping[str, Any]] = None,
        progress: Optional[Progress] = None,
        force: bool = False,
    ) -> Project:
        """Renders the template for one model (or, with ``model="*"``, all models) of
        ``archive`` on ``board`` into ``project_dir``. Options use the Project API option
        names (``compile_definitions``, ``cmsis_path``, ``workspace_size_bytes``, ...).
        ``force`` replaces a project generated there before.

        The models of one firmware share one arena (the largest model's): one inference
        runs at a time, and a model's inputs and outputs hold until another model sets an
        input or runs (:meth:`Session.run` sets, runs and reads in one go; a RUN or
        GET_OUTPUT of a model whose tensors another overwrote is refused)."""
        from .generate import generate_project

        generate_project(
            archive,
            project_dir,
            board=board,
            project_type=project_type,
            model=model,
            options=options,
            progress=progress,
            force=force,
        )
        return cls.open(project_dir)

    @classmethod
    def open(cls, project_dir: PathLike) -> Project:
        """An existing generated project."""
        from .generate import MODEL_TAR, read_project_info

        # Absolute from here on: build paths are joined onto it and handed to CMake, whose
        # working directory is not ours.
        path = Path(project_dir).resolve()
        if not (path / MODEL_TAR).is_file():
            raise GenerateError(
                f"{path} is not a generated project (no {MODEL_TAR})",
                hint="generate one with `mlf-project generate ARCHIVE DIR --board BOARD`",
            )
        return cls(path, read_project_info(path))

    # --- where things are ---------------------------------------------------------------------

    @property
    def build_dir(self) -> Path:
        build_dir = Path(str(self.options.get("build_dir") or "build"))
        return build_dir if build_dir.is_absolute() else self.dir / build_dir

    @property
    def firmware(self) -> Path:
        """Where the build puts the firmware (it may not exist yet)."""
        return self.build_dir / str(self.info.get("firmware", "firmware"))

    @property
    def models(self) -> list:
        """The models of the firmware as project.json describes them."""
        return list(self.info.get("models", []))

    @property
    def sandbox_option(self) -> Optional[bool]:
        """Whether builds and runs are confined: the ``sandbox`` option given to this run or
        the Project API call (False opts out); None follows ``$MLF_PROJECT_SANDBOX``."""
        value = self.run_overrides.get("sandbox", self.options.get("sandbox"))
        return None if value is None else bool(value)

    # --- build / flash ----------------------------------------------------------------------

    def build(self, *, progress: Optional[Progress] = None) -> Path:
        """Configures and builds with CMake; returns the firmware file."""
        from .build import build

        result = build(
            self.dir,
            self.build_dir,
            firmware_name=str(self.info.get("firmware", "firmware")),
            progress=progress,
            verbose=bool(self.options.get("verbose")),
            cmake=self.options.get("cmake"),
            board_name=self.board.name,
            compilers=[self.board.architecture.compiler],
            sandbox_option=self.sandbox_option,
        )
        self.last_build = result
        return result.firmware

    def flash(self) -> None:
        """Loads the firmware onto its target (a no-op for host and QEMU boards, which only
        check that it was built)."""
        from .run import flash_firmware

        flash_firmware(self.board, self.firmware, self.options)

    def runner(self) -> Any:
        """A :class:`project_api.run.base.Runner` for the built firmware on this project's
        board (host process, QEMU machine or real board); not started yet."""
        from .run import make_runner

        return make_runner(
            self.board,
            self.firmware,
            {**self.options, **self.run_overrides, "sandbox": self.sandbox_option},
        )

    def start_timeout(self) -> float:
        configured = self.options.get("timeout_sec")
        if configured:
            return float(configured)
        kind = "host" if self.board.is_host else "qemu" if self.board.is_qemu else "real"
        timeout = START_TIMEOUTS[kind]
        if self.board.is_qemu and self.options.get("qemu_icount"):
            timeout *= 2
        return timeout

    # --- talking to the firmware ---------------------------------------------------------------

    def session(self, *, timeout: float = 10.0, run_timeout: Optional[float] = None) -> Any:
        """Starts the firmware and returns a connected transport session (context manager;
        closing it stops the firmware and reaps its processes). ``timeout`` bounds every
        request, ``run_timeout`` (default: ``timeout``) a RUN."""
        from .transport.session import Session

        self._require_type("host_driven", "it answers no device-protocol requests")
        if self.options.get("device_protocol") == "microtvm":
            raise FlashError(
                f"{self.dir} speaks TVM's microTVM RPC (device_protocol=microtvm), not our "
                "device protocol",
                hint="open it with tvm.micro.Session through its microtvm_api_server.py, or "
                "generate with -o device_protocol=mlf",
            )
        connect_timeout = max(timeout, self.start_timeout()) if not self.board.is_host else timeout
        runner, link = self.start_firmware(write_timeout=max(connect_timeout, 1.0))
        session = None
        try:
            session = Session(
                link,
                timeout=connect_timeout,
                run_timeout=run_timeout,
                runner=runner,
            )
            session.operator_names = {
                index: {int(node): name for node, name in model.get("operators", {}).items()}
                for index, model in enumerate(self.models)
            }
            session.connect()
            session.timeout = float(timeout)
            factor = getattr(runner, "ticks_to_instructions", None)
            if callable(factor):
                session.ticks_to_instructions = factor(session.info.tick_hz)
            return session
        except BaseException:
            if session is not None:
                session.close()
            runner.stop()
            raise

    def start_firmware(self, *, write_timeout: float = 10.0) -> Tuple[Any, Any]:
        """Starts the built firmware (host process, QEMU machine or flashed board) and
        returns ``(runner, link)``: the :class:`project_api.run.base.Runner` (stop it when
        done) and a :class:`project_api.transport.link.Link` over its console, whose errors
        say why the firmware went away when the runner knows."""
        from .transport.link import Link

        runner = self.runner()
        try:
            port = runner.start(self.start_timeout())
            explain = getattr(runner, "link_closed_reason", None)
            # The runner knows best why its link died (QEMU: the fault and its registers).
            link = Link(
                port, write_timeout=write_timeout, on_closed=explain if callable(explain) else None
            )
            return runner, link
        except BaseException:
            runner.stop()
            raise

    def benchmark(self, *, timeout: float = 10.0) -> Any:
        """Starts an ``mlperftiny`` firmware and returns a connected
        :class:`project_api.transport.eembc.EembcDevice` (a context manager: closing it stops
        the firmware). ``timeout`` bounds every command but ``infer``'s runs; under QEMU with
        icount ``device.ticks_to_instructions`` turns its tick counts into instructions."""
        from .transport.eembc import EembcDevice

        self._require_type("mlperftiny", "it speaks no benchmark protocol")
        connect_timeout = max(timeout, self.start_timeout())
        runner, link = self.start_firmware(write_timeout=max(connect_timeout, 1.0))
        try:
            device = EembcDevice(link, timeout=timeout, runner=runner)
            device.connect(connect_timeout)
            if device.enable_ticks() is not None:
                factor = getattr(runner, "ticks_to_instructions", None)
                device.ticks_to_instructions = factor(device.tick_hz) if callable(factor) else None
            return device
        except BaseException:
            runner.stop()
            raise

    def _require_type(self, wanted: str, problem: str) -> None:
        """FlashError unless the project is of type ``wanted``, saying what drives it."""
        if self.project_type == wanted:
            return
        from .generate.project_types import project_type_for

        raise FlashError(
            f"{self.dir} is a {self.project_type} project, {problem}",
            hint=f"drive it with {project_type_for(self.project_type).driven_by}, or generate "
            f"with project_type={wanted}",
        )

    def run_standalone(self, *, timeout: float = 60.0) -> Any:
        """Runs a ``standalone`` firmware to its end and returns a :class:`StandaloneResult`
        (its parsed report, exit status and log). TransportTimeoutError when it does not end
        within ``timeout``; the process is reaped either way."""
        from .transport.standalone import parse_standalone

        self._require_type("standalone", "not standalone")
        if not self.firmware.is_file():
            raise FlashError(
                f"no firmware at {self.firmware}",
                hint="build the project first (mlf-project build PROJECT_DIR)",
            )
        if self.board.is_real:
            text, status, log = self._standalone_on_port(timeout)
        else:
            text, status, log = self._standalone_process(timeout)
        return StandaloneResult(parse_standalone(text), status, log, text)

    def _standalone_process(self, timeout: float) -> Tuple[str, Optional[int], str]:
        """Host and QEMU: the console goes to a pipe (host) or a file QEMU writes through a
        descriptor it inherits, not a pty (a pty may drop what the firmware wrote just
        before it exited); the process is confined as for a session."""
        import subprocess
        import tempfile

        from .run.base import COPY_LIMIT, reap, spawn
        from .run.qemu import fd_serial, with_console_fd
        from .sandbox import policies, prepare

        firmware = self.firmware.resolve()
        with tempfile.TemporaryDirectory(prefix="mlf-standalone-") as scratch:
            console = Path(scratch) / "console.txt"
            console_fd = os.open(console, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            read_end: Optional[int] = None
            write_end: Optional[int] = None
            try:
                if self.board.is_host:
                    argv = [str(firmware)]
                    confine = prepare(lambda: policies.host_firmware(firmware), self.sandbox_option)
                    stdout: Any = console_fd
                    env: Optional[Dict[str, str]] = None
                    if confine is not None:
                        # A confined firmware may not grow a file: it writes into a pipe.
                        read_end, write_end = os.pipe()
                        stdout, env = write_end, {}
                else:
                    argv = with_console_fd(
                        self.board.qemu_command(
                            firmware,
                            icount=bool(self.options.get("qemu_icount")),
                            serial=fd_serial(2, "file"),
                        ),
                        console_fd,
                        2,
                    )
                    confine = prepare(lambda: policies.qemu(argv[0], firmware), self.sandbox_option)
                    stdout, env = subprocess.DEVNULL, None
                proc = spawn(
                    argv,
                    stdout=stdout,
                    stderr=subprocess.PIPE,
                    env=env,
                    pass_fds=(console_fd,),
                    confine=confine,
                )
            except BaseException:
                if read_end is not None:
                    os.close(read_end)
                raise
            finally:
                os.close(console_fd)
                if write_end is not None:
                    os.close(write_end)
            try:
                text, err = _collect(proc, read_end, timeout)
            except subprocess.TimeoutExpired:
                raise TransportTimeoutError(
                    f"the standalone firmware did not finish within {timeout:g} s",
                    hint="a larger timeout helps slow boards",
                ) from None
            finally:
                reap(proc)
            if read_end is None:
                with open(console, "rb") as handle:
                    text = handle.read(COPY_LIMIT)
            return text.decode("utf-8", "replace"), proc.returncode, err

    def _standalone_on_port(self, timeout: float) -> Tuple[str, Optional[int], str]:
        from .run.base import COPY_LIMIT

        runner = self.runner()
        chunks: List[bytes] = []
        size = 0
        try:
            port = runner.start(self.start_timeout())
            deadline = time.monotonic() + timeout
            while size < COPY_LIMIT and not _finished(chunks):
                if time.monotonic() > deadline:
                    raise TransportTimeoutError(
                        f"the standalone firmware did not finish within {timeout:g} s"
                    )
                data = port.read(4096)
                if data:
                    chunks.append(bytes(data))
                    size += len(data)
        finally:
            runner.stop()
        return b"".join(chunks).decode("utf-8", "replace"), None, runner.log


def _collect(proc: Any, console: Optional[int], timeout: float) -> Tuple[bytes, str]:
    """What a standalone firmware printed on ``console`` (a pipe we read, which we close;
    None: it wrote elsewhere) and on stderr, once it has ended within ``timeout``."""
    import io
    import subprocess

    from .run.base import copy_in_background
    from .run.host import LOG_LIMIT

    printed, errors = io.BytesIO(), io.BytesIO()
    readers = []
    if console is not None:
        readers.append(copy_in_background(console, printed, "mlf-standalone"))
    if proc.stderr is not None:  # bounded, as the console: the firmware decides its length
        stderr = os.dup(proc.stderr.fileno())
        proc.stderr.close()
        readers.append(copy_in_background(stderr, errors, "mlf-standalone-err", LOG_LIMIT))
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # so that the console pipe ends
        raise
    finally:
        for reader in readers:
            reader.join(timeout=2.0)
    return printed.getvalue(), errors.getvalue().decode("utf-8", "replace")


class StandaloneResult:
    """What a standalone run produced: ``report`` (parsed console records), the firmware's
    ``exit_status`` (None when unknown, e.g. a real board), its ``log`` (stderr/semihosting)
    and the raw console ``text``."""

    def __init__(self, report: Any, exit_status: Optional[int], log: str, text: str) -> None:
        self.report = report
        self.exit_status = exit_status
        self.log = log
        self.text = text

    def __getattr__(self, name: str) -> Any:
        return getattr(self.report, name)


def _finished(chunks: List[bytes]) -> bool:
    text = b"".join(chunks)
    index = text.rfind(b"result ")
    return index >= 0 and (index == 0 or text[index - 1 : index] == b"\n") and text.endswith(b"\n")
