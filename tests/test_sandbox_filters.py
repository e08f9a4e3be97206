"""The seccomp filters' argument rules and their stand-ins for older Landlock ABIs.

The assembler's programs are run by a small classic-BPF interpreter here, so each policy's
decision for a call and its arguments is checked without a kernel; then the QEMU and build
policies are applied for real (at Landlock ABI 2 and at this kernel's) to a Python that
tries what a hostile child would, with the same payload unconfined as the control. The host
firmware's policy is tried the same way by test_sandbox_hostile.py.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence

import pytest

from project_api import sandbox
from project_api.build import cmake
from project_api.sandbox import landlock, policies, seccomp
from project_api.sandbox.syscalls import AUDIT_ARCH, number

ARCH = "x86_64"
PID = 4242
ALLOW = seccomp.allow()
EPERM = seccomp.fail(errno.EPERM)
EACCES = seccomp.fail(errno.EACCES)
SUPPORT = sandbox.support()
needs_sandbox = pytest.mark.skipif(
    not SUPPORT.available, reason=f"no sandbox here: {SUPPORT.reason}"
)


def decide(flt: seccomp.Filter, call: str, *args: int, abi: int = 7, pid: int = PID) -> int:
    """What the program of ``flt`` (for a kernel of Landlock ``abi``, in the process ``pid``)
    returns for ``call(*args)``: a tiny interpreter of the instructions the assembler uses."""
    code, patches = seccomp.assemble(flt.for_abi(abi), ARCH)
    for index, sign in patches.items():
        op, jt, jf, _ = code[index]
        code[index] = (op, jt, jf, (sign * pid) & 0xFFFFFFFF)
    nr = number(call, ARCH)
    assert nr is not None
    words = {0: nr, 4: AUDIT_ARCH[ARCH]}
    for i, value in enumerate(args):
        words[16 + 8 * i] = value & 0xFFFFFFFF
        words[20 + 8 * i] = (value >> 32) & 0xFFFFFFFF
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x06:
            return k
        if op == 0x20:
            acc, pc = words.get(k, 0), pc + 1
            continue
        holds = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
        pc += 1 + (jt if holds else jf)


# --- the assembler --------------------------------------------------------------------------


def test_conditions_on_any_argument_any_one_of_which_holds() -> None:
    flt = seccomp.Filter(EPERM)
    flt.add(["ioctl"], ALLOW, when=seccomp.any_of(1, "eq", [0x5401, 0x541B]))
    flt.add(["socketpair"], EACCES, when=[seccomp.arg(0, "ne", 1), seccomp.arg(1, "set", 0xE)])
    flt.add(["socketpair"], ALLOW)
    flt.add(["clone"], ALLOW, when=seccomp.arg(0, "clear", 0x10000))
    flt.add(["mmap"], ALLOW, when=seccomp.arg(5, "eq", 7))
    assert decide(flt, "ioctl", 3, 0x5401) == ALLOW
    assert decide(flt, "ioctl", 3, 0x541B) == ALLOW
    assert decide(flt, "ioctl", 3, 0x5413) == EPERM
    assert decide(flt, "ioctl", 0x5401, 0) == EPERM  # the request is argument 1, not 0
    assert decide(flt, "ioctl", 3, 0x1_0000_5401) == ALLOW  # low 32 bits: an unsigned int
    assert decide(flt, "socketpair", 1, 1) == ALLOW  # Unix stream
    assert decide(flt, "socketpair", 1, 2) == EACCES  # Unix datagram
    assert decide(flt, "socketpair", 2, 1) == EACCES  # another family
    assert decide(flt, "clone", 0x10000) == EPERM and decide(flt, "clone", 0x11) == ALLOW
    assert decide(flt, "mmap", 0, 0, 0, 0, 0, 7) == ALLOW
    assert decide(flt, "mmap", 0, 0, 0, 0, 0, 8) == EPERM
    assert decide(flt, "read", 0) == EPERM  # the default


def test_every_rule_returns_in_place_and_the_pid_is_patched() -> None:
    flt = seccomp.Filter(EPERM)
    own = seccomp.any_of(0, "eq", [0, seccomp.SELF_PID, seccomp.SELF_GROUP])
    flt.add(["kill"], ALLOW, when=own)
    for _ in range(300):
        flt.add(["read"], ALLOW, when=seccomp.any_of(0, "eq", [1, 2, 3]))
    code, patches = seccomp.assemble(flt, ARCH)
    # No jump leaves its rule: the longest skips a rule's load, 3 tests, return and reload.
    assert max(max(jt, jf) for _, jt, jf, _ in code) == 6
    assert sorted(patches.values()) == [-1, 1]
    assert decide(flt, "kill", PID, 9) == ALLOW and decide(flt, "kill", -PID, 9) == ALLOW
    assert decide(flt, "kill", 0, 9) == ALLOW and decide(flt, "kill", PID + 1, 9) == EPERM
    assert decide(flt, "kill", -1, 9) == EPERM


def test_the_program_stays_within_bpf_maxinsns() -> None:
    flt = seccomp.Filter(EPERM)
    for _ in range(seccomp.MAX_INSNS // 2):
        flt.add(["read"], ALLOW)
    with pytest.raises(ValueError, match="BPF_MAXINSNS"):
        seccomp.assemble(flt, ARCH)


def test_conditions_are_checked_when_written() -> None:
    with pytest.raises(ValueError, match="0..5"):
        seccomp.arg(6, "eq", 0)
    with pytest.raises(ValueError, match="unknown test"):
        seccomp.arg(0, "lt", 0)
    with pytest.raises(TypeError):
        seccomp.arg(0, "eq", "0")


def test_stand_ins_are_kept_below_their_abi_only() -> None:
    flt = seccomp.Filter(ALLOW)
    flt.add(["truncate"], EACCES, until_abi=3)
    assert decide(flt, "truncate", 0, 0, abi=2) == EACCES
    assert decide(flt, "truncate", 0, 0, abi=3) == ALLOW


# --- the policies' decisions ----------------------------------------------------------------

FIRMWARE = policies.host_firmware(Path(os.path.realpath(sys.executable))).filter
QEMU = policies.qemu(sys.executable, Path(sys.executable)).filter
BUILD = policies.build([], [], []).filter
OTHER = 777


@pytest.mark.parametrize("flt", [FIRMWARE, QEMU, BUILD], ids=["firmware", "qemu", "build"])
@pytest.mark.parametrize("abi", [1, 5, 6, 7])
def test_limits_are_set_on_the_process_itself_only(flt: seccomp.Filter, abi: int) -> None:
    assert decide(flt, "prlimit64", 0, 7, abi=abi) == ALLOW
    assert decide(flt, "prlimit64", PID, 7, abi=abi) == ALLOW
    assert decide(flt, "prlimit64", OTHER, 7, abi=abi) == EPERM


@pytest.mark.parametrize("flt", [FIRMWARE, QEMU], ids=["firmware", "qemu"])
@pytest.mark.parametrize("abi", [1, 7])
def test_firmware_and_qemu_signal_only_themselves(flt: seccomp.Filter, abi: int) -> None:
    for target in (0, PID, -PID):
        assert decide(flt, "kill", target, 9, abi=abi) == ALLOW
    for target in (OTHER, -1, -OTHER):
        assert decide(flt, "kill", target, 9, abi=abi) == EPERM
    for call in ("tgkill", "rt_tgsigqueueinfo", "rt_sigqueueinfo", "tkill"):
        assert decide(flt, call, PID, PID, 9, abi=abi) == ALLOW
        assert decide(flt, call, OTHER, OTHER, 9, abi=abi) == EPERM
    assert decide(flt, "pidfd_send_signal", 3, 9, abi=abi) == EPERM
    assert decide(flt, "fcntl", 3, 8, OTHER, abi=abi) == EPERM  # F_SETOWN
    assert decide(flt, "fcntl", 3, 3, abi=abi) == ALLOW  # F_GETFL
    assert decide(flt, "ioctl", 3, 0x8901, abi=abi) == EPERM  # FIOSETOWN


def test_the_build_signals_others_only_through_landlock_scopes() -> None:
    """Below ABI 6, seccomp: itself, its group and the build's first process only. From 6
    on, Landlock's signal scope lets the build's processes signal each other (a compiler's
    raise() has its own pid, which no filter constant knows) and no one else."""
    assert decide(BUILD, "kill", OTHER, 9, abi=5) == EPERM
    assert decide(BUILD, "kill", 0, 9, abi=5) == ALLOW
    assert decide(BUILD, "tgkill", OTHER, OTHER, 6, abi=5) == EPERM
    assert decide(BUILD, "pidfd_send_signal", 3, 9, abi=5) == EPERM
    assert decide(BUILD, "fcntl", 3, 8, OTHER, abi=5) == EPERM
    assert decide(BUILD, "tgkill", OTHER, OTHER, 6, abi=6) == ALLOW


def test_the_firmware_ioctls_are_its_consoles() -> None:
    for request in policies.CONSOLE_IOCTLS.values():
        assert decide(FIRMWARE, "ioctl", 1, request) == ALLOW
    for request in (0x5413, 0x5412, 0x5402, 0x540E):  # TIOCGWINSZ, TIOCSTI, TCSETS, TIOCSCTTY
        assert decide(FIRMWARE, "ioctl", 1, request) == EPERM


def test_the_build_makes_no_socket() -> None:
    for family, kind in ((1, 1), (1, 2), (2, 1), (10, 2), (16, 3)):
        assert decide(BUILD, "socket", family, kind) == EACCES
        assert decide(BUILD, "socketpair", family, kind) == EACCES


def test_truncate_is_denied_where_landlock_lacks_the_right() -> None:
    for flt in (QEMU, BUILD):
        assert decide(flt, "truncate", 0, 0, abi=2) == EACCES
        assert decide(flt, "truncate", 0, 0, abi=landlock.TRUNCATE_ABI) == ALLOW
        assert decide(flt, "ftruncate", 3, 0, abi=2) == ALLOW  # a writable fd: Landlock's
    assert decide(FIRMWARE, "truncate", 0, 0, abi=7) == EPERM


def test_the_filters_argument_checks_are_short() -> None:
    """What a call pays: the firmware's program, and the longest path through it."""
    code, _ = seccomp.assemble(FIRMWARE, ARCH)
    assert len(code) < 250


