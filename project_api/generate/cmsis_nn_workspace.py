"""What the CMSIS-NN adapter (``crt/cmsis_nn/``) takes from the operators' workspace, known when
a firmware is planned, before its CMSIS-NN tree is resolved: the CPU level CMSIS-NN is compiled
at for the firmware's models on the board, and per model {generated function: bytes} for the
memory planner, which adds them to those operators' workspace windows
(:func:`..cmsis_nn.adapter.workspace_needs`: the most any covered release asks)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

from ..board import Board
from ..cmsis_nn.adapter import workspace_needs
from ..cmsis_nn.calls import CmsisNnCalls
from ..cmsis_nn.features import CmsisNnBuild
from ..read import Model
from ..read.kernel_forms import model_kernel_forms
from ..resolve import assumed_features, cmsis_nn_build, detect_cmsis_nn


def keeps_kernel_sums(opts: Mapping[str, Any]) -> bool:
    """Whether the adapter keeps kernel sums between calls: not in microTVM firmware, whose
    host may rewrite device memory (then they are computed into the workspace at every call)."""
    return opts.get("device_protocol") != "microtvm"


def asks_library(model: Model) -> bool:
    """Whether ``model`` (an archive ``compile --cmsis-nn`` wrote) asks the linked CMSIS-NN its
    scratch at run time: it fits CMSIS-NN built at the board's own level, whatever its target."""
    forms = model_kernel_forms(model)
    return forms is not None and forms.asks_cmsis_nn


def firmware_cmsis_nn_build(models: Sequence[Model], board: Board, adapted: bool) -> CmsisNnBuild:
    """How CMSIS-NN is compiled for ``models`` on ``board`` (``adapted``: through the adapter).
    Models that ask the library their scratch (:func:`asks_library`) assume no level."""
    assumed = [
        (m.name, assumed_features(m.targets))
        for m in models
        if detect_cmsis_nn(m.sources) and not asks_library(m)
    ]
    return cmsis_nn_build(assumed, board.cpu, board.name, scratch_shim=adapted)


def compiled_workspace(models: Sequence[Model], board: Board) -> Dict[str, Dict[str, int]]:
    """{model name: {function: bytes}} the CMSIS-NN calls of compiled archives take from their
    operators' workspace windows: the scratch that CMSIS-NN itself answered at compile time for
    the level it is compiled at for this firmware (``src/<mod>.kernels.json``)."""
    if not any(asks_library(m) for m in models):
        return {}
    level = firmware_cmsis_nn_build(models, board, adapted=False).level
    needs: Dict[str, Dict[str, int]] = {}
    for model in models:
        forms = model_kernel_forms(model)
        if forms is not None and forms.asks_cmsis_nn:
            needs[model.name] = forms.scratch_at(level)
    return needs


def adapter_workspace(
    models: Sequence[Model],
    calls: Mapping[str, CmsisNnCalls],
    board: Board,
    opts: Mapping[str, Any],
) -> Dict[str, Dict[str, int]]:
    """{model name: {function: workspace bytes the adapter takes during its calls}} for the
    models of one firmware on ``board``, ``calls`` their CMSIS-NN calls by model name; empty
    when no model makes a call the adapter serves."""
    if not any(found.adapted for found in calls.values()):
        return {}
    level = firmware_cmsis_nn_build(models, board, adapted=True).level
    keep = keeps_kernel_sums(opts)
    return {name: workspace_needs(found, level, keep) for name, found in calls.items()}
