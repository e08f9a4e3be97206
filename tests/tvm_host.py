"""TVM 0.14's own host (``tvm.micro.Session``) for tests, kept out of the test interpreter.

TVM 0.14 needs numpy < 2 and its runtime library; the test venv may hold numpy 2. So the TVM
side of a test runs in a subprocess (``tests/tvm_driver.py``) with a venv of its own: TVM's
runtime-only build (``../shared/tvm/tvm-0.14.0-runtime-micro.tar.xz``) unpacked beside a venv
holding ``numpy<2``, TVM's few pure-Python needs and this project (TVM's Project API client
starts a project's ``microtvm_api_server.py`` with the venv's Python, which imports us).

Both live in a cache directory (``$MLF_PROJECT_TVM_CACHE``, else
``~/.cache/mlf-project-api/tvm-host``) under a key hashed from the tarball, the Python version
and the pinned requirements, so only the first run pays for them (about 15 s); the project
itself is reinstalled (without its dependencies) whenever its files change. A lock file keeps
two test runs from building the same entry at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "tvm_driver.py"
TARBALL_ENV = "MLF_PROJECT_TVM_RUNTIME"
CACHE_ENV = "MLF_PROJECT_TVM_CACHE"
TARBALL_NAME = "tvm-0.14.0-runtime-micro.tar.xz"
REQUIREMENTS = ("numpy<2", "attrs", "decorator", "psutil", "typing_extensions")
# What `pip install .` ships: a change in any of these reinstalls the project in the venv.
PACKAGE_PARTS = ("pyproject.toml", "README.md", "project_api", "crt", "template_project",
                 "boards", "examples")  # fmt: skip


def tarball() -> Path:
    """$MLF_PROJECT_TVM_RUNTIME, else ../shared/tvm/<tarball> beside the repository."""
    configured = os.environ.get(TARBALL_ENV)
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "tvm" / TARBALL_NAME


def missing_reason() -> str:
    """Why TVM's host cannot be used here ("" when it can)."""
    path = tarball()
    if not path.is_file():
        return (
            f"no TVM 0.14 runtime at {path} (set {TARBALL_ENV} to {TARBALL_NAME}, or put "
            "../shared/tvm beside the repository)"
        )
    if sys.platform != "linux":
        return "TVM's runtime in the tarball is built for x86-64 Linux"
    return ""


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "mlf-project-api" / "tvm-host"


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_hash(root: Path = REPO_ROOT) -> str:
    """A hash of every file `pip install .` takes from ``root``."""
    digest = hashlib.sha256()
    for part in PACKAGE_PARTS:
        base = root / part
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class TvmHost:
    """A ready TVM host: the venv's Python and the unpacked runtime."""

    python: Path
    tvm_root: Path  # holds python/tvm and lib/libtvm_runtime.so

    def env(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        """The driver's environment: TVM on its paths, nothing of the test venv's Python."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "MLF_PROJECT_CLIENT_CWD")
        }
        env["PYTHONPATH"] = str(self.tvm_root / "python")
        env["TVM_LIBRARY_PATH"] = str(self.tvm_root / "lib")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra or {})
        return env

    def run(
        self,
        spec: Mapping[str, Any],
        work: Path,
        *,
        timeout: float = 300.0,
        env: Optional[Mapping[str, str]] = None,
    ) -> Dict[str, Any]:
        """Runs ``tests/tvm_driver.py`` on ``spec`` (see the driver's docstring) and returns its
        result: ``{"steps": [...], "error": None | {"type", "message"}, "log": str,
        "arrays": {name: ndarray}}``. The driver and every process it started are killed when
        it does not finish in ``timeout`` seconds, or when the test is interrupted. ``env`` adds to
        the driver's environment (and so to the Project API servers it starts)."""
        import numpy as np

        work.mkdir(parents=True, exist_ok=True)
        spec_path = work / "spec.json"
        result_path = work / "result.json"
        arrays_path = work / "arrays.npz"
        for stale in (result_path, arrays_path):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        spec_path.write_text(json.dumps({**spec, "arrays": str(arrays_path)}, indent=1))
        log_path = work / "driver.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [str(self.python), str(DRIVER), str(spec_path), str(result_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(env),
                cwd=str(work),
                start_new_session=True,  # its own group: killed whole, no inherited SIGINT
            )
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
            finally:
                _kill_group(proc)
        text = log_path.read_text("utf-8", "replace")
        if not result_path.is_file():
            raise AssertionError(
                f"tvm_driver.py ended with status {proc.returncode} and no result "
                f"(timeout {timeout:g} s); its output:\n{text[-6000:]}"
            )
        result: Dict[str, Any] = json.loads(result_path.read_text())
        result["log"] = text
        result["arrays"] = {}
        if arrays_path.is_file():
            with np.load(arrays_path) as arrays:
                result["arrays"] = {k: arrays[k] for k in arrays.files}
        return result


def _kill_group(proc: subprocess.Popen) -> None:
    """Ends the driver's process group (the Project API servers and firmware under it)."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM:
                # The leader is gone; its group may live on (servers reaping firmware).
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _pip(python: Path, args: Sequence[str]) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"pip install {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )


def _install_project(python: Path) -> None:
    """`pip install --no-deps .` from a copy of the package files, so the worktree's own
    ``build/`` (which .ci/setup clears) is never touched."""
    with tempfile.TemporaryDirectory(prefix="mlf-tvm-pkg-") as scratch:
        copy = Path(scratch) / "src"
        copy.mkdir()
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for part in PACKAGE_PARTS:
            source = REPO_ROOT / part
            if source.is_dir():
                shutil.copytree(source, copy / part, ignore=ignore)
            elif source.is_file():
                shutil.copy2(source, copy / part)
        _pip(python, ["--no-deps", "--force-reinstall", str(copy)])


def prepare(tar: Optional[Path] = None, root: Optional[Path] = None) -> TvmHost:
    """The cached TVM host for ``tar`` (built on first use), with the current project in it."""
    tar = tar or tarball()
    root = root or cache_root()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    key_text = "\n".join([_file_hash(tar), version, *REQUIREMENTS, _file_hash(REPO_ROOT /
                          "pyproject.toml")])  # fmt: skip
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    entry = root / key
    python = entry / "venv" / "bin" / "python"
    with _locked(root / f"{key}.lock"):
        if not (entry / "ready").is_file():
            shutil.rmtree(entry, ignore_errors=True)
            entry.mkdir(parents=True)
            _unpack(tar, entry / "tvm")
            subprocess.run(
                [sys.executable, "-m", "venv", str(entry / "venv")],
                check=True,
                stdin=subprocess.DEVNULL,
            )
            # The project's dependencies come with it, numpy held below 2 for TVM.
            _pip(python, [*REQUIREMENTS, "jinja2>=3.0", "pyserial>=3.5", "cmake>=3.20"])
            (entry / "ready").write_text(key_text)
        wanted = package_hash()
        stamp = entry / "project.hash"
        if not stamp.is_file() or stamp.read_text() != wanted:
            _install_project(python)
            stamp.write_text(wanted)
    return TvmHost(python=python, tvm_root=entry / "tvm")


def _unpack(tar: Path, dest: Path) -> None:
    """The tarball's single top folder becomes ``dest``; members must stay inside it."""
    staging = dest.with_name(dest.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(tar) as archive:
        members: List[tarfile.TarInfo] = []
        for member in archive.getmembers():
            target = (staging / member.name).resolve()
            if staging.resolve() not in target.parents or not (member.isfile() or member.isdir()
                                                               or member.issym()):  # fmt: skip
                raise RuntimeError(f"{tar}: unexpected member {member.name!r}")
            members.append(member)
        archive.extractall(staging, members=members)  # noqa: S202 - members checked above
    tops = list(staging.iterdir())
    top = tops[0] if len(tops) == 1 and tops[0].is_dir() else staging
    if not (top / "python" / "tvm").is_dir() or not (top / "lib").is_dir():
        raise RuntimeError(f"{tar}: no python/tvm and lib/ inside")
    top.rename(dest)
    shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":  # .ci/setup warms the cache: `python tests/tvm_host.py`
    reason = missing_reason()
    if reason:
        print(f"tvm_host: skipped: {reason}")
    else:
        ready = prepare()
        print(f"tvm_host: TVM 0.14 host ready: {ready.python} ({ready.tvm_root})")
