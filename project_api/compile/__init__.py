"""``compile``: a ``.tflite`` into a Model Library Format archive, without TVM.

The pipeline's first stage: **compile → MLF → read → resolve → generate ...**

    tflite.read_tflite(path)       bounded FlatBuffer reader → TfliteModel
    choose.choose_forms(model)     each operator's kernel form (ref, cmsis-nn) and why:
                                   forced, tuned (tune.py), a rule (rules/forms.json)
    lower.lower_model(model)       checks (one-line refusals) → modelgen Network of
                                   operators with TFLite's reference arithmetic, each in
                                   its form (cmsis_scratch.py: CMSIS-NN's scratch answers)
    modelgen                       Network → TVM-ABI C, graph.json, params → MLF (version 7)

Nothing is written until every check has passed; the archive appears at once (renamed into
place). docs/compile.md says what is supported, how exact it is, and what is refused.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ..errors import CompileError
from ..modelgen import GeneratedModel
from ..modelgen.ops import TensorType
from ..modelgen.ops.tflite_cmsis import CmsisCall
from ..modelgen.ops.tflite_tiled import TiledStage
from .choose import DEFAULT_CLASS, Measured, choose_forms
from .forms import CMSIS_NN_DEPENDENCY, FORMS, FormPlan, parse_forced
from .lower import SUPPORTED, Rounding, lower_model, supported_text
from .tflite import TfliteModel, read_tflite
from .tiling import TILINGS, apply_stages, choose_stages, settle_in_place

EXECUTORS = ("graph", "aot")
INTERFACES = ("c", "packed")  # AOT's interface-api
PathLike = Union[str, "os.PathLike[str]"]

__all__ = [
    "EXECUTORS",
    "TILINGS",
    "INTERFACES",
    "FORMS",
    "CmsisNnSource",
    "compile_model",
    "kernel_forms_member",
    "parse_forced",
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


@dataclass(frozen=True)
class CmsisNnSource:
    """Where ``--cmsis-nn`` finds CMSIS-NN to ask its buffer sizes: ``cmsis_path`` or
    ``dependencies`` (``--dependency`` texts) as for ``generate``, else the archive's own
    entry (git, v7.0.0, fetched into the cache unless ``offline``)."""

    cmsis_path: Optional[str] = None
    dependencies: Sequence[str] = ()
    offline: bool = False


@dataclass
class Compiled:
    """A compiled model before it is written: the GeneratedModel, each operator's kernel
    form, and the CMSIS-NN scratch answers ({network op number: {level: bytes}})."""

    generated: GeneratedModel
    forms: FormPlan
    scratch: Dict[int, Dict[str, int]] = field(default_factory=dict)
    cmsis_nn: str = ""  # the CMSIS-NN tree that answered, described


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


def compile_model(
    path: PathLike,
    *,
    name: str = "default",
    executor: str = "graph",
    cmsis_nn: bool = False,
    forms: Optional[Mapping[str, str]] = None,
    source: Optional[CmsisNnSource] = None,
    cpu: str = DEFAULT_CLASS,
    measured: Optional[Measured] = None,
    plan: Optional[FormPlan] = None,
    measured_on: str = "",
    tiling: str = "auto",
    tile_rows: Optional[int] = None,
) -> Compiled:
    """Reads, checks and lowers a ``.tflite`` with each operator in its kernel form
    (compile/choose.py: ``forms`` {KIND: FORM} forces one, ``measured`` {index: {form:
    instructions}} from ``compile --tune`` (on board ``measured_on``) picks the fewest, else
    the rules for CPU class
    ``cpu``; ``cmsis_nn`` lets CMSIS-NN be a candidate; ``plan`` replaces the choice, as
    tune.py measures); ``tiling`` and ``tile_rows``: the tiled stages (compile/tiling.py);
    with CMSIS-NN operators, asks that library their scratch sizes
    (compile/cmsis_scratch.py). Nothing is written."""
    if executor not in EXECUTORS:
        raise CompileError(f"executor {executor!r}: compile writes {', '.join(EXECUTORS)} only")
    model = read_tflite(path)
    if plan is None:
        plan = choose_forms(model, cmsis_nn=cmsis_nn, forced=forms, cpu=cpu, measured=measured,
                            measured_on=measured_on)  # fmt: skip
    generated = lower_to_model(model, name=name, forms=plan, tiling=tiling, tile_rows=tile_rows)
    compiled = Compiled(generated, plan)
    queries = []
    numbers = []
    for number, node in enumerate(generated.network.ops):
        ins: List[TensorType] = [v.type for v in node.inputs]
        if isinstance(node.op, CmsisCall):
            queries.append((node.op, ins, node.outputs[0].type))
            numbers.append(number)
        elif isinstance(node.op, TiledStage):  # its layers' calls, one per band geometry
            for _, call, call_ins, out in node.op.cmsis_calls(ins):
                queries.append((call, call_ins, out))
                numbers.append(number)
    if queries:
        from .cmsis_scratch import ask_scratch, cmsis_nn_tree

        where = source or CmsisNnSource()
        root, compiled.cmsis_nn = cmsis_nn_tree(
            CMSIS_NN_DEPENDENCY,
            cmsis_path=where.cmsis_path,
            overrides=where.dependencies,
            offline=where.offline,
        )
        for number, answer in zip(numbers, ask_scratch(root, queries)):
            held = compiled.scratch.setdefault(number, {})
            for level, need in answer.items():  # a stage's calls: the largest, per level
                held[level] = max(held.get(level, 0), need)
    return compiled


def lower_to_model(
    model: TfliteModel,
    *,
    name: str = "default",
    rounding: Rounding = None,
    forms: Optional[FormPlan] = None,
    tiling: str = "auto",
    tile_rows: Optional[int] = None,
) -> GeneratedModel:
    """A read ``.tflite`` checked and lowered (its C rendered); nothing is written.
    ``tiling`` (``auto``, ``on``, ``off``) and ``tile_rows``: the tiled stages
    (compile/tiling.py), recorded in ``forms``."""
    network = lower_model(model, name, rounding, forms)
    stages = choose_stages(network, tiling, tile_rows)
    if stages:
        records = {
            k: stage.record(number)
            for number, stage in enumerate(stages)
            for k in range(stage.first, stage.last + 1)
        }
        numbers = apply_stages(network, stages)
        if forms is not None:
            forms.renumber(numbers, records)
    if tiling == "auto":  # CMSIS-NN's depthwise in place only where that lowers the peak
        settle_in_place(network)
    if forms is not None:
        network.external_dependencies = [dict(d) for d in forms.dependencies]
    try:
        return network.build(description=f"compiled from {model.path.name}")
    except ValueError as err:  # a rule of the archive writer the checks did not foresee
        raise CompileError(f"{model.path}: {err}") from None


def kernel_forms_member(compiled: Compiled) -> Dict[str, bytes]:
    """``src/<mod>.kernels.json``: each operator's kernel form, its function, and for CMSIS-NN
    the kernel it calls and the scratch bytes the library answered per CPU level."""
    lowered = compiled.generated.lowered
    operators: List[Dict[str, Any]] = []
    layer: Dict[int, int] = {}  # stage's network number -> its next layer
    for index, kind, form, number in compiled.forms.chosen:
        op = compiled.generated.network.ops[number].op
        entry: Dict[str, Any] = {
            "index": index,
            "operator": kind,
            "form": form,
            "function": lowered.op_functions[number],
        }
        if isinstance(op, TiledStage):  # the layer this .tflite operator is in the stage
            op = op.layers[layer.get(number, 0)]
            layer[number] = layer.get(number, 0) + 1
        if isinstance(op, CmsisCall):
            entry["call"] = f"arm_{op.kernel}"
            entry["scratch"] = compiled.scratch.get(number, {})
        if index in compiled.forms.why:
            entry["why"] = compiled.forms.why[index]
        if index in compiled.forms.tiled:
            entry["tiled"] = compiled.forms.tiled[index]
        operators.append(entry)
    document: Dict[str, Any] = {"format": 1, "operators": operators}
    if compiled.cmsis_nn:
        document["cmsis_nn"] = compiled.cmsis_nn
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    return {f"src/{lowered.module}.kernels.json": text.encode()}


def archive_members(
    generated: Union[GeneratedModel, Compiled],
    executor: str = "graph",
    source: Path = Path("model.tflite"),
    interface: str = "c",
) -> Dict[str, bytes]:
    """The archive's members (version 7) for ``executor`` (and AOT's ``interface``); a rule
    of its layout that the model breaks (AOT's C names, ...) is a one-line CompileError. A
    :class:`Compiled` model also records its operators' kernel forms
    (:func:`kernel_forms_member`)."""
    if interface not in INTERFACES:
        raise CompileError(f"interface {interface!r}: compile writes {', '.join(INTERFACES)}")
    if interface != "c" and executor != "aot":
        raise CompileError(f"--interface {interface} is an AOT option (--executor aot)")
    model = generated.generated if isinstance(generated, Compiled) else generated
    try:
        members = model.members(version=7, executor=executor, interface=interface)
    except ValueError as err:
        raise CompileError(f"{source}: {err}") from None
    if isinstance(generated, Compiled):
        members.update(kernel_forms_member(generated))
    return members


def compile_tflite(
    path: PathLike,
    out: PathLike,
    *,
    name: str = "default",
    executor: str = "graph",
    interface: str = "c",
    force: bool = False,
    cmsis_nn: bool = False,
    forms: Optional[Mapping[str, str]] = None,
    source: Optional[CmsisNnSource] = None,
    cpu: str = DEFAULT_CLASS,
    measured: Optional[Measured] = None,
    plan: Optional[FormPlan] = None,
    measured_on: str = "",
    tiling: str = "auto",
    tile_rows: Optional[int] = None,
) -> Path:
    """Compiles ``path`` into the MLF archive ``out`` (a version-7 tar); returns ``out``.
    ``interface`` is AOT's: ``c`` (``tvmgen_<name>_run`` over structs) or ``packed`` (TVM's
    packed calling convention through the system library); ``cmsis_nn``, ``forms``,
    ``source``, ``cpu``, ``measured`` (on board ``measured_on``), ``plan``, ``tiling``,
    ``tile_rows``: as :func:`compile_model`."""
    out = Path(out)
    if (out.exists() or out.is_symlink()) and not force:
        raise CompileError(f"{out} exists (--force replaces it)")
    if out.is_dir():
        raise CompileError(f"{out} is a directory")
    compiled = compile_model(
        path,
        name=name,
        executor=executor,
        cmsis_nn=cmsis_nn,
        forms=forms,
        source=source,
        cpu=cpu,
        measured=measured,
        plan=plan,
        measured_on=measured_on,
        tiling=tiling,
        tile_rows=tile_rows,
    )
    data = archive_members(compiled, executor, Path(path), interface)
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
