"""Confining the model's code: the host firmware, QEMU and the build (docs/security.md).

The trusted parent prepares a :class:`~.confine.Confinement` (:mod:`.policies` says what
each kind of child may touch) and applies it in the child between fork and exec, so nothing
of the model runs unconfined, not even its constructors: ``PR_SET_NO_NEW_PRIVS``, Landlock
(:mod:`.landlock`), resource limits, then a seccomp filter (:mod:`.seccomp`).

Confinement is on by default and needs Landlock and seccomp on Linux x86_64 or aarch64.
Where this machine lacks them, :func:`prepare` refuses in one line naming the opt-out:
``--no-sandbox``, ``MLF_PROJECT_SANDBOX=off`` or the Project API option ``sandbox=false``.
Opting out runs unconfined and says so in one warning line. Where the kernel's Landlock is
older than the rights the policies use, the first confined child of a process says in one
line what seccomp denies in their place (:func:`.policies.stand_ins`).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from typing import Callable, Optional

from ..coercion import OFF_WORDS
from ..errors import SandboxError
from . import landlock, policies, seccomp
from .confine import OPT_OUT, Confinement, Prepared

__all__ = [
    "ENV",
    "OPT_OUT",
    "Confinement",
    "Prepared",
    "Support",
    "enabled",
    "prepare",
    "support",
]

ENV = "MLF_PROJECT_SANDBOX"
# Landlock ABI from which TCP bind/connect are denied by the kernel too (seccomp denies
# network sockets on every ABI).
NET_ABI = landlock.NET_ABI
SCOPE_ABI = landlock.SCOPE_ABI


@dataclass(frozen=True)
class Support:
    """What confinement this machine offers."""

    landlock_abi: int
    arch: Optional[str]
    reason: str = ""  # why it offers none, when it does not

    @property
    def available(self) -> bool:
        return not self.reason

    def describe(self) -> str:
        """One line for ``--version`` and ``boards``."""
        if not self.available:
            return f"sandbox: unavailable ({self.reason})"
        extras = []
        if self.landlock_abi >= NET_ABI:
            extras.append("TCP denied")
        if self.landlock_abi >= SCOPE_ABI:
            extras.append("signal and abstract-socket scopes")
        detail = f" ({', '.join(extras)})" if extras else ""
        line = (
            f"sandbox: Landlock ABI {self.landlock_abi}{detail} + seccomp ({self.arch}) "
            "around builds, host firmware and QEMU"
        )
        lacking = policies.stand_ins(self.landlock_abi)
        return f"{line}; {lacking}" if lacking else line


@functools.lru_cache(maxsize=1)
def support() -> Support:
    """Detected once per process."""
    if not sys.platform.startswith("linux"):
        return Support(0, None, f"not Linux ({sys.platform})")
    arch = seccomp.machine()
    if arch is None:
        return Support(0, None, "no seccomp table for this CPU architecture")
    abi = landlock.abi_version()
    if abi == 0:
        return Support(0, arch, "this kernel offers no Landlock (Linux 5.13+, enabled in lsm=)")
    return Support(abi, arch)


def enabled(option: Optional[bool] = None) -> bool:
    """Whether children are confined: the option ``sandbox`` when given (True/False), else
    ``$MLF_PROJECT_SANDBOX`` (``off`` opts out), else yes."""
    if option is not None:
        return bool(option)
    return os.environ.get(ENV, "").strip().lower() not in OFF_WORDS


_warned = False
_noted = False


def warn_unconfined() -> None:
    """The one warning line of a process that runs the model's code unconfined."""
    global _warned
    if _warned:
        return
    _warned = True
    line = (
        "mlf-project: warning: sandbox off: the model's C is built and run with your rights "
        "(it can read and write your files)"
    )
    print(line, file=sys.stderr)


def prepare(make: Callable[[], Confinement], option: Optional[bool] = None) -> Optional[Prepared]:
    """The confinement ``make()`` builds, prepared for a child; None when the user opted out
    (after the warning line). SandboxError, naming the opt-out, where it cannot be had."""
    if not enabled(option):
        warn_unconfined()
        return None
    found = support()
    if not found.available:
        raise SandboxError(
            f"cannot confine the model's code: {found.reason}",
            hint=f"to run it unconfined anyway: {OPT_OUT}",
        )
    confinement = make()
    assert found.arch is not None
    try:
        prepared = confinement.prepare(found.landlock_abi, found.arch)
    except OSError as err:
        raise SandboxError(
            f"cannot confine {confinement.what}: {err}",
            hint=f"to run it unconfined anyway: {OPT_OUT}",
        ) from err
    _note_older_kernel(found.landlock_abi)
    return prepared


def _note_older_kernel(abi: int) -> None:
    """The one line of a process whose first confined child runs on a kernel whose Landlock
    lacks rights the policies use: which, and what seccomp denies in their place."""
    global _noted
    lacking = policies.stand_ins(abi)
    if _noted or not lacking:
        return
    _noted = True
    print(f"mlf-project: sandbox: Landlock ABI {abi} {lacking}", file=sys.stderr)
