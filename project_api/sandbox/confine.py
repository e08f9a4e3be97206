"""A confinement made ready in the parent and applied in the child between fork and exec.

:class:`Confinement` says what one kind of child may touch (a Landlock ruleset, a seccomp
filter, resource limits); :meth:`Confinement.prepare` turns it into a :class:`Prepared`
whose :meth:`~Prepared.apply` is what the child runs after fork: a session of its own,
``PR_SET_NO_NEW_PRIVS``, then Landlock, then the limits, then seccomp — last, so that the
calls the others make are not filtered. Everything that allocates or can fail for an
ordinary reason (opening the paths, assembling the filter) happens in the parent; the child
only makes system calls.
"""

from __future__ import annotations

import ctypes
import os
import resource
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple

from . import landlock, seccomp

# How a user opts out of confinement, named by every refusal.
OPT_OUT = "--no-sandbox, MLF_PROJECT_SANDBOX=off, or option sandbox=false"
_PR_SET_NO_NEW_PRIVS = 38
_libc = ctypes.CDLL(None, use_errno=True)


class ConfinementFailed(OSError):
    """The kernel refused a step in the child (raised there; the parent sees it through
    subprocess as a failed start)."""


@dataclass
class Confinement:
    """What one kind of confined child may do. ``what`` names it in messages."""

    what: str
    ruleset: landlock.Ruleset = field(default_factory=landlock.Ruleset)
    filter: seccomp.Filter = field(default_factory=lambda: seccomp.Filter(seccomp.allow()))
    rlimits: Dict[int, Tuple[int, int]] = field(default_factory=dict)

    def prepare(self, abi: int, arch: str) -> Prepared:
        """Opens the ruleset and assembles the filter (in the parent) for a kernel of Landlock
        ``abi``: the filter's stand-ins for the rights that ABI lacks are kept, the others
        left out."""
        fd = landlock.build(self.ruleset, abi)
        try:
            compiled = seccomp.Compiled(self.filter.for_abi(abi), arch)
        except BaseException:
            os.close(fd)
            raise
        return Prepared(self.what, fd, compiled, sorted(self.rlimits.items()))


class Prepared:
    """A confinement ready to apply; close it in the parent once the child has started."""

    def __init__(
        self,
        what: str,
        ruleset_fd: int,
        compiled: seccomp.Compiled,
        rlimits: List[Tuple[int, Tuple[int, int]]],
    ) -> None:
        self.what = what
        self.ruleset_fd = ruleset_fd
        self.compiled = compiled
        self.rlimits = rlimits

    def apply(self) -> None:  # pragma: no cover - runs in the child between fork and exec
        # The child leads a session of its own (most callers start it so already): its
        # process group, which the filters let it signal (kill 0), holds only it and what
        # it starts.
        if os.getsid(0) != os.getpid():
            os.setsid()
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            _fail("PR_SET_NO_NEW_PRIVS")
        err = landlock.restrict_self(self.ruleset_fd)
        if err is not None:
            raise ConfinementFailed(err, f"landlock_restrict_self: {os.strerror(err)}")
        os.close(self.ruleset_fd)
        for limit, value in self.rlimits:
            resource.setrlimit(limit, value)
        err = self.compiled.install()
        if err is not None:
            raise ConfinementFailed(err, f"seccomp filter: {os.strerror(err)}")

    def then(self, before: Callable[[], None]) -> Callable[[], None]:
        """A ``preexec_fn`` running ``before`` (e.g. the parent-death signal), then this."""

        def preexec() -> None:  # pragma: no cover - runs in the child
            before()
            self.apply()

        return preexec

    def close(self) -> None:
        if self.ruleset_fd >= 0:
            os.close(self.ruleset_fd)
            self.ruleset_fd = -1


def _fail(step: str) -> None:  # pragma: no cover - runs in the child
    err = ctypes.get_errno()
    raise ConfinementFailed(err, f"{step}: {os.strerror(err)}")
