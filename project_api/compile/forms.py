"""Kernel forms: the one seam through which each lowered operator's C is chosen.

A *form* is a way of computing an operator: ``ref`` (our plain C with TFLite's reference
arithmetic, modelgen/ops/tflite*.py), ``cmsis-nn`` (a call of CMSIS-NN v7.0.0,
modelgen/ops/tflite_cmsis.py), ``direct`` (a one-input-channel CONV_2D in C specialized to
its shape, modelgen/ops/tflite_direct.py), ``simd`` (a 1x1 CONV_2D: direct's code on DSP and
Helium, CMSIS-NN elsewhere, modelgen/ops/tflite_simd.py) or ``dot`` (an int8
FULLY_CONNECTED as exact dot products, LiteRT's rounding, modelgen/ops/tflite_dot.py).
:data:`FORMS` is the registry: each :class:`Form` says which operators it takes
(:meth:`Form.refusal` on the ``.tflite`` operator, before lowering, and :meth:`Form.wrap`
on the lowered one), the requantization rounding it computes, and the external dependency
it needs. A new form is one more entry.

``compile`` chooses a form per operator in compile/choose.py (forced, tuned, a rule of the
package's rules table, or the only candidate; the reason is recorded). ``--form KIND=FORM``
forces one (a forced form that cannot take an operator of that kind is a one-line refusal),
so the tests run every form. The choice is recorded
per operator in the archive (``src/<mod>.kernels.json``, read back by
``project_api.read.kernel_forms``) and ``info`` shows it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import CompileError
from ..modelgen.network import ConstNode, OpNode, Value
from ..modelgen.ops import Op
from ..modelgen.ops.base import TensorType
from ..modelgen.ops.tflite import TflConv, TflFullyConnected, TflPool
from ..modelgen.ops.tflite_cmsis import (
    CmsisBinary,
    CmsisConv,
    CmsisFullyConnected,
    CmsisPool,
)
from ..modelgen.ops.tflite_cmsis_rows import CmsisDepthwiseRows
from ..modelgen.ops.tflite_direct import DirectConv
from ..modelgen.ops.tflite_dot import DotFullyConnected, folded_bias
from ..modelgen.ops.tflite_elementwise import TflBinary
from ..modelgen.ops.tflite_simd import SimdPointwise
from .support import LITERT_ROUNDING, SUPPORTED
from .tflite import Operator, TfliteModel

REF = "ref"
CMSIS_NN = "cmsis-nn"
DIRECT = "direct"
SIMD = "simd"
LOOPS = "loops"
DOT = "dot"
# The CMSIS-NN the cmsis-nn form calls, as metadata.json names it (the pre-RFC's example).
CMSIS_NN_DEPENDENCY = {
    "short_name": "cmsis-nn",
    "url": "https://github.com/ARM-software/CMSIS-NN.git",
    "url_type": "git",
    "version_spec": "v7.0.0",
}


def _int8(model: TfliteModel, op: Operator) -> Optional[str]:
    tensors = [model.tensors[i] for i in (*op.inputs[:1], *op.outputs) if i >= 0]
    if any(t.dtype != "int8" for t in tensors):
        return "takes int8 only"
    return None


def _cmsis_refusal(model: TfliteModel, op: Operator) -> Optional[str]:
    """Why CMSIS-NN cannot compute ``op`` exactly as lowered (None: it can)."""
    if op.name not in CMSIS_KINDS:
        return f"has no CMSIS-NN kernel here (it takes {', '.join(sorted(CMSIS_KINDS))})"
    bad = _int8(model, op)
    if bad:
        return bad
    if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        w = model.tensors[op.inputs[1]] if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
        if w is None or w.dtype != "int8" or w.quantization is None:
            return "needs an int8 filter"
        if any(w.quantization.zero_points):
            return "needs a filter zero point of 0"
        if op.name == "FULLY_CONNECTED" and w.quantization.per_channel:
            return "takes per-tensor filter quantization only"
    if op.name in ("ADD", "MUL"):
        shapes = [model.tensors[i].shape for i in op.inputs[:2] if i >= 0]
        if len(shapes) != 2 or shapes[0] != shapes[1]:
            return "takes two inputs of one shape (no broadcast)"
    return None


LOOP_KINDS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _loops_refusal(model: TfliteModel, op: Operator) -> Optional[str]:
    """Why the ``loops`` form cannot compute ``op``: it is the int8, float32 and hybrid
    convolutions' and FULLY_CONNECTED's other C (None: it can)."""
    if op.name not in LOOP_KINDS:
        return f"takes {', '.join(LOOP_KINDS)} only"
    if model.tensors[op.inputs[0]].dtype == "float32":
        return None
    return _int8(model, op)


def _loops_wrap(op: Op) -> Optional[Op]:
    if isinstance(op, (TflConv, TflFullyConnected)):
        return dataclasses.replace(op, form="reference")
    return None


def _int8_filtered(model: TfliteModel, op: Operator, kind: str) -> Optional[str]:
    """Why an int8 form of ``kind`` with an int8 filter cannot compute ``op`` (None: it can)."""
    if op.name != kind:
        return f"takes {kind} only"
    bad = _int8(model, op)
    if bad:
        return bad
    w = model.tensors[op.inputs[1]] if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
    if w is None or w.dtype != "int8":
        return "needs an int8 filter"
    return None


def _direct_refusal(model: TfliteModel, op: Operator) -> Optional[str]:
    """Why the ``direct`` form cannot compute ``op`` (None: it can)."""
    bad = _int8_filtered(model, op, "CONV_2D")
    if bad:
        return bad
    x = model.tensors[op.inputs[0]]
    if len(x.shape) != 4 or x.shape[3] != 1:
        return "takes a single input channel only"
    return None


def _direct_wrap(op: Op) -> Optional[Op]:
    if isinstance(op, TflConv) and not op.depthwise and not op.hybrid_scale:
        return DirectConv(op)
    return None


def _simd_refusal(model: TfliteModel, op: Operator) -> Optional[str]:
    """Why the ``simd`` form cannot compute ``op`` (None: it can)."""
    if op.name != "CONV_2D":
        return "takes CONV_2D only"
    bad = _cmsis_refusal(model, op)
    if bad:
        return bad
    w = model.tensors[op.inputs[1]]
    if len(w.shape) != 4 or w.shape[1:3] != (1, 1):
        return "takes a 1x1 filter only"
    return None


def _simd_wrap(op: Op) -> Optional[Op]:
    if isinstance(op, TflConv) and not op.depthwise and not op.hybrid_scale:
        return SimdPointwise(op) if op.pads == (0, 0) else None
    return None


def _dot_refusal(model: TfliteModel, op: Operator) -> Optional[str]:
    """Why the ``dot`` form cannot compute ``op`` (None: it can)."""
    return _int8_filtered(model, op, "FULLY_CONNECTED")


def _dot_wrap_node(node: OpNode) -> Optional[Op]:
    """The dot form of an int8 FULLY_CONNECTED node, its bias operand replaced by the bias
    with the input offset folded in (modelgen/ops/tflite_dot.py); None if it is not one."""
    op = node.op
    if not isinstance(op, TflFullyConnected) or op.hybrid_scale:
        return None
    x, w = node.inputs[0], node.inputs[1]
    if x.dtype != "int8" or w.dtype != "int8" or not isinstance(w.producer, ConstNode):
        return None
    bias = None
    if op.bias:
        b = node.inputs[2]
        if not isinstance(b.producer, ConstNode):
            return None
        bias = b.producer.array
    q = op.quant
    array = folded_bias(w.producer.array, bias, q.input_offset, q.filter_offset)
    folded = Value(ConstNode(array), 0, TensorType(tuple(array.shape), "int32"))
    node.inputs = [x, w, folded]
    return DotFullyConnected(op)


def _cmsis_wrap(op: Op) -> Optional[Op]:
    if isinstance(op, TflConv) and not op.hybrid_scale:
        return CmsisDepthwiseRows(op) if op.depthwise else CmsisConv(op)
    if isinstance(op, TflFullyConnected) and not op.hybrid_scale:
        return CmsisFullyConnected(op)
    if isinstance(op, TflPool):
        return CmsisPool(op)
    if isinstance(op, TflBinary) and op.requants:
        return CmsisBinary(op)
    return None


@dataclass(frozen=True)
class Form:
    """One way of computing operators (see the module docstring). ``refusal`` must refuse
    whatever ``wrap`` would not take where the form's ``rounding`` is not LiteRT's (the
    operator's constants are worked out for the form's rounding before it is lowered)."""

    name: str
    summary: str
    refusal: Callable[[TfliteModel, Operator], Optional[str]]
    wrap: Callable[[Op], Optional[Op]]
    rounding: Mapping[str, str] = field(default_factory=dict)  # op kind -> rounding it computes
    dependency: Optional[Mapping[str, str]] = None
    # a candidate only where the user asked for the optimized int8 kernels (--cmsis-nn), even
    # without a dependency of its own; elsewhere only forced (the plain path keeps its choice)
    with_cmsis_nn: bool = False
    # never a candidate of a rule or of --tune: only what --form forces (a baseline)
    forced_only: bool = False
    # the node's wrap where the form needs its constants (else ``wrap`` on its operator)
    wrap_node: Optional[Callable[[OpNode], Optional[Op]]] = None
    # Bumped when the form's C changes what it runs: part of compile --tune's cache key.
    version: str = "1"


CMSIS_KINDS = (
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "FULLY_CONNECTED",
    "AVERAGE_POOL_2D",
    "MAX_POOL_2D",
    "ADD",
    "MUL",
)
FORMS: Dict[str, Form] = {
    REF: Form(REF, "our plain C, TFLite's reference arithmetic", lambda m, o: None, lambda o: o),
    CMSIS_NN: Form(
        CMSIS_NN,
        "a call of CMSIS-NN v7.0.0 (int8)",
        _cmsis_refusal,
        _cmsis_wrap,
        # CMSIS-NN's default build requantizes with TFLite's classic double rounding
        rounding={kind: "double" for kind in CMSIS_KINDS},
        dependency=CMSIS_NN_DEPENDENCY,
        version="2",  # 2: depthwise in place band by band (tflite_cmsis_rows.py), ADD in place
    ),
    DIRECT: Form(
        DIRECT,
        "our C for a single-input-channel CONV_2D, no im2col (SMLAD on DSP, VMLADAV on MVE)",
        _direct_refusal,
        _direct_wrap,
        rounding={"CONV_2D": "double"},
        with_cmsis_nn=True,
    ),
    SIMD: Form(
        SIMD,
        "a 1x1 CONV_2D: the direct form's C on DSP and Helium, CMSIS-NN v7.0.0 elsewhere",
        _simd_refusal,
        _simd_wrap,
        rounding={"CONV_2D": "double"},
        dependency=CMSIS_NN_DEPENDENCY,
        version="3",  # 2: in place (CMSIS-NN's call by groups); 3: also when it widens
    ),
    LOOPS: Form(
        LOOPS,
        "our plain C as the reference kernels' loops, nothing specialized (CONV_2D, "
        "DEPTHWISE_CONV_2D, FULLY_CONNECTED: int8, float32, hybrid): the baseline the ref "
        "form's C is measured by",
        _loops_refusal,
        _loops_wrap,
        forced_only=True,
    ),
    DOT: Form(
        DOT,
        "an int8 FULLY_CONNECTED as exact dot products (VMLADAVA on Helium, SMLAD on DSP, "
        "plain C elsewhere), the input offset folded into the bias, LiteRT's rounding",
        _dot_refusal,
        lambda o: None,
        with_cmsis_nn=True,
        wrap_node=_dot_wrap_node,
    ),
}


@dataclass
class FormPlan:
    """The form of every ``.tflite`` operator (by index), and what was made of it."""

    wanted: Dict[int, str]
    forced: Dict[int, bool]
    chosen: List[Tuple[int, str, str, int]] = field(default_factory=list)
    # (tflite index, kind, form, network op number)
    why: Dict[int, Dict[str, Any]] = field(default_factory=dict)  # index -> reason (choose.py)
    tiled: Dict[int, Dict[str, Any]] = field(default_factory=dict)  # index -> stage (tiling.py)

    def rounding(self, op: Operator) -> Optional[str]:
        """The rounding the wanted form computes for ``op`` (None: LiteRT's)."""
        form = FORMS[self.wanted.get(op.index, REF)]
        return form.rounding.get(op.name)

    def apply(self, op: Operator, nodes: Sequence[OpNode], first: int) -> None:
        """Puts the wanted form onto the network nodes that lower ``op`` (numbered from
        ``first``); a forced form that cannot take them is a one-line refusal."""
        name = self.wanted.get(op.index, REF)
        form = FORMS[name]
        for offset, node in enumerate(nodes):
            if node.op.kind != "kernel":
                continue
            wrapped = form.wrap_node(node) if form.wrap_node else form.wrap(node.op)
            if wrapped is None:
                # ref computes LiteRT's rounding: a form whose constants were worked out for
                # another rounding cannot fall back to it
                other = form.rounding.get(op.name, LITERT_ROUNDING.get(op.name))
                if self.forced.get(op.index) or other != LITERT_ROUNDING.get(op.name):
                    raise CompileError(
                        f"operator {op.index} ({op.name}): form {name} cannot compute it"
                    )
                name, wrapped = REF, node.op
                self.why[op.index] = {**self.why.get(op.index, {}), "fell_back": True}
            node.op = wrapped
            self.chosen.append((op.index, op.name, name, first + offset))

    def renumber(self, numbers: Mapping[int, int], stages: Mapping[int, Dict[str, Any]]) -> None:
        """The network's operators renumbered ({old: new}, compile/tiling.py), those of a
        tiled stage recorded ({old number: the stage's record})."""
        for k, (index, kind, form, number) in enumerate(self.chosen):
            self.chosen[k] = (index, kind, form, numbers[number])
            if number in stages:
                self.tiled[index] = stages[number]

    @property
    def dependencies(self) -> List[Mapping[str, str]]:
        used = {form for _, _, form, _ in self.chosen}
        deps: List[Mapping[str, str]] = []
        for f in sorted(used):
            dep = FORMS[f].dependency
            if dep is not None and dep not in deps:  # forms may share one (CMSIS-NN)
                deps.append(dep)
        return deps


def parse_forced(items: Sequence[str]) -> Dict[str, str]:
    """``KIND=FORM`` texts (``--form``) as {KIND: FORM}; a bad one is a one-line CompileError."""
    forced: Dict[str, str] = {}
    for item in items:
        kind, sep, form = item.partition("=")
        kind = kind.strip().upper()
        if not sep or kind not in SUPPORTED or form not in FORMS:
            raise CompileError(
                f"--form {item!r}: KIND=FORM with KIND an operator compile takes (CONV_2D, "
                f"...) and FORM one of {', '.join(FORMS)}"
            )
        forced[kind] = form
    return forced
