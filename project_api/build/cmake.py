"""Configure and build a generated project with CMake.

The cmake used is, in order: the ``cmake`` option / ``$MLF_CMAKE``; a system cmake >= 3.20
(``/usr/bin``, ``/usr/local/bin``, then PATH); the cmake of the PyPI ``cmake`` package (its
binary directly, not the Python wrapper). Ninja is used when it is installed (parallel
builds), else Makefiles with ``-j``. Output is quiet: progress lines go to a callback
(``configuring``, ``compiling 3/12``, ``linking``). The whole output of the last configure and
build is written to ``<build dir>/build.log`` (:data:`LOG_NAME`) and kept in
:class:`BuildError`'s ``log`` on failure; the message gives the lines that say why (see
:mod:`.summary`) and the hint names the log file. A linker's ``region ... overflowed`` becomes
a FitError. The runtime library comes from :mod:`.runtime_cache` when an earlier project
built the same one.

What the build wrote is the confined child's: the parent reads and writes in the build
directory through :mod:`project_api.sandbox.outputs` (no link followed, sizes bounded), takes
from the log only text to show and the linker's numbers, and no path from anything the
build printed (docs/security.md, "What the parent takes from its children").

CMake and everything it starts run confined (:func:`project_api.sandbox.policies.build`):
they read what the tools say they use (never ``/`` or your home directory), the project and
the runtime cache, and write only the build directory (``TMPDIR`` is ``<build dir>/tmp``),
so a model's ``#include "/abs/path"`` or ``.incbin`` cannot pull a file of the user's into
the firmware or the log; they get only the environment variables of
:func:`project_api.sandbox.policies.build_environment`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Mapping, Optional, Sequence

from ..errors import BuildError, FitError
from ..generate.sizes import linker_overflow
from ..sandbox import Confinement, Prepared, outputs, policies, prepare
from . import runtime_cache
from .log import MAX_LINE_BYTES, BoundedLog, parse_memory_usage
from .summary import summarise
from .tools import CMakeTool, find_cmake, find_ninja

Progress = Callable[[str], None]

CONFIGURE_TIMEOUT = 300.0
BUILD_TIMEOUT = 1800.0
LOG_NAME = "build.log"
# In the build directory: a digest of the project's CMakeLists.txt when it was configured.
CONFIGURED_NAME = "mlf-configured-from.sha256"
# What the parent reads of a file the build wrote in its directory, at most.
MAX_CACHE_FILE_BYTES = 16 << 20
_NINJA_STEP = re.compile(r"^\[(\d{1,9})/(\d{1,9})\]\s+(.*)$")
_MAKE_STEP = re.compile(r"^\[\s*(\d{1,3})%\]\s+(.*)$")


@dataclass
class BuildResult:
    firmware: Path
    seconds: float
    configure_seconds: float
    log: str
    memory: Optional[dict] = None  # linker's --print-memory-usage: {"FLASH": {"used", "size"}}


def _jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class _Runner:
    """Runs one command, streaming its output to a progress parser; kills it on time-out."""

    def __init__(
        self,
        progress: Optional[Progress],
        verbose: bool,
        confine: Optional[Callable[[], Optional[Prepared]]] = None,
        tmpdir: Optional[Path] = None,
    ) -> None:
        self.progress = progress
        self.verbose = verbose
        self.confine = confine
        self.tmpdir = tmpdir
        self.log = BoundedLog()
        self.last_step = ""

    def run(self, argv: Sequence[str], cwd: Path, timeout: float, stage: str) -> int:
        self.log.append(f"$ {' '.join(argv)}\n")
        if self.tmpdir is not None:
            self.tmpdir.mkdir(parents=True, exist_ok=True)
        prepared = self.confine() if self.confine is not None else None
        # Confined, the build gets only the variables of policies.build_environment (no
        # SSH_AUTH_SOCK, D-Bus or Docker address, token...); opted out, all of ours.
        env = policies.build_environment() if prepared is not None else dict(os.environ)
        env.setdefault("CLICOLOR", "0")
        env["NINJA_STATUS"] = "[%f/%t] "
        if self.tmpdir is not None:
            env["TMPDIR"] = str(self.tmpdir)
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=str(cwd),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=prepared.apply if prepared is not None else None,
            )
        except (OSError, subprocess.SubprocessError) as err:
            raise BuildError(f"{stage}: cannot run {argv[0]}: {err}") from err
        finally:
            if prepared is not None:
                prepared.close()
        timed_out = threading.Event()

        def expire() -> None:
            timed_out.set()
            _kill(proc)

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            assert proc.stdout is not None
            stream = proc.stdout
            for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
                line = raw.decode("utf-8", "replace")
                self.log.append(line)
                self._progress(line.rstrip("\n"))
            status = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                _kill(proc)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if timed_out.is_set():
            raise BuildError(f"{stage} did not finish within {timeout:g} s (killed)", log=self.text)
        return status

    def _say(self, message: str) -> None:
        if self.progress is not None and message != self.last_step:
            self.last_step = message
            self.progress(message)

    def _progress(self, line: str) -> None:
        if self.verbose and self.progress is not None:
            self.progress(line)
            return
        match = _NINJA_STEP.match(line)
        if match:
            done, total, what = int(match.group(1)), int(match.group(2)), match.group(3)
            if what.startswith("Linking"):
                self._say("linking")
            else:
                self._say(f"compiling {done}/{total}")
            return
        match = _MAKE_STEP.match(line)
        if match:
            what = match.group(2)
            if what.startswith("Linking"):
                self._say("linking")
            elif what.startswith("Building"):
                self._say(f"compiling {match.group(1)}%")

    @property
    def text(self) -> str:
        """The output kept (:class:`.log.BoundedLog`)."""
        return self.log.text


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def _lists_digest(project_dir: Path) -> str:
    """A digest of the project's CMake files (its CMakeLists.txt and the runtime's settings,
    which hold the board's CPU flags)."""
    digest = hashlib.sha256()
    try:
        digest.update((project_dir / "CMakeLists.txt").read_bytes())
    except OSError:
        return ""
    with contextlib.suppress(OSError):
        digest.update((project_dir / "runtime" / "mlf_runtime_build.cmake").read_bytes())
    return digest.hexdigest()


