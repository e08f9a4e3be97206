"""What a confined build may read and execute of its tools, asked of the tools themselves.

:func:`scope` turns the programs a build runs (cmake, ninja or make, the compilers) into
Landlock grants, each by its **real path** (``~/bin/cc``, a link to ``/usr/bin/gcc``, grants
``/usr/bin/x86_64-linux-gnu-gcc-12``, never ``~/bin`` or ``~``):

- a **compiler**: its binary, and what it says it searches: ``-print-search-dirs`` (install,
  programs, libraries), ``-print-sysroot``, the ``#include <...>`` list of ``-v -E``, where it
  finds ``cc1``, ``as`` and ``ld`` (its program directories, else ``-print-prog-name``), and
  the binutils CMake finds by the compiler's name (``<prefix>ar``, ``<prefix>gcc-ranlib``,
  ... beside it, else on PATH). Its own ``bin`` directory (clang lists the one it was named
  from, ``~/bin`` for a link there) is not granted: only those programs in it are;
- **cmake**: its binary and its ``CMAKE_ROOT``: the one ``share/cmake-X.Y`` under its
  prefix (the PyPI wheel's ``cmake/data`` keeps it there too), else what ``cmake -P`` says;
- **ninja**, **make**: the binary only;
- every build: ``/bin/sh`` (ninja and make run commands through it) and ``uname`` (CMake asks
  it the host's system).

Every directory is normalised with ``realpath``; one that does not exist is left out. None
is ever ``/``, a home directory (``$HOME``, ``~``, the account's, and their real paths) or
an ancestor of one: such a directory is dropped, and the files the tool needs from it are
granted one by one; where the tool needs the directory itself (its install directory or a
header directory) :func:`scope` refuses in one line naming the tool and the opt-out.

The queries run the tools **unconfined**, so every tool handed to :func:`scope` must be one
the user or the board chose (the cmake option or PATH, ``$CC``, the board's compiler), never
a name an archive or a generated project gives. Each compiler is asked once per process
(keyed by its path, real path and modification time), each query bounded by
:data:`QUERY_TIMEOUT`, in an environment of :data:`QUERY_ENV` only.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from ..errors import SandboxError
from .confine import OPT_OUT

QUERY_TIMEOUT = 10.0  # seconds, per query of one tool
# The variables a query keeps (LC_ALL is C); they change where a compiler finds its parts.
QUERY_ENV = ("PATH", "TMPDIR", "GCC_EXEC_PREFIX", "COMPILER_PATH")
BUILDERS = frozenset({"ninja", "ninja-build", "samu", "make", "gmake"})
# Programs CMake finds by the compiler's prefix and version (CMakeFindBinUtils).
BINUTILS = ("ar", "ranlib", "nm", "objcopy", "objdump", "readelf", "strip", "size",
            "addr2line", "ld", "as", "gcc-ar", "gcc-ranlib", "gcc-nm")  # fmt: skip
# What every build runs besides its tools: the shell of ninja's and make's commands.
SHELL = "/bin/sh"
_COMPILER_NAME = re.compile(r"^(.*?)(?:gcc|g\+\+|c\+\+|cc|clang\+\+|clang)(-[0-9][0-9.]*)?$")
# The programs a compiler runs, granted as files: from the first of its program directories
# holding them, else where -print-prog-name says (GCC on Debian finds as and ld on PATH).
PROG_NAMES = ("cc1", "as", "ld")


@dataclass(frozen=True)
class Scope:
    """Real paths to grant: ``programs`` (directories to read and execute in), ``data``
    (directories to read), ``files`` (single programs to read and execute)."""

    programs: Tuple[str, ...] = ()
    data: Tuple[str, ...] = ()
    files: Tuple[str, ...] = ()


@dataclass(frozen=True)
class CompilerDirs:
    """What a compiler says it uses (real paths of what exists)."""

    install: Tuple[str, ...] = ()
    programs: Tuple[str, ...] = ()
    libraries: Tuple[str, ...] = ()
    sysroot: Tuple[str, ...] = ()
    includes: Tuple[str, ...] = ()
    files: Tuple[str, ...] = ()  # as, ld and the binutils beside it


def scope(tools: Iterable[str]) -> Scope:
    """The grants for a build running ``tools`` (paths, or names looked up on PATH; missing
    ones are skipped). SandboxError when a tool needs a directory that may not be granted."""
    homes = home_dirs()
    found = _Grants(homes)
    found.file(_real(SHELL))
    found.file(_real(shutil.which("uname") or "/bin/uname"))
    for tool in tools:
        path = tool if os.sep in tool else shutil.which(tool)
        if not path or not os.path.isfile(path):
            continue
        path = os.path.abspath(path)
        real = os.path.realpath(path)
        found.file(real)
        kind = tool_kind(path)
        if kind == "cmake":
            root = cmake_root(real)
            if root is not None:
                found.need(root, "data", path, "CMake modules")
        elif kind == "compiler":
            dirs = compiler_dirs(path)
            for directory in dirs.install:
                found.need(directory, "programs", path, "install directory")
            for directory in dirs.includes:
                found.need(directory, "data", path, "headers")
            # Its own bin directory (clang lists the link's) only for what it runs from there.
            own = {os.path.realpath(os.path.dirname(p)) for p in (path, real)}
            for directory in dirs.programs:
                if directory not in own:
                    found.may(directory, "programs")
            for directory in (*dirs.libraries, *dirs.sysroot):
                found.may(directory, "data")
            for file in dirs.files:
                found.file(file)
    return found.scope()


def tool_kind(path: str) -> str:
    """``cmake``, ``builder`` (ninja, make) or ``compiler``, by the program's name."""
    names = {os.path.basename(path), os.path.basename(os.path.realpath(path))}
    if "cmake" in names:
        return "cmake"
    if names & BUILDERS:
        return "builder"
    return "compiler"


