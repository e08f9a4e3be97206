"""What each kind of child may touch: the host firmware, QEMU, and the build.

The model's C is untrusted code (docs/security.md). It runs inside the host firmware; it runs
inside a QEMU guest, whose semihosting calls QEMU answers on the host; and at build time the
compiler reads whatever it names (``#include "/abs/path"``, ``.incbin``). Each policy grants
the least that child needs to do its job and nothing of the user's files:

- **host firmware**: read and execute its own binary (and, when dynamically linked, its
  loader and the C library's directories), read and write its own pty; an allow-list of
  system calls (no socket, no fork/clone, no ptrace, no truncate), ``ioctl`` only with the
  requests its console makes, signals and ``prlimit64`` only to itself; no TCP; no file may
  grow (``RLIMIT_FSIZE`` 0), no core, bounded memory and CPU time;
- **QEMU**: read and execute the emulator and its libraries, read its data and the
  firmware; write nothing (its console is a descriptor it inherits); no socket, no new
  process, no signal, ``prlimit64`` or ptrace outside itself — so semihosting's file calls
  fail inside the guest while its console output and exit status still work;
- **build** (CMake, Ninja and every compiler they start): read and execute what its tools
  say they use (:mod:`.toolchain`), read the generated project and the shared runtime cache,
  write only the build directory (``TMPDIR`` points there); no socket of any family,
  ``prlimit64`` on itself only, and an environment of :func:`build_environment` only.

Where the kernel's Landlock ABI lacks a right, the filters deny in its place what seccomp
can see (:data:`STAND_INS`, :func:`stand_ins`): ``truncate(2)`` below ABI 3; sockets (denied
on every ABI) below 4; device ``ioctl``s (the firmware's allow-list, on every ABI) below 5;
signals and SIGIO to other processes below 6.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import struct
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional

from . import landlock, seccomp, toolchain
from .confine import Confinement

# Where a dynamically linked program's libraries live, and the loader's cache.
LIBRARY_DIRS = ("/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32")
LOADER_FILES = ("/etc/ld.so.cache",)

# Host firmware: the resource limits of a program that computes and talks over its pty.
FIRMWARE_ADDRESS_SPACE = 4 << 30
FIRMWARE_CPU_SECONDS = 3600

# What a firmware (our runtime, the C library's start-up and exit, TVM's generated C) calls.
_FIRMWARE_SYSCALLS = [
    "read", "write", "readv", "writev", "pread64", "close", "fstat", "newfstatat", "statx",
    "lseek", "mmap", "mprotect", "munmap", "mremap", "madvise", "brk", "rt_sigaction",
    "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "ppoll", "poll", "pselect6",
    "select", "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday",
    "time", "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "exit",
    "exit_group", "futex", "set_tid_address", "set_robust_list", "rseq", "getrandom", "uname",
    "arch_prctl", "openat", "open", "faccessat", "faccessat2", "access", "readlinkat",
    "readlink", "dup", "dup3", "dup2", "sched_yield", "sched_getaffinity", "restart_syscall",
    "getcwd",
    # Python's child closes the descriptors it does not pass on after this filter is in.
    "close_range",
    # The exec that starts the firmware itself: Landlock lets it execute its own binary only.
    "execve",
]  # fmt: skip
# The ioctl requests of the host firmware's console (crt/platform/host, measured with strace
# on a run): ptsname's TIOCGPTN, FIONREAD while it waits at exit for the host to read its
# last bytes, and TCGETS (isatty: the C library asks it when it buffers a character device).
# The same numbers on x86_64 and aarch64 (asm-generic/ioctls.h).
CONSOLE_IOCTLS = {"TCGETS": 0x5401, "FIONREAD": 0x541B, "TIOCGPTN": 0x80045430}
# Ways to have SIGIO/SIGURG sent to another process (or group) when a descriptor is ready.
_F_SETOWN = 8
_F_SETOWN_EX = 15
_FIOSETOWN = 0x8901
_SIOCSPGRP = 0x8902
# Calls that signal a process named by its pid (0 or -pgid: a group) or thread group id.
_SIGNALS_BY_PID = ["kill"]
_SIGNALS_BY_TGID = ["tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"]
_SIGNALS = [*_SIGNALS_BY_PID, *_SIGNALS_BY_TGID, "pidfd_send_signal"]

# Calls no confined child has any use for: privileges, the kernel, other processes' memory,
# mounts and namespaces, and interfaces that go around the rest of the filter.
_NEVER = [
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
    "kcmp", "mount", "umount2", "pivot_root", "chroot", "move_mount", "fsopen", "fsmount",
    "fspick", "open_tree", "mount_setattr", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "setns", "unshare", "bpf",
    "perf_event_open", "keyctl", "add_key", "request_key", "open_by_handle_at",
    "name_to_handle_at", "iopl", "ioperm", "quotactl", "quotactl_fd", "acct", "settimeofday",
    "clock_settime", "adjtimex", "clock_adjtime", "syslog", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "personality", "lookup_dcookie", "vhangup",
    "nfsservctl", "uselib", "memfd_secret",
]  # fmt: skip
# (setuid and its kin stay allowed: make calls setresuid(-1, uid, -1) before each command,
# and with no_new_privs and Landlock in force changing identity opens nothing.)

_AF_UNIX = 1
_SOCK_TYPE_NOT_STREAM = 0xE  # bits of a socket type other than SOCK_STREAM's (1)
_CLONE_THREAD = 0x00010000

# What a kernel whose Landlock lacks a right gets in its place (the rules tagged with that
# ABI below): (ABI, the right, what seccomp denies instead).
STAND_INS = (
    (landlock.TRUNCATE_ABI, "truncate", "truncate(2)"),
    (landlock.NET_ABI, "TCP", "every socket"),
    (landlock.IOCTL_DEV_ABI, "device ioctls", "ioctls the firmware's console does not make"),
    (landlock.SCOPE_ABI, "scopes", "signals and SIGIO to other processes, abstract sockets"),
)

# The only variables a confined build gets from ours (the rest, e.g. SSH_AUTH_SOCK,
# DBUS_SESSION_BUS_ADDRESS, DOCKER_HOST or tokens, never reaches it): the program path, the
# locale, reproducible dates, the compilers and their flags, and CMake's parallelism.
BUILD_ENVIRONMENT = (
    "PATH", "LANG", "LANGUAGE", "SOURCE_DATE_EPOCH", "CC", "CXX", "ASM", "CFLAGS", "CXXFLAGS",
    "ASMFLAGS", "CPPFLAGS", "LDFLAGS", "CMAKE_BUILD_PARALLEL_LEVEL",
)  # fmt: skip
BUILD_ENVIRONMENT_PREFIXES = ("LC_",)


def build_environment(
    tmpdir: Optional[Path] = None, source: Optional[Mapping[str, str]] = None
) -> Dict[str, str]:
    """The environment of a confined build: the variables of :data:`BUILD_ENVIRONMENT` (and
    ``LC_*``) found in ``source`` (default: ours), and ``TMPDIR`` set to ``tmpdir``."""
    source = os.environ if source is None else source
    env = {
        name: value
        for name, value in source.items()
        if name in BUILD_ENVIRONMENT or name.startswith(BUILD_ENVIRONMENT_PREFIXES)
    }
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def stand_ins(abi: int) -> str:
    """What a kernel of Landlock ``abi`` lacks and what seccomp denies in its place, in one
    phrase (``lacks ...``); empty when it lacks nothing the policies use."""
    lacking = [(since, right, instead) for since, right, instead in STAND_INS if abi < since]
    if not lacking:
        return ""
    rights = ", ".join(f"{right} ({'ABI ' if not i else ''}{since})"
                       for i, (since, right, _) in enumerate(lacking))  # fmt: skip
    instead = "; ".join(denied for _, _, denied in lacking)
    return f"lacks {rights}; seccomp denies instead: {instead}. Nothing is left unenforced"


def host_firmware(executable: Path, pty: Optional[str] = None) -> Confinement:
    """A firmware built for the ``host`` board, its console on ``pty`` (the slave path,
    which it reopens at exit to see the host has read its last bytes)."""
    confinement = Confinement("the host firmware")
    binary = os.path.realpath(executable)
    rules = confinement.ruleset
    rules.allow([binary], landlock.READ_FILE | landlock.EXECUTE)
    _allow_loader(rules, binary)
    if pty:
        rules.allow([pty], landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV)
    flt = seccomp.Filter(seccomp.fail(errno.EPERM))
    flt.add(_FIRMWARE_SYSCALLS, seccomp.allow())
    flt.add(["ioctl"], seccomp.allow(), when=seccomp.any_of(1, "eq", list(CONSOLE_IOCTLS.values())))
    _no_sigio(flt)
    flt.add(["fcntl"], seccomp.allow())
    _own_process_only(flt)
    confinement.filter = flt
    confinement.rlimits = {
        resource.RLIMIT_AS: (FIRMWARE_ADDRESS_SPACE, FIRMWARE_ADDRESS_SPACE),
        resource.RLIMIT_CPU: (FIRMWARE_CPU_SECONDS, FIRMWARE_CPU_SECONDS),
        resource.RLIMIT_FSIZE: (0, 0),
        resource.RLIMIT_CORE: (0, 0),
    }
    return confinement


def qemu(binary: str, firmware: Path) -> Confinement:
    """QEMU running ``firmware``; its console and any output file are descriptors it
    inherits, so it opens nothing for writing."""
    confinement = Confinement("QEMU")
    real = os.path.realpath(shutil.which(binary) or binary)
    rules = confinement.ruleset
    rules.allow([real], landlock.READ_FILE | landlock.EXECUTE)
    _allow_loader(rules, real)
    rules.allow([os.path.realpath(firmware)], landlock.READ_FILE)
    rules.allow(_existing(_qemu_data_dirs(real)), landlock.READ)
    rules.allow(["/dev/urandom", "/dev/random"], landlock.READ_FILE)
    flt = _denying_child(seccomp.Filter(seccomp.allow()))
    flt.add(["socket"], seccomp.fail(errno.EACCES))
    # A connected pair of stream sockets reaches no one; a datagram one could sendto() any
    # Unix socket of the user's.
    not_a_stream_pair = [
        seccomp.arg(0, "ne", _AF_UNIX),
        seccomp.arg(1, "set", _SOCK_TYPE_NOT_STREAM),
    ]
    flt.add(["socketpair"], seccomp.fail(errno.EACCES), when=not_a_stream_pair)
    _own_process_only(flt)
    _no_sigio(flt)
    flt.add(["truncate"], seccomp.fail(errno.EACCES), until_abi=landlock.TRUNCATE_ABI)
    confinement.filter = flt
    confinement.rlimits = {resource.RLIMIT_CORE: (0, 0)}
    return confinement


def build(
    tools: Iterable[str],
    read_dirs: Iterable[Path],
    write_dirs: Iterable[Path],
) -> Confinement:
    """CMake, its generator and compilers: ``tools`` (programs by path or name, chosen by the
    user or the board: they are asked unconfined) give what the build may read and execute
    (:func:`toolchain.scope`), ``read_dirs`` what the build reads, ``write_dirs`` where it
    writes."""
    confinement = Confinement("the build")
    rules = confinement.ruleset
    tool_scope = toolchain.scope(tools)
    rules.allow([*tool_scope.programs, *tool_scope.files], landlock.READ_EXECUTE)
    rules.allow(tool_scope.data, landlock.READ)
    rules.allow(_existing(LIBRARY_DIRS), landlock.READ_EXECUTE)
    rules.allow(_existing(LOADER_FILES), landlock.READ_FILE)
    # Looked up when the ruleset is made for each process (a build directory is made, or
    # made again, just before CMake runs in it).
    rules.allow([str(p) for p in read_dirs], landlock.READ)
    rules.allow([str(p) for p in write_dirs], landlock.READ | landlock.WRITE)
    rules.allow(["/dev/null"], landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE)
    rules.allow(["/dev/urandom"], landlock.READ_FILE)
    flt = seccomp.Filter(seccomp.allow())
    flt.add(_NEVER, seccomp.fail(errno.EPERM))
    # Neither CMake, Ninja, Make (its jobserver is a pipe or a fifo) nor GCC makes a socket.
    flt.add(["socket", "socketpair"], seccomp.fail(errno.EACCES))
    # The build is many processes: a pid rule cannot tell its own from the user's, so with
    # Landlock's signal scope (ABI 6) they signal each other freely and no one else, and
    # below it seccomp lets each signal only itself, its process group and the build's
    # first process (no normal, failing or timed-out build signals another: bench/README.md).
    _own_process_only(flt, signals_until=landlock.SCOPE_ABI)
    _no_sigio(flt, until_abi=landlock.SCOPE_ABI)
    flt.add(["truncate"], seccomp.fail(errno.EACCES), until_abi=landlock.TRUNCATE_ABI)
    confinement.filter = flt
    confinement.rlimits = {resource.RLIMIT_CORE: (0, 0)}
    return confinement


def _own_process_only(flt: seccomp.Filter, signals_until: Optional[int] = None) -> None:
    """``prlimit64`` and signals for the calling process only (signals: on kernels whose
    Landlock ABI is below ``signals_until``, when given). prlimit64's pid 0 is the caller;
    kill's 0 is the caller's process group and -pid its own group, which holds only the
    confined child and what it starts (a new session). tkill's tid can be told to be ours
    only where it is our pid (the main thread); tgkill's and rt_tgsigqueueinfo's tgid, and
    rt_sigqueueinfo's pid, must be ours. pidfd_send_signal names its target by a descriptor,
    which a filter cannot see through: denied."""
    deny = seccomp.fail(errno.EPERM)
    flt.add(["prlimit64"], seccomp.allow(), when=seccomp.any_of(0, "eq", [0, seccomp.SELF_PID]))
    flt.add(["prlimit64"], deny)
    own_group = seccomp.any_of(0, "eq", [0, seccomp.SELF_PID, seccomp.SELF_GROUP])
    flt.add(_SIGNALS_BY_PID, seccomp.allow(), when=own_group, until_abi=signals_until)
    flt.add(_SIGNALS_BY_TGID, seccomp.allow(), when=seccomp.arg(0, "eq", seccomp.SELF_PID),
            until_abi=signals_until)  # fmt: skip
    flt.add(_SIGNALS, deny, until_abi=signals_until)


def _no_sigio(flt: seccomp.Filter, until_abi: Optional[int] = None) -> None:
    """No descriptor may name an owner to signal when it is ready (``F_SETOWN``,
    ``FIOSETOWN``): with ``F_SETSIG`` that would be any signal to any process of the user's."""
    deny = seccomp.fail(errno.EPERM)
    flt.add(["fcntl"], deny, when=seccomp.any_of(1, "eq", [_F_SETOWN, _F_SETOWN_EX]),
            until_abi=until_abi)  # fmt: skip
    flt.add(["ioctl"], deny, when=seccomp.any_of(1, "eq", [_FIOSETOWN, _SIOCSPGRP]),
            until_abi=until_abi)  # fmt: skip


