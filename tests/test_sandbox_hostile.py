"""A hostile model against the sandbox (issues 34, 41): on the host, under QEMU, in the build,
and on kernels whose Landlock is older than ours.

The model is a factory model (mlp) with C added that, from a constructor and from its first
operator call, reaches for the user's account (tests/hostile/): files, sockets, another
process of the user's (a ``sleep`` started here: its limits and signals), an ``ioctl`` its
console does not need. Confined, every attempt is denied, nothing happens outside and the
model still computes its reference outputs; with the sandbox off the same firmware escapes,
which proves the test can fail. Each board's firmware is built once for the module. At build
time, a model that ``#include``s or ``.incbin``s a file outside the project fails to build in
one line, and the file's content appears nowhere.

Older kernels: the CLI runs under a parent filter that makes ``landlock_create_ruleset``
answer ABI 1, 2, 3, 5 or 6 (tests/fake_landlock.py); the kernel then enforces just the rights
our ruleset handles at that ABI, and the seccomp stand-ins must hold the rest.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import fake_landlock
import hostile
import numpy as np
import pytest
from conftest import have_tool, requires_arm

from project_api import sandbox
from project_api.driver import Project
from project_api.errors import BuildError
from project_api.modelgen import catalog, compare_outputs

pytestmark = pytest.mark.skipif(
    not sandbox.support().available, reason=f"no sandbox here: {sandbox.support().reason}"
)

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
MODEL = catalog()["mlp"]()
INPUTS = MODEL.sample_inputs()


@dataclass
class Outside:
    """What the hostile firmware reaches for, and what the test sees of its effects."""

    paths: hostile.Paths
    tcp: socket.socket
    unix: socket.socket
    victim: subprocess.Popen
    nofile: Tuple[int, int]

    def reset(self) -> None:
        """As before any run: nothing created, the files whole, the limit as it was."""
        for path in self.paths.created():
            path.unlink()
        self.paths.victim_file.write_text(hostile.VICTIM_TEXT)
        resource.prlimit(self.victim.pid, resource.RLIMIT_NOFILE, self.nofile)
        self.effects()  # drains the listeners

    def effects(self) -> Dict[str, object]:
        """Every trace an escape leaves outside, by name (empty: none)."""
        found: Dict[str, object] = {}
        if self.paths.created():
            found["created"] = [p.name for p in self.paths.created()]
        if self.paths.victim_file.read_text() != hostile.VICTIM_TEXT:
            found["truncated"] = True
        limit = resource.prlimit(self.victim.pid, resource.RLIMIT_NOFILE)
        if limit != self.nofile:
            found["nofile"] = limit
        for name, server in (("tcp", self.tcp), ("unix", self.unix)):
            if _accepted(server):
                found[name] = "connected"
        return found


def _accepted(server: socket.socket) -> bool:
    accepted = False
    while True:
        try:
            peer, _ = server.accept()
        except BlockingIOError:
            return accepted
        peer.close()
        accepted = True


def _listening(family: int, address: object) -> socket.socket:
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(8)
    server.setblocking(False)
    return server


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outside]:
    root = tmp_path_factory.mktemp("outside")
    tcp = _listening(socket.AF_INET, ("127.0.0.1", 0))
    victim = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
    try:
        paths = hostile.make_paths(root, tcp.getsockname()[1], victim.pid)
        unix = _listening(socket.AF_UNIX, str(paths.unix))
        nofile = resource.prlimit(victim.pid, resource.RLIMIT_NOFILE)
        assert nofile[0] != hostile.VICTIM_NOFILE
        yield Outside(paths, tcp, unix, victim, nofile)
        unix.close()
    finally:
        tcp.close()
        victim.kill()
        victim.wait()


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, outside: Outside
) -> Iterator[Callable[[str], Project]]:
    """The hostile firmware of a board, built (confined) once for the module."""
    root = tmp_path_factory.mktemp("hostile")
    archive = hostile.runtime_archive(
        MODEL.write(root / "mlp.tar"), root / "hostile.tar", outside.paths
    )
    projects: Dict[str, Project] = {}

    def project(board: str) -> Project:
        if board not in projects:
            made = Project.generate(archive, root / board, board=board)
            made.build()
            projects[board] = made
        return projects[board]

    yield project


def run_hostile(project: Project, *, confined: bool) -> Tuple[dict, str]:
    """Runs the hostile firmware once; (outputs, firmware log)."""
    project.run_overrides["sandbox"] = confined
    session = project.session(timeout=30.0)
    try:
        outputs = session.run(INPUTS)
    finally:
        session.close()
    return outputs, session.runner.log


def wanted(board: str) -> List[str]:
    attempts = hostile.ATTEMPTS_NATIVE if board == "host" else hostile.ATTEMPTS_GUEST
    return sorted(f"{stage} {attempt}" for stage in hostile.STAGES for attempt in attempts)


@pytest.mark.parametrize("board", BOARDS)
def test_every_attempt_is_denied(
    board: str, built: Callable[[str], Project], outside: Outside
) -> None:
    project = built(board)
    outside.reset()
    outputs, log = run_hostile(project, confined=True)
    assert compare_outputs(outputs, MODEL.reference(INPUTS)) == []
    found = hostile.outcomes(log)
    assert sorted(found) == wanted(board), log[-2000:]
    assert set(found.values()) == {"denied"}, found
    assert outside.effects() == {}
    assert "mlf-hostile-SECRET" not in log


@pytest.mark.parametrize("board", [BOARDS[0], BOARDS[1]])
def test_without_the_sandbox_it_escapes(
    board: str, built: Callable[[str], Project], outside: Outside
) -> None:
    project = built(board)
    outside.reset()
    try:
        _, log = run_hostile(project, confined=False)
    finally:
        project.run_overrides["sandbox"] = True
    found = hostile.outcomes(log)
    assert sorted(found) == wanted(board), log[-2000:]
    assert set(found.values()) == {"ESCAPED"}, found
    effects = outside.effects()
    assert effects.pop("created")
    if board == "host":
        nofile = (hostile.VICTIM_NOFILE, outside.nofile[1])
        assert effects == {"truncated": True, "nofile": nofile, "tcp": "connected",
                           "unix": "connected"}  # fmt: skip
    else:
        assert effects == {}  # semihosting writes files, no more


# --- older kernels --------------------------------------------------------------------------

_UNDER_ABI = r"""
import sys
import numpy as np
from project_api.cli import main
from project_api.driver import Project
for argv in (["--version"], ["boards"]):
    try:
        main(argv)
    except SystemExit:
        pass
