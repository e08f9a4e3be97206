"""seccomp-bpf filters through ``ctypes``: a list of rules compiled to a classic BPF program.

A :class:`Filter` has a default action and ordered rules, each a system call (by name, see
:mod:`.syscalls`), an action and optionally a condition on the low 32 bits of its first
argument (the kernel reads an ``int`` argument from those bits only, so that is also what a
filter must look at). The program checks the architecture first (another one, or an x32 call
on x86_64, is refused), then tries the rules in order; the first that matches decides. Each
rule returns in place, so no jump is longer than a few instructions however long the list.
"""

from __future__ import annotations

import ctypes
import errno
import platform
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .syscalls import AUDIT_ARCH, NUMBERS, number

_SECCOMP_SET_MODE_FILTER = 1
# The filtered process keeps speculative store bypass allowed (Linux 5.7+): the kernel would
# otherwise switch mitigations on for it, slowing every start and context switch, to guard
# memory the firmware shares with no one.
_SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1 << 2
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_X32_SYSCALL_BIT = 0x40000000

# Offsets in struct seccomp_data.
_NR = 0
_ARCH = 4
_ARG0_LOW = 16

# A condition value patched, in the child, to the child's own pid (known only after fork).
SELF_PID = object()

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06


def allow() -> int:
    return _RET_ALLOW


def fail(code: int = errno.EPERM) -> int:
    """The call fails with ``code`` (the program sees an ordinary error, not a kill)."""
    return _RET_ERRNO | (code & 0xFFFF)


@dataclass(frozen=True)
class Rule:
    """``syscall`` gets ``action`` — when ``when`` holds for its first argument's low 32 bits:
    ``("eq", v)``, ``("ne", v)``, ``("set", mask)`` (any bit set), ``("clear", mask)``;
    ``v`` may be :data:`SELF_PID`, the confined process's own pid."""

    syscall: str
    action: int
    when: Optional[Tuple[str, object]] = None


@dataclass
class Filter:
    default: int
    rules: List[Rule] = field(default_factory=list)

    def add(self, names: List[str], action: int, when: Optional[Tuple[str, object]] = None) -> None:
        for name in names:
            if name not in NUMBERS:
                raise KeyError(f"no system call table entry for {name!r}")
            self.rules.append(Rule(name, action, when))


def machine() -> Optional[str]:
    """This machine's architecture as the tables name it; None when it has no table."""
    name = platform.machine().lower()
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)
    return name if name in AUDIT_ARCH else None


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn))]


def assemble(flt: Filter, arch: str) -> Tuple[List[Tuple[int, int, int, int]], List[int]]:
    """The BPF instructions (code, jt, jf, k) of ``flt`` for ``arch``, and the indices of those
    whose value is :data:`SELF_PID` (0 until patched)."""
    self_pid: List[int] = []
    code: List[Tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, AUDIT_ARCH[arch]),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if arch == "x86_64":
        code += [(_JGE_K, 0, 1, _X32_SYSCALL_BIT), (_RET_K, 0, 0, fail())]
    for rule in flt.rules:
        nr = number(rule.syscall, arch)
        if nr is None:
            continue  # the architecture has no such call
        if rule.when is None:
            code += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, rule.action)]
            continue
        test, value = rule.when
        if value is SELF_PID:
            self_pid.append(len(code) + 2)
            value = 0
        assert isinstance(value, int)
        jump, hit, miss = {
            "eq": (_JEQ_K, 0, 1),
            "ne": (_JEQ_K, 1, 0),
            "set": (_JSET_K, 0, 1),
            "clear": (_JSET_K, 1, 0),
        }[test]
        code += [
            (_JEQ_K, 0, 4, nr),
            (_LD_W_ABS, 0, 0, _ARG0_LOW),
            (jump, hit, miss, value & 0xFFFFFFFF),
            (_RET_K, 0, 0, rule.action),
            (_LD_W_ABS, 0, 0, _NR),
        ]
    code.append((_RET_K, 0, 0, flt.default))
    if len(code) > 4096:
        raise ValueError("seccomp filter longer than BPF_MAXINSNS")
    return code, self_pid


class Compiled:
    """A filter assembled in the parent, ready for :meth:`install` in the child (which must
    allocate nothing it could fail on between fork and exec)."""

    def __init__(self, flt: Filter, arch: str) -> None:
        insns, self._self_pid = assemble(flt, arch)
        self._syscall = _SYS_SECCOMP[arch]
        self._array = (_Insn * len(insns))(*[_Insn(*insn) for insn in insns])
        self._program = _Program(len(insns), ctypes.cast(self._array, ctypes.POINTER(_Insn)))
        self._libc = ctypes.CDLL(None, use_errno=True)

    def install(self) -> Optional[int]:
        """Installs the filter on the calling thread (PR_SET_NO_NEW_PRIVS must be set).
        Returns None, or the errno when the kernel refused."""
        pid = self._libc.getpid()
        for index in self._self_pid:
            self._array[index].k = pid
        program = ctypes.byref(self._program)
        for flags in (_SECCOMP_FILTER_FLAG_SPEC_ALLOW, 0):  # the flag is unknown before 5.7
            if self._libc.syscall(self._syscall, _SECCOMP_SET_MODE_FILTER, flags, program) == 0:
                return None
            err = ctypes.get_errno()
            if err != errno.EINVAL:
                return err
        return err
