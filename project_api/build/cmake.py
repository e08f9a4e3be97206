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

CMake and everything it starts run confined (:func:`project_api.sandbox.policies.build`):
they read the toolchains, the project and the runtime cache, and write only the build
directory (``TMPDIR`` is ``<build dir>/tmp``), so a model's ``#include "/abs/path"`` or
``.incbin`` cannot pull a file of the user's into the firmware or the log.
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
from functools import lru_cache
from pathlib import Path
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from ..errors import BuildError, FitError
from ..generate.sizes import linker_overflow
from ..sandbox import Confinement, Prepared, policies, prepare
from . import runtime_cache
from .summary import summarise

Progress = Callable[[str], None]

MIN_CMAKE = (3, 20)
CMAKE_ENV = "MLF_CMAKE"
CONFIGURE_TIMEOUT = 300.0
BUILD_TIMEOUT = 1800.0
LOG_NAME = "build.log"
# In the build directory: a digest of the project's CMakeLists.txt when it was configured.
CONFIGURED_NAME = "mlf-configured-from.sha256"
_VERSION_RE = re.compile(r"cmake version (\d+)\.(\d+)(?:\.(\d+))?")
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")
_MAKE_STEP = re.compile(r"^\[\s*(\d+)%\]\s+(.*)$")
# One line of the table (blanks, never a line break: a run of empty lines went quadratic).
_MEMORY_RE = re.compile(
    r"^[ \t]*(\w+):[ \t]+(\d+)[ \t]*([KMG]?B)[ \t]+(\d+)[ \t]*([KMG]?B)[ \t]+([\d.]+)%", re.M
)
_UNITS = {"B": 1, "KB": 1024, "MB": 1024 * 1024, "GB": 1024**3}


@dataclass(frozen=True)
class CMakeTool:
    path: str
    version: Tuple[int, int, int]

    def __str__(self) -> str:
        return f"{self.path} ({'.'.join(map(str, self.version))})"


@dataclass
class BuildResult:
    firmware: Path
    seconds: float
    configure_seconds: float
    log: str
    memory: Optional[dict] = None  # linker's --print-memory-usage: {"FLASH": {"used", "size"}}


def _version_of(path: str) -> Optional[Tuple[int, int, int]]:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_RE.search(out)
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def _is_python_wrapper(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(128)
    except OSError:
        return False
    return head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]


def _pypi_cmake() -> Optional[str]:
    try:
        import cmake  # the PyPI wheel

        bin_dir = getattr(cmake, "CMAKE_BIN_DIR", None)
    except ImportError:
        return None
    if bin_dir:
        candidate = Path(bin_dir) / "cmake"
        if candidate.is_file():
            return str(candidate)
    return None


@lru_cache(maxsize=8)
def find_cmake(preferred: Optional[str] = None) -> CMakeTool:
    """The cmake to use (see the module docstring); BuildError when none is usable."""
    candidates: List[str] = []
    chosen = preferred or os.environ.get(CMAKE_ENV)
    if chosen:
        found = shutil.which(chosen) or chosen
        version = _version_of(found)
        if version is None:
            raise BuildError(f"cmake {chosen!r} does not run (cmake option or ${CMAKE_ENV})")
        return CMakeTool(found, version)
    for system in ("/usr/bin/cmake", "/usr/local/bin/cmake"):
        if os.access(system, os.X_OK):
            candidates.append(system)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(directory, "cmake")
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            candidates.append(path)
    pypi = _pypi_cmake()
    if pypi:
        candidates.append(pypi)
    seen = set()
    too_old = []
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if real in seen:
            continue
        seen.add(real)
        if _is_python_wrapper(real):
            continue  # the PyPI wrapper script: its binary is in the candidates already
        version = _version_of(candidate)
        if version is None:
            continue
        if version[:2] >= MIN_CMAKE:
            return CMakeTool(candidate, version)
        too_old.append(f"{candidate} {'.'.join(map(str, version))}")
    raise BuildError(
        "no usable cmake >= 3.20 found" + (f" (too old: {', '.join(too_old)})" if too_old else ""),
        hint="pip install cmake, or install CMake 3.20+ from your distribution",
    )


@lru_cache(maxsize=1)
def find_ninja() -> Optional[str]:
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # PyPI wheel, when present

        bin_dir = getattr(ninja, "BIN_DIR", None)
        if bin_dir and (Path(bin_dir) / "ninja").is_file():
            return str(Path(bin_dir) / "ninja")
    except ImportError:
        pass
    return None


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
        self.log: List[str] = []
        self.last_step = ""

    def run(self, argv: Sequence[str], cwd: Path, timeout: float, stage: str) -> int:
        self.log.append(f"$ {' '.join(argv)}\n")
        env = dict(os.environ)
        env.setdefault("CLICOLOR", "0")
        env["NINJA_STATUS"] = "[%f/%t] "
        if self.tmpdir is not None:
            self.tmpdir.mkdir(parents=True, exist_ok=True)
            env["TMPDIR"] = str(self.tmpdir)
        prepared = self.confine() if self.confine is not None else None
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
            for raw in iter(proc.stdout.readline, b""):
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
        return "".join(self.log)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def _lists_digest(project_dir: Path) -> str:
    try:
        return hashlib.sha256((project_dir / "CMakeLists.txt").read_bytes()).hexdigest()
    except OSError:
        return ""


