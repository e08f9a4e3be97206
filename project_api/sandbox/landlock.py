"""Landlock (Linux 5.13+) through ``ctypes``: which rights this kernel knows, and a ruleset
built in the trusted parent and enforced in the child between fork and exec.

A ruleset *handles* every right the kernel's ABI knows and grants back only what its rules
name: files and directories by path (opened ``O_PATH`` in the parent, so the child does no
path look-up of its own), no TCP port at all (ABI 4+), and the scopes of ABI 6+ (no abstract
Unix socket and no signal outside the sandbox). Rights the running kernel does not know are
simply not handled, so an older kernel confines what it can; :func:`abi_version` says how much.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

# The three Landlock system calls have the same numbers on every architecture.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

# Filesystem rights, with the ABI that introduced them.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
# The ABI that brought each kind of right the rulesets handle.
TRUNCATE_ABI = 3
NET_ABI = 4
IOCTL_DEV_ABI = 5
SCOPE_ABI = 6
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
# Rights that make sense on a file (a rule on a file may grant only these).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

# Network rights (ABI 4): handled with no rule, so no TCP bind or connect at all.
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
# Scopes (ABI 6): abstract Unix sockets and signals stay inside the sandbox.
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1

# Convenient bundles.
READ = READ_FILE | READ_DIR
READ_EXECUTE = READ | EXECUTE
WRITE = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SYM
    | MAKE_FIFO
    | MAKE_SOCK
    | REFER
    | TRUNCATE
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(*args: object) -> int:
    return int(_libc.syscall(*args))


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none, disabled, or the call is filtered away)."""
    result = _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return result if result > 0 else 0


def handled_fs(abi: int) -> int:
    """Every filesystem right an ABI knows."""
    known = 0
    for since, rights in _FS_BY_ABI.items():
        if abi >= since:
            known = rights
    return known


@dataclass
class PathRule:
    path: str
    access: int


@dataclass
class Ruleset:
    """Rules to enforce: paths with their rights. Everything else handled is denied."""

    rules: List[PathRule] = field(default_factory=list)

    def allow(self, paths: Iterable[str], access: int) -> None:
        for path in paths:
            self.rules.append(PathRule(path, access))

    def describe(self) -> Dict[str, List[str]]:
        """Paths by the kind of access granted (for messages and docs)."""
        kinds: Dict[str, List[str]] = {}
        for rule in self.rules:
            kind = "write" if rule.access & WRITE_FILE else "read"
            if rule.access & EXECUTE:
                kind += "+exec"
            kinds.setdefault(kind, []).append(rule.path)
        return kinds


class LandlockError(OSError):
    pass


def build(ruleset: Ruleset, abi: int) -> int:
    """A ruleset file descriptor holding ``ruleset`` (made in the parent; the child enforces
    it with :func:`restrict_self`). Paths that do not exist are skipped."""
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, 0, 0)
    size = ctypes.sizeof(ctypes.c_uint64)
    if abi >= NET_ABI:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 2 * ctypes.sizeof(ctypes.c_uint64)
    if abi >= SCOPE_ABI:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
        size = ctypes.sizeof(_RulesetAttr)
    fd = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if fd < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        for path, access in _merged(ruleset.rules):
            _add_path_rule(fd, path, access & fs)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _merged(rules: Iterable[PathRule]) -> List[Tuple[str, int]]:
    merged: Dict[str, int] = {}
    for rule in rules:
        merged[rule.path] = merged.get(rule.path, 0) | rule.access
    return sorted(merged.items())


def _add_path_rule(ruleset_fd: int, path: str, access: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        attr = _PathBeneathAttr(access, target)
        if _syscall(_SYS_ADD_RULE, ruleset_fd, _RULE_PATH_BENEATH, ctypes.byref(attr), 0) < 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
    finally:
        os.close(target)


def restrict_self(ruleset_fd: int) -> Optional[int]:
    """Enforces the ruleset on the calling thread (the child, after PR_SET_NO_NEW_PRIVS).
    Returns None, or the errno when the kernel refused."""
    if _syscall(_SYS_RESTRICT_SELF, ruleset_fd, 0) < 0:
        return ctypes.get_errno()
    return None