def test_build_environment_is_an_allow_list() -> None:
    ours = {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "CC": "gcc", "CFLAGS": "-O1",
        "SOURCE_DATE_EPOCH": "1", "CMAKE_BUILD_PARALLEL_LEVEL": "2", "HOME": "/home/u",
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/b",
        "DOCKER_HOST": "unix:///run/docker.sock", "GITHUB_TOKEN": "t", "LD_PRELOAD": "/x.so",
        "MAKEFLAGS": "-j --jobserver-auth=3,4",
    }  # fmt: skip
    env = policies.build_environment(Path("/b/tmp"), ours)
    assert env == {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "CC": "gcc", "CFLAGS": "-O1",
        "SOURCE_DATE_EPOCH": "1", "CMAKE_BUILD_PARALLEL_LEVEL": "2", "TMPDIR": "/b/tmp",
    }  # fmt: skip


# --- for real: the QEMU and build policies around a hostile Python ---------------------------

_PAYLOAD = r"""
import fcntl, os, resource, signal, socket, sys
pid, victim = int(sys.argv[1]), sys.argv[2]
def attempt(name, action):
    try:
        action()
        print(name, "ESCAPED")
    except OSError:
        print(name, "denied")
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
attempt("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (9, hard)))
attempt("kill", lambda: os.kill(pid, 0))
attempt("pidfd", lambda: signal.pidfd_send_signal(os.pidfd_open(pid), 0))
attempt("truncate", lambda: os.truncate(victim, 0))
attempt("unix-socket", lambda: socket.socket(socket.AF_UNIX).close())
attempt("dgram-pair", lambda: [s.close() for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)])
r, w = os.pipe()
attempt("setown", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, pid))
"""  # noqa: E501
ATTEMPTS = ["prlimit", "kill", "pidfd", "truncate", "unix-socket", "dgram-pair", "setown"]


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[subprocess.Popen]:
    sleeper = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    try:
        yield sleeper
    finally:
        sleeper.kill()
        sleeper.wait()


