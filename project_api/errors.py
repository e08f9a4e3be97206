"""The error types of mlf-project-api.

Every error the package raises on purpose derives from :class:`MlfProjectError`, so a caller
(and the CLI, which turns them into a one-line message and exit status 2) can catch one type.
The tree follows the pipeline: read, resolve, generate, build, run/transport, serve.
"""

from __future__ import annotations

from typing import Optional


class MlfProjectError(Exception):
    """Base of every error raised on purpose by this package.

    ``hint`` is an optional second sentence telling the user what to do about it.
    """

    def __init__(self, message: str, *, hint: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


# --- read -------------------------------------------------------------------------------


class ArchiveError(MlfProjectError):
    """The container itself is unusable: missing, not a tar, unreadable."""


class UnsafeArchiveError(ArchiveError):
    """The archive holds a member that would escape or abuse the extraction directory."""


class ArchiveLimitError(UnsafeArchiveError):
    """The archive, or one of its members, is larger than the reader's cap for it."""


class NotAnMlfError(ArchiveError):
    """A TVM artifact that is not a Model Library Format archive (e.g. export_library output).

    ``modules`` lists what was recognised inside it (type keys and import tree).
    """

    def __init__(
        self, message: str, *, hint: Optional[str] = None, modules: Optional[list] = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.modules = modules or []


class ValidationError(MlfProjectError):
    """A member of the archive breaks a rule of the format.

    ``member`` names the archive member, ``location`` the JSON path (``nodes[3].inputs[0]``)
    or byte offset (``offset 120``) inside it. Both appear in the message.
    """

    def __init__(
        self,
        member: str,
        location: str,
        problem: str,
        *,
        hint: Optional[str] = None,
    ) -> None:
        where = f"{member}: {location}: " if location else f"{member}: "
        super().__init__(where + problem, hint=hint)
        self.member = member
        self.location = location
        self.problem = problem


class MetadataError(ValidationError):
    """metadata.json is missing keys, has the wrong types or an unknown version."""


class GraphError(ValidationError):
    """graph.json (or ``<mod>.graph``) is structurally invalid."""


class ParamsError(ValidationError):
    """A params file is malformed or disagrees with its graph."""


class AotError(ValidationError):
    """An AOT model's entry point (header, ``tvmgen_<mod>_run``, ``__tvm_main__``) is missing,
    disagrees with metadata.json, or uses an interface option this tool cannot drive."""


class UnsupportedModelError(MlfProjectError):
    """The model is valid but this operation cannot handle it (AOT or operator-style archive,
    unknown model name in a multi-model archive, ...)."""


# --- compile ----------------------------------------------------------------------------


class CompileError(MlfProjectError):
    """A ``.tflite`` cannot be compiled: unreadable, corrupt or hostile, beyond the caps, or
    using what ``compile`` does not support (the message names the operator and its index)."""


# --- resolve ----------------------------------------------------------------------------


class DependencyError(MlfProjectError):
    """An external dependency cannot be resolved, is hostile, or conflicts with another."""


# --- generate ---------------------------------------------------------------------------


class BoardError(MlfProjectError):
    """A board description is unknown or invalid."""


class FitError(MlfProjectError):
    """The model does not fit the board's memory (the message gives the numbers)."""


class GenerateError(MlfProjectError):
    """A project cannot be generated (bad options, unusable project directory, ...)."""


# --- build / flash ----------------------------------------------------------------------


class BuildError(MlfProjectError):
    """CMake configuration or compilation failed; ``log`` holds the tail of the output."""

    def __init__(self, message: str, *, hint: Optional[str] = None, log: str = "") -> None:
        super().__init__(message, hint=hint)
        self.log = log


class SandboxError(MlfProjectError):
    """The model's code cannot be confined here (no Landlock or seccomp), or confining a
    child failed; the message names the opt-out."""


class FlashError(MlfProjectError):
    """The firmware could not be loaded or started on its target."""


# --- run / transport --------------------------------------------------------------------


class TransportError(MlfProjectError):
    """The byte link to the device failed."""


class TransportTimeoutError(TransportError):
    """No (complete) answer arrived within the time-out."""


class TransportClosedError(TransportError):
    """The link is closed: the device process exited, the port vanished, or close was called."""


class ProtocolError(TransportError):
    """The device sent bytes that do not follow the device protocol."""


class InputError(MlfProjectError, ValueError):
    """Inputs handed to a model do not match it (unknown or missing name, shape, dtype)."""


class DeviceError(MlfProjectError):
    """The device answered with an error code (``code``; ``node`` for a failing operator)."""

    def __init__(
        self,
        message: str,
        *,
        code: int = 0,
        node: Optional[int] = None,
        hint: Optional[str] = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.node = node


# --- serve ------------------------------------------------------------------------------


class ProjectApiError(MlfProjectError):
    """A Project API (JSON-RPC) call failed; ``code`` is the JSON-RPC error code."""

    def __init__(
        self, message: str, *, code: int = -32000, data: object = None, hint: Optional[str] = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.data = data


def describe_exit_status(status: int) -> str:
    """A firmware process's end in words: its exit status, or the signal that killed it."""
    if status < 0:
        import signal

        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"the device process was killed by {name}"
    return f"the device process exited with status {status}"