def _read_build_file(build_dir: Path, name: str) -> Optional[str]:
    """A file the build wrote in ``build_dir`` (no link followed, bounded); None when there
    is no such regular file."""
    try:
        data = outputs.read_regular(build_dir, [name], MAX_CACHE_FILE_BYTES)
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", "replace")


def _configured_for_another_generation(project_dir: Path, build_dir: Path) -> bool:
    """A build directory outside the project (option build_dir) outlives regenerating the
    project in place: its cache keeps the CPU flags, toolchain and options of the board it was
    configured for, and its objects the old board seam's. Another CMakeLists.txt than the one
    it was configured from means another generation: start over."""
    if _resolved(build_dir).is_relative_to(project_dir):
        return False  # regenerating replaced it with the rest of the project
    recorded = _read_build_file(build_dir, CONFIGURED_NAME)
    if recorded is None:
        return False  # configured by hand or by an older version: left as it is
    return recorded.strip() != _lists_digest(project_dir)


def _cache_value(build_dir: Path, prefix: str) -> Optional[str]:
    """A value of the build's CMakeCache.txt: only compared with what the parent expects
    (a different one starts the build directory over), never used as a path."""
    text = _read_build_file(build_dir, "CMakeCache.txt")
    for line in (text or "").splitlines():
        if line.startswith(prefix):
            return line.split("=", 1)[1] if "=" in line else ""
    return None


def _cache_source_dir(build_dir: Path) -> Optional[Path]:
    found = _cache_value(build_dir, "CMAKE_HOME_DIRECTORY:")
    return Path(found) if found is not None else None


def _cache_generator(build_dir: Path) -> Optional[str]:
    return _cache_value(build_dir, "CMAKE_GENERATOR:")


def build(
    project_dir: Path,
    build_dir: Path,
    *,
    firmware_name: str,
    progress: Optional[Progress] = None,
    verbose: bool = False,
    cmake: Optional[str] = None,
    board_name: str = "",
    cache_entries: Optional[Mapping[str, str]] = None,
    compilers: Sequence[str] = (),
    sandbox_option: Optional[bool] = None,
) -> BuildResult:
    """Configures (when needed) and builds; returns the firmware path and the log.
    ``cache_entries`` are ``-D`` settings for the first configure (e.g. ``MLF_LTO=OFF``).
    The whole output goes to ``<build_dir>/build.log``, which a BuildError's hint names.
    ``compilers`` (program names or paths, chosen by the user or the board: they are asked
    unconfined what they read) join cmake and ninja in the confined build's read scope
    (with none and no ``$CC``, CMake's first choice, ``cc``); ``sandbox_option`` False
    builds unconfined (see :func:`project_api.sandbox.enabled`)."""
    project_dir = Path(project_dir).resolve()
    build_dir = Path(build_dir)
    if not build_dir.is_absolute():
        build_dir = project_dir / build_dir
    tool = find_cmake(cmake)
    build_dir = _resolved(build_dir)
    _refuse_holding_the_project(project_dir, build_dir)
    chosen = [*compilers, *_compilers_from_environment()]
    tools = [tool.path, find_ninja() or "make", *(chosen or ["cc"])]
    # Made only when the build is confined: the tools are asked what they read then.
    runner = _Runner(
        progress,
        verbose,
        lambda: prepare(lambda: build_confinement(tools, project_dir, build_dir), sandbox_option),
        build_dir / "tmp",
    )
    try:
        result = _build(runner, tool, project_dir, build_dir, firmware_name, board_name,
                        cache_entries, compilers)  # fmt: skip
    except BuildError as err:
        saved = _save_log(build_dir, runner.text)
        if saved is not None and err.hint is None:
            err.hint = f"full log: {saved}"
        raise
    except FitError:
        _save_log(build_dir, runner.text)
        raise
    _save_log(build_dir, result.log)
    if progress:
        progress(f"built {result.firmware}")
    return result