project = Project.open(sys.argv[1])
with project.session(timeout=30.0) as session:
    outputs = session.run(dict(np.load(sys.argv[2])))
np.savez(sys.argv[3], **outputs)
print(session.runner.log)
"""


@pytest.mark.parametrize("abi", [1, 2, 3, 5, 6])
def test_older_kernels_deny_every_attempt_and_say_what_stands_in(
    abi: int, built: Callable[[str], Project], outside: Outside, tmp_path: Path
) -> None:
    """The host firmware under a CLI that sees Landlock ``abi``: the same attempts denied,
    the same outputs; ``--version`` and ``boards`` name what this kernel lacks and what
    stands in for it, and the first confined run says it once on stderr."""
    if abi > sandbox.support().landlock_abi:
        pytest.skip(f"this kernel's Landlock is ABI {sandbox.support().landlock_abi}")
    project = built("host")
    outside.reset()
    np.savez(tmp_path / "inputs.npz", **INPUTS)  # type: ignore[arg-type]
    env = {k: v for k, v in os.environ.items() if k != sandbox.ENV}
    argv = [sys.executable, "-c", _UNDER_ABI, str(project.dir), str(tmp_path / "inputs.npz"),
            str(tmp_path / "outputs.npz")]  # fmt: skip
    done = fake_landlock.run(argv, abi, text=True, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    outputs = dict(np.load(tmp_path / "outputs.npz"))
    assert compare_outputs(outputs, MODEL.reference(INPUTS)) == []
    found = hostile.outcomes(done.stdout)
    assert sorted(found) == wanted("host"), done.stdout[-2000:]
    assert set(found.values()) == {"denied"}, found
    assert outside.effects() == {}

    described = [line for line in done.stdout.splitlines() if line.startswith("sandbox: ")]
    assert len(described) == 2 and described[0] == described[1]  # --version, boards
    assert described[0].startswith(f"sandbox: Landlock ABI {abi} ")
    notices = [line for line in done.stderr.splitlines() if "sandbox:" in line]
    if abi < 6:
        assert "lacks" in described[0] and described[0].endswith("Nothing is left unenforced")
        assert "truncate(2)" in described[0] if abi < 3 else "truncate" not in described[0]
        assert notices == [f"mlf-project: sandbox: Landlock ABI {abi} lacks"
                           + described[0].split(" lacks", 1)[1]]  # fmt: skip
    else:
        assert "lacks" not in described[0] and notices == []


# --- the build ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return MODEL.write(tmp_path_factory.mktemp("model") / "mlp.tar")


@pytest.mark.parametrize(
    "how, board",
    [
        ("include", "host"),
        ("incbin", "host"),
        pytest.param("incbin", "qemu-mps2-an385", marks=requires_arm),
    ],
)
def test_the_build_cannot_read_outside(
    how: str, board: str, model_tar: Path, tmp_path: Path
) -> None:
    paths = hostile.make_paths(tmp_path / "outside", 0)
    archive = hostile.build_archive(model_tar, tmp_path / "hostile.tar", paths.secret, how)
    project = Project.generate(archive, tmp_path / "proj", board=board)
    with pytest.raises(BuildError) as failed:
        project.build()
    message = str(failed.value)
    assert str(paths.secret) in message and "mlf-hostile-SECRET" not in message
    assert "denied" in message or "not found" in message
    log = (project.build_dir / "build.log").read_text(errors="replace")
    assert "mlf-hostile-SECRET" not in log
    assert not any(b"mlf-hostile-SECRET" in p.read_bytes() for p in _files(project.build_dir))


def test_unconfined_build_takes_the_file_in(model_tar: Path, tmp_path: Path) -> None:
    """The same archive built with the sandbox off compiles the secret in: the test above
    would see it."""
    paths = hostile.make_paths(tmp_path / "outside", 0)
    archive = hostile.build_archive(model_tar, tmp_path / "hostile.tar", paths.secret, "include")
    project = Project.generate(archive, tmp_path / "proj", board="host")
    project.run_overrides["sandbox"] = False
    assert b"mlf-hostile-SECRET" in project.build().read_bytes()


def _files(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file())