def _payload(
    victim: subprocess.Popen, tmp_path: Path, confinement: Optional[sandbox.Confinement], abi: int
) -> Dict[str, str]:
    python = os.path.realpath(sys.executable)
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    nofile = resource.prlimit(victim.pid, resource.RLIMIT_NOFILE)
    prepared = None
    if confinement is not None:
        assert SUPPORT.arch is not None
        prepared = confinement.prepare(min(abi, SUPPORT.landlock_abi), SUPPORT.arch)
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", _PAYLOAD, str(victim.pid), str(target)],
            preexec_fn=prepared.apply if prepared else None,
            start_new_session=True,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        if prepared is not None:
            prepared.close()
    assert done.returncode == 0, done.stderr
    found = dict(line.split() for line in done.stdout.splitlines())
    changed = resource.prlimit(victim.pid, resource.RLIMIT_NOFILE) != nofile
    resource.prlimit(victim.pid, resource.RLIMIT_NOFILE, nofile)
    assert changed == (found["prlimit"] == "ESCAPED")
    assert (target.read_text() == "") == (found["truncate"] == "ESCAPED")
    return found


def _policy(kind: str) -> sandbox.Confinement:
    """The policy around a Python, which may also read its own installation."""
    python = os.path.realpath(sys.executable)
    if kind == "qemu":
        confinement = policies.qemu(python, Path(python))
    else:
        confinement = policies.build([python], [], [])
    confinement.ruleset.allow([os.path.realpath(sys.base_prefix)], landlock.READ)
    return confinement


