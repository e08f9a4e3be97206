"""The build's read scope comes from the compilers themselves, never ``/`` or ``$HOME``
(issue 41, project_api/sandbox/toolchain.py).

With ``CC=~/bin/cc``, a link to the real gcc, the build was granted the whole home and a
model's ``#include "~/.ssh/key.h"`` compiled the key in. Now the scope is what the tools
say they use, by real path: the same model fails to build in one line and the key appears
nowhere, on the host and on qemu-mps2-an385 (the board's compiler through a link on PATH);
with ``--no-sandbox`` it is in the firmware, which shows the test can fail.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Iterable, Iterator, List

import pytest
from conftest import have_tool
from hostile import toolchain as ht

from project_api import sandbox
from project_api.build import runtime_cache
from project_api.cli import main
from project_api.driver import Project
from project_api.errors import SandboxError
from project_api.sandbox import policies, toolchain

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="needs gcc")
needs_sandbox = pytest.mark.skipif(
    not sandbox.support().available, reason=f"no sandbox here: {sandbox.support().reason}"
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ht.FakeHome:
    """A fake home, deep enough that its ancestors are directories of the test's own."""
    made = ht.make_home(tmp_path / "a" / "b" / "home")
    monkeypatch.setenv("HOME", str(made.root))
    toolchain.clear_cache()
    return made


def _granted(found: toolchain.Scope) -> List[str]:
    return [*found.programs, *found.data, *found.files]


def _never_home_or_above(paths: Iterable[str], homes: Iterable[str]) -> None:
    for path in paths:
        assert not toolchain.forbidden(path, homes), path


# --- the scope --------------------------------------------------------------------------------


@needs_gcc
def test_a_compiler_linked_from_home_grants_nothing_of_home(home: ht.FakeHome) -> None:
    cc = home.link("cc", "gcc")
    found = toolchain.scope([str(cc)])
    assert os.path.realpath(cc) in _granted(found) or any(
        os.path.realpath(cc).startswith(d + os.sep) for d in found.programs
    )
    assert found.data and all(os.path.isdir(d) for d in found.data)  # its headers
    assert not [p for p in _granted(found) if p.startswith(str(home.root))]
    _never_home_or_above(_granted(found), toolchain.home_dirs())
    rules = policies.build([str(cc)], [], []).ruleset.describe()
    everything = [p for paths in rules.values() for p in paths]
    assert not [p for p in everything if p.startswith(str(home.root))]
    _never_home_or_above(everything, toolchain.home_dirs())


@pytest.mark.skipif(not os.path.isfile("/bin/gcc"), reason="needs /bin/gcc")
def test_gcc_named_through_bin_does_not_grant_the_root() -> None:
    """``dirname(dirname('/bin/gcc'))`` is ``/``: the scope takes the real path instead."""
    found = toolchain.scope(["/bin/gcc"])
    assert "/" not in found.programs + found.data
    _never_home_or_above(_granted(found), toolchain.home_dirs())


def test_no_ancestor_of_home_is_granted_and_a_binary_in_home_is_a_file(
    home: ht.FakeHome,
) -> None:
    """A compiler that lives in the home and names the root, the home and its ancestors among
    its directories: only its own subdirectories and its binary are granted."""
    tools = home.root / "x-tools"
    (tools / "libexec").mkdir(parents=True)
    (tools / "include").mkdir()
    (tools / "lib" / "gcc").mkdir(parents=True)
    above = [str(home.root.parent), str(home.root.parent.parent)]
    xcc = ht.fake_compiler(
        home.bin / "xcc",
        install=str(tools / "lib" / "gcc"),
        programs=["/", *above, str(home.root), str(tools / "libexec")],
        libraries=[str(home.root / "bin" / ".." / ".."), str(tools / "lib")],
        sysroot="/",
        includes=[str(tools / "include")],
    )
    found = toolchain.scope([str(xcc)])
    assert set(found.programs) == {str(tools / "lib" / "gcc"), str(tools / "libexec")}
    assert set(found.data) == {str(tools / "include"), str(tools / "lib")} - set(found.programs)
    assert str(xcc) in found.files
    _never_home_or_above(_granted(found), toolchain.home_dirs())


@pytest.mark.parametrize("where", ["home", "root"])
def test_a_compiler_needing_home_or_root_is_refused_in_one_line(
    home: ht.FakeHome, where: str
) -> None:
    xcc = home.bin / "xcc"
    if where == "home":
        ht.fake_compiler(xcc, install=str(home.bin), includes=[str(home.root)])
    else:
        ht.fake_compiler(xcc, install="/")
    with pytest.raises(SandboxError) as refused:
        toolchain.scope([str(xcc)])
    line = str(refused.value)
    assert "\n" not in line and str(xcc) in line
    assert "--no-sandbox" in line and "MLF_PROJECT_SANDBOX=off" in line


