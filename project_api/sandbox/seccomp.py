"""seccomp-bpf filters through ``ctypes``: a list of rules compiled to a classic BPF program.

A :class:`Filter` has a default action and ordered rules. A rule names a system call (see
:mod:`.syscalls`), an action and optionally conditions on its arguments (:func:`arg`), any
one of which must hold. A condition compares the LOW 32 BITS of one argument (index 0..5):
that is all the kernel reads of an ``int``, ``pid_t`` or ``unsigned int`` argument (a pid, a
signal, a socket domain or type, an ``ioctl`` request, an ``fcntl`` command), so the upper
half cannot fool it there; it is not meant for pointers or 64-bit sizes.

The program checks the architecture first (another one, or an x32 call on x86_64, is
refused), then tries the rules in order; the first whose call and conditions match decides.
Each rule returns in place, so no jump is longer than its own conditions however long the
list. A rule may stand in for a Landlock right that older kernels lack (``until_abi``): it
is in force only where the kernel's Landlock ABI is below that one (:meth:`Filter.for_abi`).
"""

from __future__ import annotations

import ctypes
import errno
import platform
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

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

# Offsets in struct seccomp_data: the call's number, the architecture, the instruction
# pointer, then six 64-bit arguments in the machine's byte order (x86_64 and aarch64 are
# little-endian: an argument's low half comes first).
_NR = 0
_ARCH = 4
_ARGS = 16
ARG_COUNT = 6
MAX_INSNS = 4096  # the kernel's BPF_MAXINSNS

# Condition values patched in the child, whose pid is known only after fork: its own pid,
# and its own process group as kill(2) names it (-pid: every confined child is started in a
# new session, so it leads its group).
SELF_PID = object()
SELF_GROUP = object()

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
# test: (jump instruction, whether its "true" branch means the condition holds)
_TESTS = {"eq": (_JEQ_K, True), "ne": (_JEQ_K, False), "set": (_JSET_K, True),
          "clear": (_JSET_K, False)}  # fmt: skip

Insn = Tuple[int, int, int, int]


def allow() -> int:
    return _RET_ALLOW


def fail(code: int = errno.EPERM) -> int:
    """The call fails with ``code`` (the program sees an ordinary error, not a kill)."""
    return _RET_ERRNO | (code & 0xFFFF)


@dataclass(frozen=True)
class Arg:
    """A condition on the low 32 bits of argument ``index``: ``eq``/``ne`` ``value``, or
    ``set``/``clear``: some bit / no bit of the mask ``value`` set. ``value`` may be
    :data:`SELF_PID` or :data:`SELF_GROUP`."""

    index: int
    test: str
    value: object


def arg(index: int, test: str, value: object) -> Arg:
    if not 0 <= index < ARG_COUNT:
        raise ValueError(f"a system call has arguments 0..{ARG_COUNT - 1}, not {index}")
    if test not in _TESTS:
        raise ValueError(f"unknown test {test!r}")
    if value is not SELF_PID and value is not SELF_GROUP and not isinstance(value, int):
        raise TypeError(f"a condition compares with an int, not {value!r}")
    return Arg(index, test, value)


def any_of(index: int, test: str, values: Sequence[object]) -> Tuple[Arg, ...]:
    """Conditions of which one holds when argument ``index`` passes ``test`` with any of
    ``values`` (``eq`` a or ``eq`` b ...)."""
    return tuple(arg(index, test, value) for value in values)


When = Union[None, Arg, Sequence[Arg]]


@dataclass(frozen=True)
class Rule:
    """``syscall`` gets ``action`` when any of ``when`` holds (always, when there is none);
    on kernels whose Landlock ABI is below ``until_abi`` only, when that is given."""

    syscall: str
    action: int
    when: Tuple[Arg, ...] = ()
    until_abi: Optional[int] = None


