"""The sandbox seam (project_api.sandbox): filters, rules, policies, opting out, and what a
machine without Landlock gets. The hostile model itself: test_sandbox_hostile.py."""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import requires_arm

from project_api import sandbox
from project_api.build import runtime_cache
from project_api.cli import main
from project_api.driver import Project
from project_api.modelgen import catalog
from project_api.sandbox import policies, seccomp, syscalls

SUPPORT = sandbox.support()
needs_sandbox = pytest.mark.skipif(
    not SUPPORT.available, reason=f"no sandbox here: {SUPPORT.reason}"
)


@pytest.fixture(scope="module")
def mlp_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return catalog()["mlp"]().write(tmp_path_factory.mktemp("a") / "mlp.tar")


# --- the seccomp program ----------------------------------------------------------------------


def test_filter_checks_the_architecture_then_returns_in_place() -> None:
    flt = seccomp.Filter(seccomp.fail(errno.EPERM))
    flt.add(["read", "write"], seccomp.allow())
    flt.add(["kill"], seccomp.allow(), when=seccomp.arg(0, "eq", seccomp.SELF_PID))
    code, patches = seccomp.assemble(flt, "x86_64")
    assert code[0] == (0x20, 0, 0, 4)  # load the architecture
    assert code[1][3] == 0xC000003E and code[2] == (0x06, 0, 0, 0x80000000)  # else kill
    assert code[-1] == (0x06, 0, 0, seccomp.fail(errno.EPERM))  # the default last
    assert max(max(jt, jf) for _, jt, jf, _ in code) <= 4  # every rule returns in place
    [(index, sign)] = patches.items()
    assert code[index][0] == 0x15 and sign == 1  # patched in the child
    arm_code, _ = seccomp.assemble(flt, "aarch64")
    assert arm_code[1][3] == 0xC00000B7 and len(arm_code) == len(code) - 2  # no x32 check


def test_calls_an_architecture_lacks_are_left_out() -> None:
    flt = seccomp.Filter(seccomp.allow())
    flt.add(["fork", "open"], seccomp.fail())  # legacy calls: x86_64 only
    x86, _ = seccomp.assemble(flt, "x86_64")
    arm, _ = seccomp.assemble(flt, "aarch64")
    assert len(x86) - len(arm) == 2 + 4  # x32 check, and two rules of two instructions


X86_64_HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
GENERIC_HEADER = Path("/usr/include/asm-generic/unistd.h")


@pytest.mark.skipif(
    not (X86_64_HEADER.is_file() and GENERIC_HEADER.is_file()), reason="needs linux uapi headers"
)
def test_the_call_table_agrees_with_the_kernel_headers() -> None:
    import re

    x86 = dict(re.findall(r"#define __NR_(\w+)\s+(\d+)", X86_64_HEADER.read_text()))
    generic = dict(re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", GENERIC_HEADER.read_text()))
    generic["newfstatat"] = generic["fstatat"]  # aarch64's name for __NR3264_fstatat
    for name, (on_x86, on_arm) in syscalls.NUMBERS.items():
        assert int(x86[name]) == on_x86, name
        assert (int(generic[name]) if name in generic else None) == on_arm, name


def test_an_unknown_call_name_is_a_programming_error() -> None:
    with pytest.raises(KeyError, match="frobnicate"):
        seccomp.Filter(seccomp.allow()).add(["frobnicate"], seccomp.fail())


# --- policies ---------------------------------------------------------------------------------


def test_elf_interpreter_tells_static_from_dynamic(tmp_path: Path) -> None:
    shell = os.path.realpath("/bin/sh")
    interpreter = policies.elf_interpreter(shell)
    assert interpreter is not None and "ld" in Path(interpreter).name
    text = tmp_path / "x"
    text.write_text("#!/bin/sh\n")
    assert policies.elf_interpreter(str(text)) is None


def test_host_firmware_reads_only_itself_and_its_pty(tmp_path: Path) -> None:
    binary = Path(os.path.realpath("/bin/sh"))
    rules = policies.host_firmware(binary, "/dev/pts/7").ruleset.describe()
    assert rules["write"] == ["/dev/pts/7"]
    assert str(binary) in rules["read+exec"]
    assert all(p.startswith(("/lib", "/usr/lib", "/etc/ld.so")) or p == str(binary)
               for kind in rules.values() for p in kind if p != "/dev/pts/7")  # fmt: skip


@needs_sandbox
def test_a_confined_shell_signals_only_itself_and_starts_nothing(tmp_path: Path) -> None:
    """The firmware policy around dash: its own pid is the one it may signal; no fork (so no
    command), no other file."""
    shell = os.path.realpath("/bin/sh")
    prepared = sandbox.prepare(lambda: policies.host_firmware(Path(shell)))
    assert prepared is not None
    script = (
        "kill -0 $$ && echo self-ok; kill -0 $PPID 2>/dev/null || echo parent-denied; "
        "/bin/true 2>/dev/null || echo exec-denied; read x < /etc/hostname || echo read-denied"
    )
    done = subprocess.run(
        [shell, "-c", script],
        preexec_fn=prepared.apply,
        capture_output=True,
        text=True,
        env={},
        timeout=30,
        check=False,
    )
    prepared.close()
    assert done.stdout.split() == ["self-ok", "parent-denied", "exec-denied", "read-denied"]


# --- choosing, refusing, opting out -----------------------------------------------------------


def test_enabled_reads_the_option_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.ENV, raising=False)
    assert sandbox.enabled() and not sandbox.enabled(False)
    monkeypatch.setenv(sandbox.ENV, "off")
    assert not sandbox.enabled() and sandbox.enabled(True)


