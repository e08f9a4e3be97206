"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from project_api.modelgen import corpus

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_ENV = corpus.CORPUS_ENV
# The suite's projects share built runtime libraries (project_api.build.runtime_cache) in a
# cache of the run's own, never the user's, removed when the run ends.
_RUNTIME_CACHE = tempfile.TemporaryDirectory(prefix="mlf-test-runtime-cache-")
os.environ.setdefault("MLF_PROJECT_RUNTIME_CACHE", str(Path(_RUNTIME_CACHE.name) / "runtime"))


def corpus_dir() -> Path:
    """The real-TVM archive corpus: $MLF_PROJECT_CORPUS, else ../shared/mlf beside the repo."""
    return corpus.corpus_dir(REPO_ROOT)


def corpus_archives(aot: bool = False) -> List[Path]:
    """The graph archives of the corpus; with ``aot``, its AOT archives (``aot/``) too."""
    found = corpus.corpus_archives(corpus_dir())
    return found + corpus.corpus_archives(corpus_dir() / "aot") if aot else found


def corpus_archive(stem: str) -> Optional[Path]:
    """The corpus archive ``stem``.tar, graph or AOT (None when absent)."""
    for folder in (corpus_dir(), corpus_dir() / "aot"):
        if (folder / f"{stem}.tar").is_file():
            return folder / f"{stem}.tar"
    return None


def cmsis_nn_dependency() -> Dict[str, str]:
    """CMSIS-NN as a real git dependency at :data:`CMSIS_NN_TAG` (the option ``dependencies``
    takes it), from wherever :func:`cmsis_nn` finds a repository; skips without one."""
    source = cmsis_nn()
    if source.git_url is None:
        pytest.skip(f"{CMSIS_ENV} names a checkout; this test needs a git repository")
    return {
        "short_name": "cmsis-nn",
        "url": source.git_url,
        "url_type": "git",
        "version_spec": CMSIS_NN_TAG,
    }


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temp dir for open_archive's extraction, to prove nothing stays behind."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


@pytest.fixture(scope="session")
def mlf_corpus() -> Path:
    directory = corpus_dir()
    if not directory.is_dir():
        pytest.skip(
            f"no real TVM archive corpus at {directory} "
            f"(set {CORPUS_ENV} to a folder of NAME.tar + NAME.json + NAME.*.npz)"
        )
    return directory


def corpus_case(archive: Path) -> Dict[str, object]:
    """The NAME.json that describes a corpus archive, with paths to its npz files added."""
    stem = archive.with_suffix("")
    info = json.loads(stem.with_suffix(".json").read_text())
    info["archive"] = archive
    info["inputs_npz"] = Path(f"{stem}.inputs.npz")
    info["outputs_npz"] = Path(f"{stem}.outputs.npz")
    return info


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None


requires_arm = pytest.mark.skipif(
    not (have_tool("arm-none-eabi-gcc") and have_tool("qemu-system-arm")),
    reason="needs arm-none-eabi-gcc and qemu-system-arm (apt-get install gcc-arm-none-eabi "
    "libnewlib-arm-none-eabi qemu-system-arm)",
)


def host_and_arm(*boards: str) -> List[Any]:
    """``board`` parameters: ``None`` (the host), then each Cortex-M board under QEMU."""
    return [None] + [pytest.param(b, marks=[pytest.mark.qemu, requires_arm]) for b in boards]


requires_riscv = pytest.mark.skipif(
    not (have_tool("riscv64-unknown-elf-gcc") and have_tool("qemu-system-riscv32")),
    reason="needs riscv64-unknown-elf-gcc and qemu-system-riscv32 (apt-get install "
    "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc)",
)