@dataclass
class Filter:
    default: int
    rules: List[Rule] = field(default_factory=list)

    def add(
        self, names: List[str], action: int, when: When = None, until_abi: Optional[int] = None
    ) -> None:
        conditions = (when,) if isinstance(when, Arg) else tuple(when or ())
        for name in names:
            if name not in NUMBERS:
                raise KeyError(f"no system call table entry for {name!r}")
            self.rules.append(Rule(name, action, conditions, until_abi))

    def for_abi(self, abi: int) -> Filter:
        """The rules in force on a kernel whose Landlock ABI is ``abi``."""
        kept = [r for r in self.rules if r.until_abi is None or abi < r.until_abi]
        return Filter(self.default, kept)


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


def assemble(flt: Filter, arch: str) -> Tuple[List[Insn], Dict[int, int]]:
    """The BPF instructions (code, jt, jf, k) of every rule of ``flt`` for ``arch`` (see
    :meth:`Filter.for_abi` to leave out the stand-ins a kernel does not need), and the
    indices of those to patch with the child's pid, with the sign it takes there
    (:data:`SELF_PID` 1, :data:`SELF_GROUP` -1; 0 until patched)."""
    patches: Dict[int, int] = {}
    code: List[Insn] = [
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
        if not rule.when:
            code += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, rule.action)]
            continue
        tests = _conditions(rule.when, len(code) + 1, patches)
        # Another call: past the tests, the return and the reload of the number.
        code.append((_JEQ_K, 0, len(tests) + 2, nr))
        code += tests
        code += [(_RET_K, 0, 0, rule.action), (_LD_W_ABS, 0, 0, _NR)]
    code.append((_RET_K, 0, 0, flt.default))
    if len(code) > MAX_INSNS:
        raise ValueError("seccomp filter longer than BPF_MAXINSNS")
    return code, patches


def _conditions(conditions: Tuple[Arg, ...], start: int, patches: Dict[int, int]) -> List[Insn]:
    """The tests of ``conditions`` (the first at index ``start`` of the program): the first
    that holds jumps to the instruction right after them (the rule's return); when none
    holds, the last one jumps over it."""
    body: List[Insn] = []
    loaded: Optional[int] = None
    for condition in conditions:
        if condition.index != loaded:
            body.append((_LD_W_ABS, 0, 0, _ARGS + 8 * condition.index))
            loaded = condition.index
        value = condition.value
        if value is SELF_PID or value is SELF_GROUP:
            patches[start + len(body)] = 1 if value is SELF_PID else -1
            value = 0
        assert isinstance(value, int)
        body.append((_TESTS[condition.test][0], 0, 0, value & 0xFFFFFFFF))
    tests = [i for i, insn in enumerate(body) if insn[0] != _LD_W_ABS]
    holds = [_TESTS[c.test][1] for c in conditions]
    for i, taken_holds in zip(tests, holds):
        to_return = len(body) - 1 - i
        to_next = to_return + 1 if i == tests[-1] else 0
        if to_next > 255:
            raise ValueError("too many conditions in one seccomp rule")
        code, _, _, k = body[i]
        body[i] = (code, to_return, to_next, k) if taken_holds else (code, to_next, to_return, k)
    return body


class Compiled:
    """A filter assembled in the parent, ready for :meth:`install` in the child (which must
    allocate nothing it could fail on between fork and exec)."""

    def __init__(self, flt: Filter, arch: str) -> None:
        insns, patches = assemble(flt, arch)
        self._patches = sorted(patches.items())
        self._syscall = _SYS_SECCOMP[arch]
        self._array = (_Insn * len(insns))(*[_Insn(*insn) for insn in insns])
        self._program = _Program(len(insns), ctypes.cast(self._array, ctypes.POINTER(_Insn)))
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.length = len(insns)

    def install(self) -> Optional[int]:
        """Installs the filter on the calling thread (PR_SET_NO_NEW_PRIVS must be set).
        Returns None, or the errno when the kernel refused."""
        pid = self._libc.getpid()
        for index, sign in self._patches:
            self._array[index].k = (sign * pid) & 0xFFFFFFFF
        program = ctypes.byref(self._program)
        for flags in (_SECCOMP_FILTER_FLAG_SPEC_ALLOW, 0):  # the flag is unknown before 5.7
            if self._libc.syscall(self._syscall, _SECCOMP_SET_MODE_FILTER, flags, program) == 0:
                return None
            err = ctypes.get_errno()
            if err != errno.EINVAL:
                return err
        return err
