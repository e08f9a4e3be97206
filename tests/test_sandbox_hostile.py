"""A hostile model against the sandbox (issue 34): on the host, under QEMU and in the build.

The model is a real corpus archive (mnist8) with C added that, from a constructor and from its
first operator call, reaches for the user's account (tests/hostile.py). Confined, every attempt
is denied, nothing is created, no connection arrives and the model still computes its
reference outputs; with the sandbox off the same firmware escapes, which proves the test can
fail. At build time, a model that ``#include``s or ``.incbin``s a file outside the project
fails to build in one line, and the file's content appears nowhere.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Iterator, Tuple

import hostile
import numpy as np
import pytest
from conftest import corpus_archive, have_tool, requires_arm

from project_api import sandbox
from project_api.driver import Project
from project_api.errors import BuildError
from project_api.modelgen import compare_outputs

pytestmark = pytest.mark.skipif(
    not sandbox.support().available, reason=f"no sandbox here: {sandbox.support().reason}"
)

MNIST = corpus_archive("mnist8")
needs_corpus = pytest.mark.skipif(MNIST is None, reason="needs the corpus archive mnist8.tar")
requires_riscv32 = pytest.mark.skipif(
    not (have_tool("riscv64-unknown-elf-gcc") and have_tool("qemu-system-riscv32")),
    reason="needs riscv64-unknown-elf-gcc and qemu-system-riscv32",
)
BOARDS = [
    pytest.param("host"),
    pytest.param("qemu-mps2-an385", marks=[requires_arm, pytest.mark.qemu]),
    pytest.param("qemu-mps3-an547", marks=[requires_arm, pytest.mark.qemu]),
    pytest.param("qemu-riscv32", marks=[requires_riscv32, pytest.mark.qemu]),
]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on 127.0.0.1 that a firmware which escaped would connect to."""
    server = socket.socket()
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.settimeout(0)
        yield server
    finally:
        server.close()


def connected(server: socket.socket) -> bool:
    try:
        peer, _ = server.accept()
    except BlockingIOError:
        return False
    peer.close()
    return True


def run_hostile(
    tmp_path: Path, board: str, server: socket.socket, *, confined: bool
) -> Tuple[dict, str, hostile.Paths]:
    """Builds and runs the hostile mnist8 once; (outputs, firmware log, paths)."""
    assert MNIST is not None
    paths = hostile.make_paths(tmp_path / "outside", server.getsockname()[1])
    archive = hostile.runtime_archive(MNIST, tmp_path / "hostile.tar", paths)
    project = Project.generate(archive, tmp_path / "proj", board=board)
    project.run_overrides["sandbox"] = confined
    project.build()
    inputs = dict(np.load(str(MNIST.with_suffix(".inputs.npz"))))
    session = project.session(timeout=30.0)
    try:
        outputs = session.run(inputs)
    finally:
        session.close()
    return outputs, session.runner.log, paths


@needs_corpus
@pytest.mark.parametrize("board", BOARDS)
def test_every_attempt_is_denied(board: str, tmp_path: Path, listener: socket.socket) -> None:
    outputs, log, paths = run_hostile(tmp_path, board, listener, confined=True)
    expected = dict(np.load(str(MNIST.with_suffix(".outputs.npz"))))  # type: ignore[union-attr]
    assert compare_outputs(outputs, expected) == []
    found = hostile.outcomes(log)
    attempts = hostile.ATTEMPTS_NATIVE if board == "host" else hostile.ATTEMPTS_GUEST
    wanted = {f"{stage} {attempt}" for stage in hostile.STAGES for attempt in attempts}
    assert set(found) == wanted, log[-2000:]
    assert set(found.values()) == {"denied"}, found
    assert paths.created() == []
    assert not connected(listener)
    assert "mlf-hostile-SECRET" not in log


@needs_corpus
@pytest.mark.parametrize("board", [BOARDS[0], BOARDS[1]])
def test_without_the_sandbox_it_escapes(
    board: str, tmp_path: Path, listener: socket.socket
) -> None:
    _, log, paths = run_hostile(tmp_path, board, listener, confined=False)
    found = hostile.outcomes(log)
    assert found and set(found.values()) == {"ESCAPED"}, found
    assert paths.created() != []
    if board == "host":
        assert connected(listener)


@needs_corpus
@pytest.mark.parametrize(
    "how, board",
    [
        ("include", "host"),
        ("incbin", "host"),
        pytest.param("incbin", "qemu-mps2-an385", marks=requires_arm),
    ],
)
def test_the_build_cannot_read_outside(how: str, board: str, tmp_path: Path) -> None:
    assert MNIST is not None
    paths = hostile.make_paths(tmp_path / "outside", 0)
    archive = hostile.build_archive(MNIST, tmp_path / "hostile.tar", paths.secret, how)
    project = Project.generate(archive, tmp_path / "proj", board=board)
    with pytest.raises(BuildError) as failed:
        project.build()
    message = str(failed.value)
    assert str(paths.secret) in message and "mlf-hostile-SECRET" not in message
    assert "denied" in message or "not found" in message
    log = (project.build_dir / "build.log").read_text(errors="replace")
    assert "mlf-hostile-SECRET" not in log
    assert not any(b"mlf-hostile-SECRET" in p.read_bytes() for p in _files(project.build_dir))


@needs_corpus
def test_unconfined_build_takes_the_file_in(tmp_path: Path) -> None:
    """The same archive built with the sandbox off compiles the secret in: the test above
    would see it."""
    assert MNIST is not None
    paths = hostile.make_paths(tmp_path / "outside", 0)
    archive = hostile.build_archive(MNIST, tmp_path / "hostile.tar", paths.secret, "include")
    project = Project.generate(archive, tmp_path / "proj", board="host")
    project.run_overrides["sandbox"] = False
    assert b"mlf-hostile-SECRET" in project.build().read_bytes()


def _files(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file())