# --- git --------------------------------------------------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    """Runs git in ``repo`` as a fixed author, away from the user's and the system's git
    configuration; returns its output."""
    env = {**os.environ, **GIT_ENV, "HOME": str(repo.parent)}
    done = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


# --- CMSIS-NN ---------------------------------------------------------------------------------

CMSIS_ENV = corpus.CMSIS_NN_ENV
CMSIS_NN_TAG = corpus.CMSIS_NN_TAG
# Where CI keeps CMSIS-NN (a bare git repository holding the tag) when the variable is unset.
CMSIS_NN_SHARED = corpus.shared_cmsis_nn_dir(REPO_ROOT)
CMSIS_NN_SKIP = (
    f"needs CMSIS-NN: set {CMSIS_ENV} to a CMSIS-NN git repository (path or url; tag "
    f"{CMSIS_NN_TAG} is used) or to a CMSIS-NN checkout (default: {CMSIS_NN_SHARED}, absent)"
)


def _cmsis_nn_location() -> Optional[str]:
    """$MLF_PROJECT_CMSIS_NN, else a usable copy of ../shared/deps/CMSIS-NN.git."""
    configured = os.environ.get(CMSIS_ENV)
    if configured:
        return configured
    shared = corpus.shared_cmsis_nn(REPO_ROOT)
    return str(shared) if shared is not None else None


@dataclass(frozen=True)
class CmsisNn:
    """$MLF_PROJECT_CMSIS_NN understood: a git repository (``git_url``, a url or a file: uri)
    to take tag :data:`CMSIS_NN_TAG` from, or a checked-out tree (``tree``)."""

    git_url: Optional[str] = None
    tree: Optional[Path] = None


def cmsis_nn_given() -> bool:
    """Whether a CMSIS-NN is at hand (for skip marks decided at collection)."""
    return _cmsis_nn_location() is not None


def cmsis_nn() -> CmsisNn:
    """What $MLF_PROJECT_CMSIS_NN names; skips the calling test when it is unset. A bare
    repository, or one whose tree holds no CMSIS-NN, is a repository; any other directory is
    a checkout (CMSIS-NN, or CMSIS_5 with CMSIS/NN)."""
    where = _cmsis_nn_location()
    if not where:
        pytest.skip(CMSIS_NN_SKIP)
    if "://" in where:
        return CmsisNn(git_url=where)
    local = Path(where)
    header = "Include/arm_nnfunctions.h"
    has_sources = (local / header).is_file() or (local / "CMSIS/NN" / header).is_file()
    is_bare = (local / "HEAD").is_file() and (local / "objects").is_dir()
    if is_bare or ((local / ".git").exists() and not has_sources):
        return CmsisNn(git_url=local.resolve().as_uri())
    return CmsisNn(tree=local)


def _checkout(tmp_path_factory: pytest.TempPathFactory, tag: str) -> Optional[Path]:
    """The checkout $MLF_PROJECT_CMSIS_NN names, or ``tag`` of the repository it names,
    checked out; None when it is unset."""
    if not cmsis_nn_given():
        return None
    source = cmsis_nn()
    if source.tree is not None:
        return source.tree
    assert source.git_url is not None
    tree = tmp_path_factory.mktemp("cmsis-nn") / "CMSIS-NN"
    done = subprocess.run(
        ["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1",
         "--branch", tag, source.git_url, str(tree)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"{CMSIS_ENV}={source.git_url}: cannot check out {tag}: {done.stderr.strip()}")
    return tree


@pytest.fixture(scope="session")
def cmsis_nn_checkout(tmp_path_factory: pytest.TempPathFactory) -> Optional[Path]:
    """A CMSIS-NN tree from $MLF_PROJECT_CMSIS_NN: the checkout it names, or tag
    :data:`CMSIS_NN_TAG` of the repository it names, checked out once per session; None
    when it is unset (tests that need it skip with :data:`CMSIS_NN_SKIP`)."""
    return _checkout(tmp_path_factory, CMSIS_NN_TAG)


@pytest.fixture(scope="session")
def cmsis_v7_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CMSIS-NN v7.0.0, the release ``compile --cmsis-nn`` names, checked out once per
    session (or the checkout $MLF_PROJECT_CMSIS_NN names); skips without one."""
    tree = _checkout(tmp_path_factory, "v7.0.0")
    if tree is None:
        pytest.skip(CMSIS_NN_SKIP)
    return tree


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def http_root(tmp_path: Path) -> Iterator[Tuple[Path, str]]:
    """A directory served over HTTP on 127.0.0.1: (the directory, its base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class ChildProcess:
    pid: int
    name: str
    state: str  # "Z" for a zombie: ended but not reaped


def reap_leftover_children() -> List[str]:
    """Kills and reaps the children a test left running (so one leak fails one test, not
    every later one) and returns their command lines for the test's assertion."""
    from project_api.run.base import live_children, reap

    leftovers = live_children()
    for proc in leftovers:
        reap(proc)
    return [str(proc.args) for proc in leftovers]


def child_processes(prefixes: Tuple[str, ...]) -> List[ChildProcess]:
    """This process's children (zombies included) whose name starts with a prefix."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == me and name.startswith(prefixes):
            found.append(ChildProcess(int(entry.name), name, state))
    return found


# --- TVM's own host ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tvm_host():  # -> tvm_host.TvmHost
    """TVM 0.14's runtime and a venv to drive it (tests/tvm_host.py), built once and cached;
    skips when ../shared/tvm is absent."""
    import tvm_host as host

    reason = host.missing_reason()
    if reason:
        pytest.skip(reason)
    return host.prepare()