def _configured_for_another_generation(project_dir: Path, build_dir: Path) -> bool:
    """A build directory outside the project (option build_dir) outlives regenerating the
    project in place: its cache keeps the CPU flags, toolchain and options of the board it was
    configured for, and its objects the old board seam's. Another CMakeLists.txt than the one
    it was configured from means another generation: start over."""
    if _resolved(build_dir).is_relative_to(project_dir):
        return False  # regenerating replaced it with the rest of the project
    try:
        recorded = (build_dir / CONFIGURED_NAME).read_text().strip()
    except OSError:
        return False  # configured by hand or by an older version: left as it is
    return recorded != _lists_digest(project_dir)


def _cache_source_dir(build_dir: Path) -> Optional[Path]:
    cache = build_dir / "CMakeCache.txt"
    try:
        for line in cache.read_text(errors="replace").splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                return Path(line.split("=", 1)[1])
    except OSError:
        return None
    return None


def _cache_generator(build_dir: Path) -> Optional[str]:
    try:
        for line in (build_dir / "CMakeCache.txt").read_text(errors="replace").splitlines():
            if line.startswith("CMAKE_GENERATOR:"):
                return line.split("=", 1)[1]
    except OSError:
        return None
    return None


def parse_memory_usage(log: str) -> Optional[dict]:
    """The linker's ``--print-memory-usage`` table: region -> used/size bytes."""
    found = {}
    for match in _MEMORY_RE.finditer(log):
        region = match.group(1)
        used = int(match.group(2)) * _UNITS.get(match.group(3), 1)
        size = int(match.group(4)) * _UNITS.get(match.group(5), 1)
        found[region] = {"used": used, "size": size}
    return found or None


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
    ``compilers`` (program names or paths) join cmake and ninja in the confined build's
    toolchain prefixes; ``sandbox_option`` False builds unconfined (see
    :func:`project_api.sandbox.enabled`)."""
    project_dir = Path(project_dir).resolve()
    build_dir = Path(build_dir)
    if not build_dir.is_absolute():
        build_dir = project_dir / build_dir
    tool = find_cmake(cmake)
    build_dir = _resolved(build_dir)
    tools = [tool.path, find_ninja() or "make", *compilers, *_compilers_from_environment()]
    confinement = build_confinement(tools, project_dir, build_dir)
    runner = _Runner(
        progress,
        verbose,
        lambda: prepare(lambda: confinement, sandbox_option),
        build_dir / "tmp",
    )
    try:
        result = _build(runner, tool, project_dir, build_dir, firmware_name, board_name,
                        cache_entries)  # fmt: skip
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


def _build(
    runner: _Runner,
    tool: CMakeTool,
    project_dir: Path,
    build_dir: Path,
    firmware_name: str,
    board_name: str,
    cache_entries: Optional[Mapping[str, str]],
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
    if not (build_dir / "CMakeCache.txt").is_file():
        build_dir.mkdir(parents=True, exist_ok=True)
        if progress:
            progress("configuring")
        argv = [tool.path, "-S", str(project_dir), "-B", str(build_dir), "-G", generator]
        if ninja:
            argv.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
        entries = {**runtime_cache.configure_entries(project_dir), **(cache_entries or {})}
        argv += [f"-D{key}={value}" for key, value in entries.items()]
        status = runner.run(argv, project_dir, CONFIGURE_TIMEOUT, "configure")
        configure_seconds = time.monotonic() - started
        if status == 0:
            (build_dir / CONFIGURED_NAME).write_text(_lists_digest(project_dir) + "\n")
            cached = runtime_cache.cached_library(runner.text)
            if cached is not None:
                runtime_cache.note_use(cached)
                if progress:
                    progress(f"runtime library from the cache ({cached.parent.name[:12]})")
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
    runtime_cache.after_build(log, project_dir)
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


def build_confinement(
    tools: Sequence[str], project_dir: Path, build_dir: Path
) -> Confinement:
    """What a confined build of ``project_dir`` may touch (:func:`policies.build`): the
    toolchains of ``tools``, the project and the runtime cache to read, ``build_dir`` to
    write."""
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
    path = build_dir / LOG_NAME
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(log, encoding="utf-8")
    except OSError:
        return None
    return path


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
