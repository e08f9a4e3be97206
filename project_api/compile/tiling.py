"""Which consecutive convolutions run as one tiled stage (modelgen/ops/tflite_tiled.py), and
the rewrite of the lowered network that makes them one operator.

A *chain* is a run of int8 CONV_2D / DEPTHWISE_CONV_2D operators in the ``ref`` form's fast C
or a CMSIS-NN form (``cmsis-nn``, ``simd``: the call made on a band's rows, :data:`STAGE_LAYERS`;
one batch), each reading the one before, every tensor between them read by the next layer
only and not a model output. A stage is two or more consecutive layers of a chain; its
intermediate tensors exist only as band buffers (the stage's workspace), at the cost of the
halo rows made again for every band.

``--tile`` (``tiling``):

- ``off``: no stage;
- ``on``: every chain is one stage, bands of ``--tile-rows`` output rows (default
  :data:`FORCED_ROWS`) — what the tests force;
- ``auto`` (the default, the rule): while the estimated peak of the arena (:func:`peak`:
  the bytes live at each call, an output that overwrites its input counted once, the model
  inputs live throughout, a stage's band buffers during its call) is set by a call that a
  stage could take, the stage of at most :data:`MAX_LAYERS` layers and the band height among
  :data:`BAND_ROWS` (or ``--tile-rows``) that lowers it most is taken, provided the halos of
  all the stages taken cost at most :data:`MAX_RECOMPUTE` more multiply-accumulates than the
  model's convolutions and FULLY_CONNECTED layers run whole (the instructions follow them
  closely: bench/README.md); ties go to the fewer multiply-accumulates, then to the shorter
  stage. Nothing is tiled where no stage lowers the peak. The rule takes stages of the
  ``ref`` form's C only: a band of a CMSIS-NN form is a library call whose fixed cost the
  budget does not see (VWW +6 % and +9 % instructions on the an386 and an547, IC +3.5 %),
  and on those cores, where we run TFLM's own kernels, that made IC slower than TFLM
  (bench/README.md §24b); ``--tile on`` still makes them stages.

The choice is recorded per operator in ``src/<mod>.kernels.json`` (``tiled``) and ``info``
shows it; docs/compile.md explains it and bench/README.md has both figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from ..errors import CompileError
from ..modelgen.network import ConstNode, InputNode, Network, OpNode, Value
from ..modelgen.ops import TensorType
from ..modelgen.ops.tflite import TflConv, TflFullyConnected
from ..modelgen.ops.tflite_cmsis import CmsisConv
from ..modelgen.ops.tflite_cmsis_rows import CmsisDepthwiseRows
from ..modelgen.ops.tflite_simd import SimdPointwise
from ..modelgen.ops.tflite_tiled import Layer, TiledStage, conv_of, stage_macs

TILINGS = ("auto", "on", "off")
FORCED_ROWS = 2
BAND_ROWS = (1, 2, 4, 8)
MAX_LAYERS = 6
MAX_RECOMPUTE = 0.05  # extra multiply-accumulates the halos may cost, of the model's
# The operator classes a stage takes as layers (each emits its C for a band's sub-problem).
STAGE_LAYERS = (TflConv, CmsisConv, CmsisDepthwiseRows, SimdPointwise)


@dataclass(frozen=True)
class Stage:
    """Network operators ``first``..``last`` (both included) as one stage of ``band`` rows."""

    first: int
    last: int
    band: int
    by: str  # "forced" or "rule"
    macs: Tuple[int, int] = (0, 0)  # whole, tiled
    peak: Tuple[int, int] = (0, 0)  # estimated arena peak before, after (auto only)

    def record(self, number: int) -> Dict[str, Any]:
        entry: Dict[str, Any] = {"stage": number, "layers": self.last - self.first + 1,
                                 "band_rows": self.band, "by": self.by,
                                 "macs": list(self.macs)}  # fmt: skip
        if self.by == "rule":
            entry["peak_bytes"] = list(self.peak)
        return entry


def tileable(node: OpNode) -> bool:
    """Whether ``node`` can be a stage's layer: an int8 convolution in the ``ref`` form's fast
    C, or in a CMSIS-NN form (``cmsis-nn``, ``simd``: the call made on a band of rows)."""
    op = node.op
    if type(op) not in STAGE_LAYERS:
        return False
    conv = conv_of(op)
    if conv.form != "fast" or conv.hybrid_scale:
        return False
    x = node.inputs[0].type
    consts = all(isinstance(v.producer, ConstNode) for v in node.inputs[1:])
    return consts and x.dtype == "int8" and len(x.shape) == 4 and x.shape[0] == 1


def chains(net: Network) -> List[Tuple[int, int]]:
    """(first, last) operator numbers of every chain of two or more layers."""
    readers: Dict[int, int] = {}
    for node in net.ops:
        for v in node.inputs:
            readers[id(v)] = readers.get(id(v), 0) + 1
    outputs = {id(v) for v in net.outputs}
    found: List[Tuple[int, int]] = []
    start: Optional[int] = None
    for i, node in enumerate(net.ops):
        if not tileable(node):
            start = None
            continue
        if start is not None:
            prev = net.ops[i - 1]
            out = prev.outputs[0]
            if node.inputs[0] is out and readers.get(id(out)) == 1 and id(out) not in outputs:
                if found and found[-1][0] == start:
                    found[-1] = (start, i)
                else:
                    found.append((start, i))
                continue
        start = i
    return found


def make_stage(nodes: Sequence[OpNode], band: int) -> Tuple[TiledStage, List[Value]]:
    """The stage op of ``nodes`` and its operands (input, then each layer's constants)."""
    # in a band the input and output are apart: CMSIS-NN's depthwise as one call a band
    layers = tuple(
        CmsisConv(n.op.base) if isinstance(n.op, CmsisDepthwiseRows) else cast(Layer, n.op)
        for n in nodes
    )
    kernels = tuple(n.inputs[1].type.shape[1] for n in nodes)
    operands = [nodes[0].inputs[0]] + [v for n in nodes for v in n.inputs[1:]]
    return TiledStage(layers, kernels, band), operands


def _buffers(nodes: Sequence[OpNode], band: int) -> Tuple[int, int, int]:
    """(band buffer bytes, MACs whole, MACs tiled) of ``nodes`` as a stage."""
    stage, operands = make_stage(nodes, band)
    types = [v.type for v in operands]
    return (
        sum(stage.buffer_bytes(types)),
        stage_macs(stage, types, tiled=False),
        stage_macs(stage, types),
    )


@dataclass
class _Step:
    reads: List[int]  # value ids
    writes: int
    inplace: Optional[int]  # position in reads
    workspace: int = 0


def _steps(net: Network) -> Tuple[List[_Step], Dict[int, int], set]:
    """The network as steps over value ids, the bytes of each value, the pinned ones."""
    nbytes: Dict[int, int] = {}
    steps: List[_Step] = []
    for node in net.ops:
        reads = [id(v) for v in node.inputs if not isinstance(v.producer, ConstNode)]
        for v in node.inputs:
            nbytes[id(v)] = v.type.nbytes
        out = node.outputs[0]
        nbytes[id(out)] = sum(o.type.nbytes for o in node.outputs)
        inplace: Optional[int] = None
        if node.op.kind == "kernel":
            k = node.op.inplace_input([v.type for v in node.inputs])
            if k is not None and not isinstance(node.inputs[k].producer, (ConstNode, InputNode)):
                inplace = reads.index(id(node.inputs[k]))
        elif node.op.kind == "nop":
            inplace = 0
        steps.append(_Step(reads, id(out), inplace))
    pinned = {id(v) for v in net.inputs} | {id(v) for v in net.outputs}
    return steps, nbytes, pinned


def peak(steps: Sequence[_Step], nbytes: Dict[int, int], pinned: set) -> Tuple[int, int]:
    """(bytes, step): the most bytes live during one step, estimated (module docstring)."""
    born: Dict[int, int] = {}
    last: Dict[int, int] = {}
    for t, s in enumerate(steps):
        born.setdefault(s.writes, t)
        for v in s.reads:
            born.setdefault(v, -1)
            last[v] = t
    end = len(steps)
    live = [0] * (end + 1)
    for v, t0 in born.items():
        t1 = end if v in pinned or v not in last else last[v]
        if v in pinned and t0 < 0:
            t0 = 0
        for t in range(max(t0, 0), min(t1, end - 1) + 1):
            live[t] += nbytes.get(v, 0)
    for t, s in enumerate(steps):
        live[t] += s.workspace
        if s.inplace is not None:
            v = s.reads[s.inplace]
            if v not in pinned and last.get(v) == t and s.reads.count(v) == 1:
                live[t] -= min(nbytes[v], nbytes[s.writes])
    best = max(range(end), key=lambda t: live[t]) if end else 0
    return (live[best] if end else 0), best


def _tiled_steps(steps: List[_Step], stage: Tuple[int, int], workspace: int) -> List[_Step]:
    first, last = stage
    merged = _Step([steps[first].reads[0]], steps[last].writes, None, workspace)
    return [*steps[:first], merged, *steps[last + 1 :]]


def choose_stages(net: Network, tiling: str = "auto", rows: Optional[int] = None) -> List[Stage]:
    """The stages of ``net`` (module docstring); ``rows``: the band height (else chosen)."""
    if tiling not in TILINGS:
        raise CompileError(f"--tile {tiling!r}: one of {', '.join(TILINGS)}")
    if rows is not None and rows < 1:
        raise CompileError(f"--tile-rows {rows}: a positive number of rows")
    found = chains(net)
    if tiling == "off" or not found:
        return []
    if tiling == "on":
        band = rows or FORCED_ROWS
        stages = []
        for first, last in found:
            _, whole, tiled = _buffers(net.ops[first : last + 1], band)
            stages.append(Stage(first, last, band, "forced", (whole, tiled)))
        return stages
    return _rule(net, found, (rows,) if rows else BAND_ROWS)


def model_macs(net: Network) -> int:
    """Multiply-accumulates of the network's convolutions and FULLY_CONNECTED layers."""
    total = 0
    for node in net.ops:
        op = node.op
        base = getattr(op, "base", None)
        if isinstance(op, TflConv) or isinstance(base, TflConv):
            conv = op if isinstance(op, TflConv) else cast(TflConv, base)
            w = node.inputs[1].type.shape
            out = node.outputs[0].type.shape
            per_pixel = w[1] * w[2] * (w[3] if conv.depthwise else w[0] * w[3])
            total += out[0] * out[1] * out[2] * per_pixel
        elif isinstance(op, TflFullyConnected) or isinstance(base, TflFullyConnected):
            total += node.outputs[0].type.size * node.inputs[1].type.shape[-1]
    return total


def _rule(net: Network, found: List[Tuple[int, int]], heights: Sequence[int]) -> List[Stage]:
    budget = MAX_RECOMPUTE * model_macs(net)
    spent = 0
    steps, nbytes, pinned = _steps(net)
    number = list(range(len(steps)))  # step -> first network operator it stands for
    chosen: List[Stage] = []
    while True:
        before, at = peak(steps, nbytes, pinned)
        op_at = number[at]
        best: Optional[Tuple[Tuple[int, int, int], Stage, List[_Step], List[int]]] = None
        for first, last in found:
            if not first <= op_at <= last or any(
                s.first <= last and first <= s.last for s in chosen
            ):
                continue
            for i in range(first, op_at + 1):
                for j in range(max(op_at, i + 1), min(last, i + MAX_LAYERS - 1) + 1):
                    nodes = net.ops[i : j + 1]
                    if not all(type(n.op) is TflConv for n in nodes):
                        continue  # CMSIS-NN calls: only --tile on (RULE_FORMS)
                    for band in heights:
                        if band > conv_of(nodes[-1].op).out_hw[0]:
                            continue
                        workspace, whole, tiled = _buffers(nodes, band)
                        if spent + tiled - whole > budget:
                            continue
                        si, sj = number.index(i), number.index(j)
                        trial = _tiled_steps(steps, (si, sj), workspace)
                        after, _ = peak(trial, nbytes, pinned)
                        if after >= before:
                            continue
                        key = (after, tiled - whole, j - i)
                        if best is None or key < best[0]:
                            stage = Stage(i, j, band, "rule", (whole, tiled), (before, after))
                            numbers = [*number[:si], i, *number[sj + 1 :]]
                            best = (key, stage, trial, numbers)
        if best is None:
            return sorted(chosen, key=lambda s: s.first)
        _, stage, steps, number = best
        spent += stage.macs[1] - stage.macs[0]
        chosen.append(stage)


def apply_stages(net: Network, stages: Sequence[Stage]) -> Dict[int, int]:
    """Replaces each stage's operators by one TiledStage node; returns {old operator number:
    new number} for every operator."""
    renumber: Dict[int, int] = {}
    new_ops: List[OpNode] = []
    by_first = {s.first: s for s in stages}
    i = 0
    while i < len(net.ops):
        stage = by_first.get(i)
        if stage is None:
            renumber[i] = len(new_ops)
            new_ops.append(net.ops[i])
            i += 1
            continue
        nodes = net.ops[stage.first : stage.last + 1]
        op, operands = make_stage(nodes, stage.band)
        node = OpNode(op, operands)
        out = nodes[-1].outputs[0]
        types: List[TensorType] = op.infer([v.type for v in operands])
        if types[0] != out.type:
            raise CompileError(f"tiled stage of operators {stage.first}..{stage.last}: shapes")
        out.producer = node
        node.outputs = [out]
        for k in range(stage.first, stage.last + 1):
            renumber[k] = len(new_ops)
        new_ops.append(node)
        i = stage.last + 1
    net.ops = new_ops
    return renumber


def settle_in_place(net: Network) -> List[int]:
    """CMSIS-NN's depthwise runs in place band by band (modelgen/ops/tflite_cmsis_rows.py) at
    a cost in instructions (bench/README.md §24b): where running it in place does not lower
    the estimated arena peak (:func:`peak`), it is made one call again (CmsisConv). Returns
    the operator numbers made one call."""
    undone: List[int] = []
    steps, nbytes, pinned = _steps(net)
    for number, node in enumerate(net.ops):
        if not isinstance(node.op, CmsisDepthwiseRows) or steps[number].inplace is None:
            continue
        before, _ = peak(steps, nbytes, pinned)
        steps[number].inplace = None
        after, _ = peak(steps, nbytes, pinned)
        if after > before:  # in place lowers the peak: kept
            steps[number].inplace = 0
            continue
        node.op = CmsisConv(node.op.base)
        undone.append(number)
    return undone