def test_support_is_one_line() -> None:
    line = SUPPORT.describe()
    assert line.startswith("sandbox: ") and "\n" not in line
    if SUPPORT.available:
        assert f"Landlock ABI {SUPPORT.landlock_abi}" in line


def test_version_names_the_sandbox(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("mlf-project ") and lines[1] == SUPPORT.describe()


def test_sandbox_is_a_flag_of_its_own(mlp_archive: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["generate", str(mlp_archive), "p", "-o", "sandbox=false"]) == 2
    assert "use --no-sandbox" in capsys.readouterr().err


def _without_landlock() -> None:  # pragma: no cover - runs in the child
    """What an old kernel answers: landlock_create_ruleset does not exist."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    flt = seccomp.Filter(seccomp.allow())
    flt.add(["landlock_create_ruleset"], seccomp.fail(errno.ENOSYS))
    machine = seccomp.machine()
    assert machine is not None
    compiled = seccomp.Compiled(flt, machine)
    if compiled.install() is not None:
        os._exit(99)


def _cli(argv: List[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != sandbox.ENV}
    return subprocess.run(
        [sys.executable, "-m", "project_api", *argv],
        preexec_fn=_without_landlock,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


@pytest.mark.skipif(seccomp.machine() is None, reason="no seccomp table for this machine")
def test_without_landlock_run_refuses_in_one_line_naming_the_opt_out(
    mlp_archive: Path, tmp_path: Path
) -> None:
    refused = _cli(["run", str(mlp_archive), "--board", "host"], tmp_path)
    assert refused.returncode == 2
    lines = [line for line in refused.stderr.splitlines() if "error" in line]
    assert len(lines) == 1, refused.stderr
    assert "no Landlock" in lines[0] and "--no-sandbox" in lines[0]
    version = _cli(["--version"], tmp_path)
    assert "sandbox: unavailable (this kernel offers no Landlock" in version.stdout

    unconfined = _cli(["run", str(mlp_archive), "--board", "host", "--no-sandbox"], tmp_path)
    assert unconfined.returncode == 0, unconfined.stderr
    warnings = [line for line in unconfined.stderr.splitlines() if "sandbox off" in line]
    assert len(warnings) == 1


# --- the runtime cache, filled by the parent ----------------------------------------------------


def test_a_miss_is_stored_by_the_parent_unless_a_dependency_ran_cmake(tmp_path: Path) -> None:
    slot = runtime_cache.Slot("a1", tmp_path / "cache", tmp_path / "build")
    slot.staged.parent.mkdir(parents=True)
    slot.staged.write_bytes(b"!<arch>\n")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "deps.cmake").write_text('add_subdirectory("deps/x" "${B}/x" EXCLUDE_FROM_ALL)\n')
    assert runtime_cache.store(slot, project) is None and not slot.library.exists()
    (project / "deps.cmake").write_text("# cmsis-nn: recipe\nadd_library(cmsis_nn STATIC)\n")
    assert runtime_cache.store(slot, project) == slot.library
    assert slot.library.read_bytes() == b"!<arch>\n"


# --- what confinement must not change -----------------------------------------------------------


@needs_sandbox
@requires_arm
@pytest.mark.qemu
def test_icount_instructions_are_the_same_confined_or_not(
    mlp_archive: Path, tmp_path: Path
) -> None:
    project = Project.generate(
        mlp_archive, tmp_path / "p", board="qemu-mps2-an385", options={"qemu_icount": True}
    )
    project.build()
    counts = []
    for confined in (True, False):
        project.run_overrides["sandbox"] = confined
        with project.session() as session:
            session.run(catalog()["mlp"]().sample_inputs())
            counts.append(session.last_stats.instructions)
    assert counts[0] is not None and counts[0] == counts[1]