def test_the_payload_escapes_unconfined(victim: subprocess.Popen, tmp_path: Path) -> None:
    found = _payload(victim, tmp_path, None, 0)
    assert found == {name: "ESCAPED" for name in ATTEMPTS}


@needs_sandbox
@pytest.mark.parametrize("abi", [2, 7])
@pytest.mark.parametrize("kind", ["qemu", "build"])
def test_qemu_and_the_build_deny_it_on_old_and_new_kernels(
    kind: str, abi: int, victim: subprocess.Popen, tmp_path: Path
) -> None:
    found = _payload(victim, tmp_path, _policy(kind), abi)
    expected = {name: "denied" for name in ATTEMPTS}
    if kind == "build" and abi >= landlock.SCOPE_ABI:
        # Naming an owner signals no one yet; the SIGIO it would bring is Landlock's to scope.
        expected["setown"] = "ESCAPED"
    assert found == expected


def test_a_confined_build_gets_the_allow_listed_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real CMake build through the project's runner: SSH_AUTH_SOCK and its kin do not
    reach it confined; with the sandbox off (the control) they do."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(p C)\n"
        'message(STATUS "seen: [$ENV{SSH_AUTH_SOCK}] [$ENV{DOCKER_HOST}] [$ENV{LC_ALL}]")\n'
        "add_executable(fw main.c)\n"
    )
    (project / "main.c").write_text("int main(void) { return 0; }\n")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/docker.sock")
    monkeypatch.setenv("LC_ALL", "C")
    seen: Dict[bool, Sequence[str]] = {}
    for confined in ([True] if SUPPORT.available else []) + [False]:
        result = cmake.build(
            project, tmp_path / f"b{confined}", firmware_name="fw", sandbox_option=confined
        )
        seen[confined] = [line for line in result.log.splitlines() if "seen:" in line]
    assert seen[False] == ["-- seen: [/tmp/agent.sock] [unix:///run/docker.sock] [C]"]
    if SUPPORT.available:
        assert seen[True] == ["-- seen: [] [] [C]"]
