"""``compile``: a ``.tflite`` into a Model Library Format archive, without TVM.

The pipeline's first stage: **compile → MLF → read → resolve → generate ...**

    tflite.read_tflite(path)       bounded FlatBuffer reader → TfliteModel
    lower.lower_model(model)       checks (one-line refusals) → modelgen Network of
                                   operators with TFLite's reference arithmetic
    modelgen                       Network → TVM-ABI C, graph.json, params → MLF (version 7)

Nothing is written until every check has passed; the archive appears at once (renamed into
place). docs/compile.md says what is supported, how exact it is, and what is refused.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Dict, Union

from ..errors import CompileError
from ..modelgen import GeneratedModel
from .lower import SUPPORTED, Rounding, lower_model, supported_text
from .tflite import TfliteModel, read_tflite

EXECUTORS = ("graph", "aot")
INTERFACES = ("c", "packed")  # AOT's interface-api
PathLike = Union[str, "os.PathLike[str]"]

__all__ = [
    "EXECUTORS",
    "INTERFACES",
    "archive_members",
    "SUPPORTED",
    "TfliteModel",
    "build_model",
    "compile_tflite",
    "is_tflite",
    "lower_to_model",
    "read_tflite",
    "supported_text",
]


def is_tflite(path: PathLike) -> bool:
    """Whether ``path`` is a file carrying TFLite's FlatBuffer identifier."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[4:8] == b"TFL3"


def build_model(
    path: PathLike,
    *,
    name: str = "default",
    executor: str = "graph",
    rounding: Rounding = None,
) -> GeneratedModel:
    """Reads, checks and lowers a ``.tflite``; nothing is written. ``rounding`` forces one
    requantization rounding on every operator (``single``, ``away`` or ``double``, TFLM's
    default), or on the operators a mapping {index: rounding} names; by default each
    operator rounds as LiteRT's reference kernel does."""
    if executor not in EXECUTORS:
        raise CompileError(f"executor {executor!r}: compile writes {', '.join(EXECUTORS)} only")
    return lower_to_model(read_tflite(path), name=name, rounding=rounding)


def lower_to_model(
    model: TfliteModel, *, name: str = "default", rounding: Rounding = None
) -> GeneratedModel:
    """A read ``.tflite`` checked and lowered (its C rendered); nothing is written."""
    network = lower_model(model, name, rounding)
    try:
        return network.build(description=f"compiled from {model.path.name}")
    except ValueError as err:  # a rule of the archive writer the checks did not foresee
        raise CompileError(f"{model.path}: {err}") from None


def archive_members(
    generated: GeneratedModel,
    executor: str = "graph",
    source: Path = Path("model.tflite"),
    interface: str = "c",
) -> Dict[str, bytes]:
    """The archive's members (version 7) for ``executor`` (and AOT's ``interface``); a rule
    of its layout that the model breaks (AOT's C names, ...) is a one-line CompileError."""
    if interface not in INTERFACES:
        raise CompileError(f"interface {interface!r}: compile writes {', '.join(INTERFACES)}")
    if interface != "c" and executor != "aot":
        raise CompileError(f"--interface {interface} is an AOT option (--executor aot)")
    try:
        return generated.members(version=7, executor=executor, interface=interface)
    except ValueError as err:
        raise CompileError(f"{source}: {err}") from None


def compile_tflite(
    path: PathLike,
    out: PathLike,
    *,
    name: str = "default",
    executor: str = "graph",
    interface: str = "c",
    force: bool = False,
) -> Path:
    """Compiles ``path`` into the MLF archive ``out`` (a version-7 tar); returns ``out``.
    ``interface`` is AOT's: ``c`` (``tvmgen_<name>_run`` over structs) or ``packed`` (TVM's
    packed calling convention through the system library)."""
    out = Path(out)
    if (out.exists() or out.is_symlink()) and not force:
        raise CompileError(f"{out} exists (--force replaces it)")
    if out.is_dir():
        raise CompileError(f"{out} is a directory")
    generated = build_model(path, name=name, executor=executor)
    data = archive_members(generated, executor, Path(path), interface)
    from ..modelgen.emit import tar_bytes

    archive = tar_bytes(data)
    directory = out.parent if str(out.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{out.name}.", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(archive)
        os.replace(temp, out)
    except OSError as err:
        raise CompileError(f"{out}: {err.strerror or err}") from None
    return out