def _denying_child(flt: seccomp.Filter) -> seccomp.Filter:
    """Adds what QEMU must not do: start processes (threads stay allowed), or anything of
    :data:`_NEVER`. ``clone3`` hides its flags from the filter, so it is reported missing and
    the C library falls back to ``clone``, whose flags the filter sees."""
    flt.add(_NEVER, seccomp.fail(errno.EPERM))
    flt.add(["fork", "vfork", "execveat"], seccomp.fail(errno.EPERM))
    flt.add(["clone"], seccomp.fail(errno.EPERM), when=seccomp.arg(0, "clear", _CLONE_THREAD))
    flt.add(["clone3"], seccomp.fail(errno.ENOSYS))
    return flt


def _allow_loader(rules: landlock.Ruleset, binary: str) -> None:
    """A dynamically linked program also needs its loader (executed by the kernel) and the
    libraries it maps; a static one needs nothing more."""
    interpreter = elf_interpreter(binary)
    if interpreter is None:
        return
    rules.allow([os.path.realpath(interpreter)], landlock.READ_FILE | landlock.EXECUTE)
    rules.allow(_existing(LIBRARY_DIRS), landlock.READ)
    rules.allow(_existing(LOADER_FILES), landlock.READ_FILE)


def elf_interpreter(path: str) -> Optional[str]:
    """The ``PT_INTERP`` of a 64- or 32-bit little-endian ELF file; None for a static one
    (or what is not an ELF file)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            if len(header) < 52 or header[:4] != b"\x7fELF" or header[5] != 1:
                return None
            wide = header[4] == 2
            if wide:
                (phoff,) = struct.unpack_from("<Q", header, 32)
                entsize, count = struct.unpack_from("<HH", header, 54)
            else:
                (phoff,) = struct.unpack_from("<I", header, 28)
                entsize, count = struct.unpack_from("<HH", header, 42)
            for index in range(min(count, 256)):
                handle.seek(phoff + index * entsize)
                entry = handle.read(entsize)
                if len(entry) < (56 if wide else 32):
                    return None
                if struct.unpack_from("<I", entry, 0)[0] != 3:  # PT_INTERP
                    continue
                if wide:
                    (offset,) = struct.unpack_from("<Q", entry, 8)
                    (size,) = struct.unpack_from("<Q", entry, 32)
                else:
                    (offset,) = struct.unpack_from("<I", entry, 4)
                    (size,) = struct.unpack_from("<I", entry, 16)
                handle.seek(offset)
                return handle.read(min(size, 4096)).split(b"\0", 1)[0].decode()
    except (OSError, UnicodeDecodeError, struct.error):
        return None
    return None


def _qemu_data_dirs(binary: str) -> List[str]:
    prefix = os.path.dirname(os.path.dirname(binary))
    return [os.path.join(prefix, "share", "qemu"), os.path.join(prefix, "share", "seabios")]


def _existing(paths: Iterable[str]) -> List[str]:
    return [p for p in paths if os.path.exists(p)]