def home_dirs() -> Set[str]:
    """Every home directory of this process: ``$HOME``, ``~`` and the account's, each also
    by its real path."""
    found = {os.environ.get("HOME", ""), os.path.expanduser("~")}
    with contextlib.suppress(KeyError, OSError):
        found.add(pwd.getpwuid(os.getuid()).pw_dir)
    found = {os.path.abspath(p) for p in found if p}
    return found | {os.path.realpath(p) for p in found}


def forbidden(path: str, homes: Iterable[str]) -> bool:
    """Whether ``path`` is ``/``, one of ``homes`` or an ancestor of one."""
    path = os.path.abspath(path)
    if path == os.sep:
        return True
    inside = path.rstrip(os.sep) + os.sep
    return any(home == path or home.startswith(inside) for home in homes)


class _Grants:
    def __init__(self, homes: Set[str]) -> None:
        self.homes = homes
        self.kinds: Dict[str, Set[str]] = {"programs": set(), "data": set()}
        self.files: Set[str] = set()

    def file(self, path: str) -> None:
        if os.path.isfile(path):
            self.files.add(path)

    def may(self, directory: str, kind: str) -> None:
        if not forbidden(directory, self.homes):
            self.kinds[kind].add(directory)

    def need(self, directory: str, kind: str, tool: str, what: str) -> None:
        if forbidden(directory, self.homes):
            where = (
                "the root directory" if directory == os.sep
                else "your home directory" if directory in self.homes
                else "a directory above your home"
            )  # fmt: skip
            raise SandboxError(
                f"cannot confine the build: {tool} keeps its {what} in {directory}, and the "
                f"build may not read {where}",
                hint=f"to build unconfined anyway: {OPT_OUT}",
            )
        self.kinds[kind].add(directory)

    def scope(self) -> Scope:
        programs = _outermost(self.kinds["programs"])
        data = _outermost(self.kinds["data"] - set(programs))
        data = [d for d in data if not _under(d, programs)]
        files = [f for f in self.files if not _under(f, programs)]
        return Scope(tuple(programs), tuple(data), tuple(sorted(files)))


def _outermost(directories: Iterable[str]) -> List[str]:
    ordered = sorted(set(directories))
    return [d for d in ordered if not _under(d, [o for o in ordered if o != d])]


def _under(path: str, directories: Iterable[str]) -> bool:
    return any(path.startswith(d.rstrip(os.sep) + os.sep) for d in directories)


# --- asking the tools -------------------------------------------------------------------------

_CACHE: Dict[Tuple[str, str, str, int], object] = {}
_LOCK = threading.Lock()


def compiler_dirs(path: str) -> CompilerDirs:
    """What the compiler at ``path`` (run as given: its name can choose its target) says it
    searches; only the binutils beside it when it answers no query (not GCC-like)."""
    found = _cached("compiler", path, lambda: _ask_compiler(path, os.path.realpath(path)))
    assert isinstance(found, CompilerDirs)
    return found


def cmake_root(real: str) -> Optional[str]:
    """The real path of cmake's ``CMAKE_ROOT`` (its modules): the only ``share/cmake-X.Y``
    under its prefix, else as it says; None when it says none."""
    found = _cached("cmake", real, lambda: _ask_cmake(real))
    return found if isinstance(found, str) else None


def _cached(kind: str, path: str, ask: Callable[[], object]) -> object:
    """``ask()``'s answer for the tool at ``path``, once per process and version of it."""
    real = os.path.realpath(path)
    key = (kind, path, real, _mtime(real))
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    found = ask()
    with _LOCK:
        _CACHE[key] = found
    return found