def _refuse_holding_the_project(project_dir: Path, build_dir: Path) -> None:
    """The confined build writes its whole directory: one that holds the project could
    rewrite what the parent reads back (project.json, the runtime cache key's inputs)."""
    if project_dir.is_relative_to(build_dir):
        raise BuildError(
            f"the build directory {build_dir} holds the project {project_dir}: the build "
            "writes its whole directory, and the project's files must stay the generator's",
            hint="build in a directory inside the project (option build_dir, default build)",
        )


def _build(
    runner: _Runner,
    tool: CMakeTool,
    project_dir: Path,
    build_dir: Path,
    firmware_name: str,
    board_name: str,
    cache_entries: Optional[Mapping[str, str]],
    compilers: Sequence[str] = (),
) -> BuildResult:
    progress = runner.progress
    ninja = find_ninja()
    generator = "Ninja" if ninja else "Unix Makefiles"
    # A build directory from another place (the project was moved) or generator: start over.
    old_source = _cache_source_dir(build_dir)
    if old_source is not None and (
        _resolved(old_source) != project_dir
        or _cache_generator(build_dir) != generator
        or _configured_for_another_generation(project_dir, build_dir)
    ):
        shutil.rmtree(build_dir, ignore_errors=True)
    started = time.monotonic()
    configure_seconds = 0.0
    given = dict(cache_entries or {})
    slot = runtime_cache.slot_for(project_dir, build_dir, given, compilers)
    if not (build_dir / "CMakeCache.txt").is_file():
        build_dir.mkdir(parents=True, exist_ok=True)
        if progress:
            progress("configuring")
        argv = [tool.path, "-S", str(project_dir), "-B", str(build_dir), "-G", generator]
        if ninja:
            argv.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
        entries = {**runtime_cache.configure_entries(slot), **given}
        argv += [f"-D{key}={value}" for key, value in entries.items()]
        status = runner.run(argv, project_dir, CONFIGURE_TIMEOUT, "configure")
        configure_seconds = time.monotonic() - started
        if status == 0:
            with contextlib.suppress(OSError):
                content = (_lists_digest(project_dir) + "\n").encode()
                outputs.write_file(build_dir, [CONFIGURED_NAME], content)
            if runtime_cache.hit(slot) and progress and slot is not None:
                progress(f"runtime library from the cache ({slot.key[:12]})")
        else:
            log = runner.text
            _remove(build_dir / "CMakeCache.txt")
            raise BuildError(
                f"configuring {project_dir} with {tool} failed (status {status}):\n"
                + summarise(log, project_dir),
                log=log,
            )
    argv = [tool.path, "--build", str(build_dir)]
    if not ninja:
        argv += ["--", f"-j{_jobs()}"]
    runtime_cache.before_build(slot)
    status = runner.run(argv, project_dir, BUILD_TIMEOUT, "build")
    log = runner.text
    if status != 0:
        overflow = linker_overflow(log)
        if overflow is not None:
            raise FitError(
                f"the firmware does not fit board {board_name or '?'}: the linker says {overflow}",
                hint="choose a board with more memory, or a smaller model",
            )
        raise BuildError(
            f"building {project_dir} failed (status {status}):\n" + summarise(log, project_dir),
            log=log,
        )
    runtime_cache.store(slot, project_dir)
    firmware = build_dir / firmware_name
    if not firmware.is_file():
        raise BuildError(f"the build succeeded but {firmware} is missing", log=log)
    return BuildResult(
        firmware=firmware,
        seconds=time.monotonic() - started,
        configure_seconds=configure_seconds,
        log=log,
        memory=parse_memory_usage(log),
    )


def build_confinement(tools: Sequence[str], project_dir: Path, build_dir: Path) -> Confinement:
    """What a confined build of ``project_dir`` may touch (:func:`policies.build`): what
    ``tools`` say they read and run (``project_api.sandbox.toolchain``), the project and the
    runtime cache to read, ``build_dir`` to write. SandboxError when a tool needs a place
    that may not be granted (``/``, your home directory)."""
    read = [project_dir]
    cache = runtime_cache.cache_dir()
    if cache is not None:
        read.append(cache)
    return policies.build(tools, read, [build_dir])


def _compilers_from_environment() -> List[str]:
    """Compilers the user chose for CMake through the environment (``CC=/opt/x/bin/gcc``)."""
    found = []
    for name in ("CC", "CXX", "ASM"):
        value = os.environ.get(name, "").split()
        if value:
            found.append(value[0])
    return found


def _save_log(build_dir: Path, log: str) -> Optional[Path]:
    """Writes the whole output to ``<build_dir>/build.log``; None when it cannot."""
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        outputs.write_file(build_dir, [LOG_NAME], log.encode("utf-8", "replace"))
    except OSError:
        return None
    return build_dir / LOG_NAME


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