def test_a_compiler_that_does_not_answer_is_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each query is bounded, and what the tool started goes with it."""
    slow = tmp_path / "slowcc"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setattr(toolchain, "QUERY_TIMEOUT", 0.3)
    started = time.monotonic()
    found = toolchain.scope([str(slow)])
    assert time.monotonic() - started < 5
    assert str(slow) in found.files and not found.programs + found.data


def test_cmake_reads_its_modules_not_its_prefix(tmp_path: Path) -> None:
    """The PyPI wheel's layout: ``cmake/data/{bin,share/cmake-X.Y}``."""
    prefix = tmp_path / "cmake" / "data"
    (prefix / "share" / "cmake-3.99" / "Modules").mkdir(parents=True)
    (prefix / "doc").mkdir()
    fake = ht.fake_compiler(prefix / "bin" / "cmake")  # a script: cmake -P would fail
    found = toolchain.scope([str(fake)])
    assert found.data == (str(prefix / "share" / "cmake-3.99"),)
    assert str(fake) in found.files


# --- the payload: #include "~/.ssh/key.h" with CC=~/bin/cc --------------------------------------


@pytest.fixture(scope="module")
def key_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ht.FakeHome]:
    made = ht.make_home(tmp_path_factory.mktemp("toolchain") / "home")
    yield made


@pytest.fixture(scope="module")
def key_tar(key_home: ht.FakeHome) -> Path:
    return ht.key_archive(key_home.root.parent / "key.tar", key_home.key)


def _build_through_home(
    home: ht.FakeHome,
    archive: Path,
    board: str,
    where: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    *extra: str,
) -> tuple:
    """``mlf-project build`` of ``archive`` for ``board`` with the compiler a link in the fake
    home and ``HOME`` that home; (status, stderr, project)."""
    cache = runtime_cache.cache_dir()  # the real one, before HOME moves: its hits save time
    if cache is not None:
        monkeypatch.setenv(runtime_cache.ENV, str(cache))
    monkeypatch.setenv(sandbox.ENV, "on")  # restored after --no-sandbox set it off
    if board == "host":
        monkeypatch.setenv("CC", str(home.link("cc", "gcc")))
    else:
        monkeypatch.delenv("CC", raising=False)
        home.link("arm-none-eabi-gcc", "arm-none-eabi-gcc")
        monkeypatch.setenv("PATH", f"{home.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home.root))
    toolchain.clear_cache()
    project = Project.generate(archive, where / "proj", board=board)
    capsys.readouterr()
    status = main(["build", str(project.dir), *extra])
    return status, capsys.readouterr().err, project


def _compiler_of(project: Project) -> str:
    """The C compiler CMake found (its ``CMakeCCompiler.cmake``)."""
    found = project.build_dir.glob("CMakeFiles/*/CMakeCCompiler.cmake")
    text = next(found).read_text()
    return next(line for line in text.splitlines() if line.startswith("set(CMAKE_C_COMPILER "))


def _files(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@needs_sandbox
@needs_gcc
@pytest.mark.parametrize(
    "board",
    [
        "host",
        pytest.param(
            "qemu-mps2-an385",
            marks=pytest.mark.skipif(not have_tool("arm-none-eabi-gcc"), reason="no Arm gcc"),
        ),
    ],
)
def test_a_compiler_in_home_does_not_open_home(
    board: str,
    key_home: ht.FakeHome,
    key_tar: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    status, err, project = _build_through_home(
        key_home, key_tar, board, tmp_path, monkeypatch, capsys
    )
    assert str(key_home.bin) in _compiler_of(project)  # built with the home's link
    errors = [line for line in err.splitlines() if "error:" in line]
    assert status == 2 and len(errors) == 1, err
    assert str(key_home.key) in errors[0] and "denied" in errors[0]
    assert ht.SECRET_MARK not in err
    assert not [p for p in _files(tmp_path) if ht.SECRET_MARK.encode() in p.read_bytes()]


@needs_gcc
def test_unconfined_the_key_is_in_the_firmware(
    key_home: ht.FakeHome,
    key_tar: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    status, err, project = _build_through_home(
        key_home, key_tar, "host", tmp_path, monkeypatch, capsys, "--no-sandbox"
    )
    assert status == 0, err
    assert str(key_home.bin) in _compiler_of(project)
    assert ht.SECRET_MARK.encode() in project.firmware.read_bytes()