def _ask_cmake(real: str) -> Optional[str]:
    share = os.path.join(os.path.dirname(os.path.dirname(real)), "share")
    try:
        names = sorted(n for n in os.listdir(share) if re.fullmatch(r"cmake-\d+\.\d+", n))
    except OSError:
        names = []
    if len(names) == 1:
        return os.path.realpath(os.path.join(share, names[0]))
    with tempfile.TemporaryDirectory(prefix="mlf-cmake-root-") as scratch:
        script = os.path.join(scratch, "root.cmake")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write('message("${CMAKE_ROOT}")\n')
        done = _query([real, "-P", script])
    if done is not None and done[0] == 0:
        lines = [line.strip() for line in done[2].splitlines() if line.strip()]
        if lines and os.path.isdir(lines[-1]):
            return os.path.realpath(lines[-1])
    return None


def _ask_compiler(path: str, real: str) -> CompilerDirs:
    install: List[str] = []
    programs: List[str] = []
    libraries: List[str] = []
    done = _query([path, "-print-search-dirs"])
    if done is not None and done[0] == 0:
        for line in done[1].splitlines():
            label, _, value = line.partition(": ")
            value = value[1:] if value.startswith("=") else value
            target = {"install": install, "programs": programs, "libraries": libraries}
            if label in target:
                target[label] += value.split(os.pathsep)
    sysroot: List[str] = []
    if install:  # GCC's (clang has no -print-sysroot; its sysroot shows in its lists)
        done = _query([path, "-print-sysroot"])
        if done is not None and done[0] == 0 and done[1].strip():
            sysroot.append(done[1].strip())
    includes: List[str] = []
    done = _query([path, "-v", "-E", "-x", "c", os.devnull, "-o", os.devnull])
    if done is not None and done[0] == 0:
        includes = _include_list(done[2])
    files = [_real(p) for p in _beside(path, real)]
    asked = bool(install or programs or includes)
    for program in PROG_NAMES[0 if install else 1 :] if asked else ():  # cc1 is GCC's
        local = [os.path.join(d, program) for d in (*install, *programs)]
        local = [p for p in local if os.path.isfile(p)]
        if local:  # where it runs it from: granted with that directory, or as a file
            files.append(_real(local[0]))
            continue
        done = _query([path, f"-print-prog-name={program}"])
        if done is not None and done[0] == 0 and done[1].strip():
            named = done[1].strip()
            located = named if os.sep in named else _which(named)
            if located:
                files.append(_real(located))
    return CompilerDirs(
        install=_directories(install),
        programs=_directories(programs),
        libraries=_directories(libraries),
        sysroot=_directories(sysroot),
        includes=_directories(includes),
        files=tuple(sorted({f for f in files if os.path.isfile(f)})),
    )


def _include_list(text: str) -> List[str]:
    """The directories of ``#include "..."`` and ``<...>`` in a ``-v -E`` report."""
    found: List[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("#include ") and "search starts here" in line:
            inside = True
        elif line.startswith("End of search list"):
            inside = False
        elif inside and line.startswith(" "):
            found.append(line.strip().split(" (", 1)[0])
    return found


def _beside(path: str, real: str) -> List[str]:
    """The binutils CMake would find for the compiler: ``<prefix><tool>[<version>]`` (from
    the name of its path and of its real path) in the directory of either, else on PATH."""
    names = set()
    for each in (path, real):
        match = _COMPILER_NAME.match(os.path.basename(each))
        if match is not None:
            prefix, version = match.group(1), match.group(2) or ""
            names |= {prefix + tool + version for tool in BINUTILS}
            names |= {prefix + tool for tool in BINUTILS}
    found = []
    for name in sorted(names):
        for directory in {os.path.dirname(path), os.path.dirname(real)}:
            if os.path.isfile(os.path.join(directory, name)):
                found.append(os.path.join(directory, name))
                break
        else:
            located = _which(name)
            if located:
                found.append(located)
    return found


def _query(argv: List[str]) -> Optional[Tuple[int, str, str]]:
    """(status, stdout, stderr) of a trusted tool run unconfined with :data:`QUERY_ENV`;
    None when it does not run or exceeds :data:`QUERY_TIMEOUT`."""
    env = {name: os.environ[name] for name in QUERY_ENV if name in os.environ}
    env["LC_ALL"] = "C"
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
            errors="replace",
            start_new_session=True,  # its own group: what it starts (cc1) goes with it
        )
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        out, err = proc.communicate(timeout=QUERY_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return proc.returncode, out, err


def _which(name: str) -> Optional[str]:
    return shutil.which(name, path=os.environ.get("PATH", os.defpath))


def _directories(paths: Iterable[str]) -> Tuple[str, ...]:
    found = {os.path.realpath(p) for p in paths if p.strip()}
    return tuple(sorted(p for p in found if os.path.isdir(p)))


def _real(path: str) -> str:
    return os.path.realpath(path)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def clear_cache() -> None:
    """Forgets every tool's answers (tests; a tool replaced in place keeps its mtime)."""
    with _LOCK:
        _CACHE.clear()


__all__ = ["Scope", "CompilerDirs", "scope", "compiler_dirs", "cmake_root", "home_dirs",
           "forbidden", "tool_kind", "clear_cache", "QUERY_ENV", "QUERY_TIMEOUT"]  # fmt: skip
