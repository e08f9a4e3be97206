"""Run a command as if the kernel's Landlock were of an older ABI.

The command's process gets a seccomp filter (installed between fork and exec) whose only
rule hands ``landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`` to a
supervisor thread of ours (``SECCOMP_RET_USER_NOTIF``), which answers the ABI we chose.
Every other call, the rulesets it then creates included, goes to the real kernel, which
enforces exactly the rights the command's ruleset handles for that ABI: a faithful
simulation of the older kernel's Landlock.

Why user notification: ``SECCOMP_RET_ERRNO`` cannot return a positive value, and an
``LD_PRELOAD`` shim over libc's ``syscall`` would catch only calls made through that symbol
(``project_api.sandbox.landlock`` happens to use it, through ctypes), would need a C shim
built first, and would be inherited by every child, where the confined ones may not even
read it. A notification catches the call however it is made, needs nothing built, and costs
one round trip to our thread for the one call that asks the version (Linux 5.0+).
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import subprocess
import threading
from typing import Any, List, Optional

from project_api.sandbox import seccomp

_RET_USER_NOTIF = 0x7FC00000
_FILTER_FLAG_NEW_LISTENER = 1 << 3
_SET_MODE_FILTER = 1
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_VERSION_FLAG = 1  # LANDLOCK_CREATE_RULESET_VERSION, landlock_create_ruleset's third argument
# struct seccomp_notif (80 bytes) and seccomp_notif_resp (24 bytes), and their ioctls.
_NOTIF_SIZE = 80
_RESP_SIZE = 24
_IOCTL_RECV = 0xC0502100  # _IOWR('!', 0, struct seccomp_notif)
_IOCTL_SEND = 0xC0182101  # _IOWR('!', 1, struct seccomp_notif_resp)


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn))]


class _Response(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint64),
        ("val", ctypes.c_int64),
        ("error", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    ]


def _version_filter(arch: str) -> Any:
    flt = seccomp.Filter(seccomp.allow())
    flt.add(["landlock_create_ruleset"], _RET_USER_NOTIF, when=seccomp.arg(2, "eq", _VERSION_FLAG))
    insns, _ = seccomp.assemble(flt, arch)
    return (_Insn * len(insns))(*[_Insn(*insn) for insn in insns])


class _Supervisor:
    """Answers ``abi`` to every version query of the processes behind one listener."""

    def __init__(self, abi: int) -> None:
        self.abi = abi
        self.answered = 0
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def serve(self, listener: int) -> None:
        self._thread = threading.Thread(target=self._loop, args=(listener,), daemon=True)
        self._thread.start()

    def _loop(self, listener: int) -> None:
        try:
            poller = select.poll()
            poller.register(listener, select.POLLIN)
            while not self._stop.is_set():
                events = poller.poll(200)
                if any(mask & (select.POLLHUP | select.POLLERR) for _, mask in events):
                    return  # every process behind the filter has ended
                if events:
                    self._answer(listener)
        finally:
            os.close(listener)

    def _answer(self, listener: int) -> None:
        notif = ctypes.create_string_buffer(_NOTIF_SIZE)  # zeroed, as the kernel wants it
        if self._libc.ioctl(listener, ctypes.c_ulong(_IOCTL_RECV), notif) != 0:
            return  # the caller went away meanwhile
        ident = ctypes.c_uint64.from_buffer_copy(notif.raw[:8]).value
        reply = _Response(ident, self.abi, 0, 0)
        if self._libc.ioctl(listener, ctypes.c_ulong(_IOCTL_SEND), ctypes.byref(reply)) == 0:
            self.answered += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def run(argv: List[str], abi: int, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, **kwargs)`` with ``abi`` as the kernel's Landlock ABI."""
    arch = seccomp.machine()
    assert arch is not None
    program = _version_filter(arch)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    supervisor = _Supervisor(abi)

    def install() -> None:  # pragma: no cover - runs in the child between fork and exec
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        prog = _Program(len(program), ctypes.cast(program, ctypes.POINTER(_Insn)))
        listener = libc.syscall(
            _SYS_SECCOMP[arch], _SET_MODE_FILTER, _FILTER_FLAG_NEW_LISTENER, ctypes.byref(prog)
        )
        if listener < 0:
            os._exit(98)
        socket.send_fds(theirs, [b"L"], [listener])
        os.close(listener)

    with ours, theirs:
        options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
        timeout = options.pop("timeout", 300)
        proc = subprocess.Popen(argv, preexec_fn=install, **options)
        try:
            theirs.close()
            _, fds, _, _ = socket.recv_fds(ours, 1, 1)
            assert fds, "the child did not hand its seccomp listener over"
            supervisor.serve(fds[0])
            stdout, stderr = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            supervisor.stop()
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
