"""``mlperftiny``: the firmware speaks the MLPerf Tiny / EEMBC benchmark protocol
(docs/mlperftiny.md; ``template_project/firmware/mlf_mlperftiny.c``), so the EEMBC runner, the
mlcommons/tiny runner or ``mlf-project mlperf`` drive it. One model; the input arrives by
``db`` commands into a buffer of the model's input size; the results are the outputs, printed
as numbers (integer outputs dequantized with the options output_scale / output_zero_point)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...board import Board
from ...errors import GenerateError, UnsupportedModelError
from ...read import Model
from ...read.dtypes import CODE_INT, CODE_UINT, parse_dtype
from ..tables import c_string
from .base import NO_TEXT_FLOATS, ProjectType, float_outputs, input_bytes

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import ModelPlan

BENCHMARKS = ("kws01", "vww01", "ad01", "ic01")
DEFAULT_NAME = "mlf-project-api"
DEFAULT_PROFILE = "ULPMark for tinyML Firmware V0.0.1"  # what EEMBC's firmware reports
_TEXT = re.compile(r"[ -Z\\^-~]{1,64}\Z")  # printable ASCII without [ ] (the lines' brackets)
# Words of a model name that say which benchmark it is.
_GUESSES = {
    "kws": "kws01",
    "keyword": "kws01",
    "vww": "vww01",
    "person": "vww01",
    "ad": "ad01",
    "anomaly": "ad01",
    "ic": "ic01",
    "resnet": "ic01",
    "cifar": "ic01",
}
_INT32 = (-(1 << 31), (1 << 31) - 1)
_FLOAT32_NORMAL = (1.1754943508222875e-38, 3.4028234663852886e38)  # FLT_MIN, FLT_MAX


def benchmark_of(model_name: str) -> Optional[str]:
    """The MLPerf Tiny benchmark a model's name suggests (``kws`` → ``kws01``), else None."""
    for word in re.split(r"[^a-z0-9]+", model_name.lower()):
        if word in BENCHMARKS:
            return word
        for key, benchmark in _GUESSES.items():
            if word == key or (len(key) >= 5 and word.startswith(key)):  # resnet8, cifar10
                return benchmark
    return None


def settings(model: Model, opts: Mapping[str, Any]) -> Dict[str, Any]:
    """The values the firmware reports and uses, options applied (checked)."""
    found = {
        "name": opts["mlperftiny_name"] or DEFAULT_NAME,
        "profile": opts["mlperftiny_profile"] or DEFAULT_PROFILE,
        "model": opts["mlperftiny_model"] or benchmark_of(model.name) or model.name,
        "energy": bool(opts["mlperftiny_energy"]),
        "output_scale": opts["output_scale"],
        "output_zero_point": opts["output_zero_point"],
    }
    for key, option in (
        ("name", "mlperftiny_name"),
        ("profile", "mlperftiny_profile"),
        ("model", "mlperftiny_model"),
    ):
        if not _TEXT.match(found[key]):
            raise GenerateError(
                f"option {option}: {found[key]!r} is not 1 to 64 printable ASCII characters "
                "without [ or ]",
                hint="the benchmark protocol prints it between brackets",
            )
    scale, zero_point = found["output_scale"], found["output_zero_point"]
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise GenerateError(f"option output_scale: must be a positive number, got {scale}")
    if scale is not None and not _FLOAT32_NORMAL[0] <= scale <= _FLOAT32_NORMAL[1]:
        raise GenerateError(
            f"option output_scale: {scale} does not fit a float32 (the firmware computes in "
            f"float: {_FLOAT32_NORMAL[0]:.9g} to {_FLOAT32_NORMAL[1]:.9g})"
        )
    if zero_point is not None:
        if scale is None:
            raise GenerateError(
                "option output_zero_point needs output_scale",
                hint="both dequantize the integer outputs: scale * (q - zero_point)",
            )
        if not _INT32[0] <= zero_point <= _INT32[1]:
            raise GenerateError(f"option output_zero_point: {zero_point} is not an int32")
    found["output_zero_point"] = int(zero_point or 0) if scale is not None else None
    return found


class MlperfTiny(ProjectType):
    name = "mlperftiny"
    firmware_sources = ("mlf_mlperftiny.c", "mlf_text.c")
    # The firmware says "<status>: #<why>"; the host words the reason (transport/reasons.py).
    definitions = ("MLF_ERROR_TEXT=0",)
    owned_options = (
        "mlperftiny_model",
        "mlperftiny_name",
        "mlperftiny_profile",
        "mlperftiny_energy",
        "output_scale",
        "output_zero_point",
    )
    owned_hint = "generate an mlperftiny project (--project-type mlperftiny)"
    link_buffer_item = "input buffer"
    driven_by = "benchmark()"
    boot_done = b"m-ready"  # after m-timestamp-mode-... and m-init-done
    cli_command = "mlf-project mlperf, or mlf-project attach and the MLPerf Tiny runner"

    def compile_definitions(
        self, plans: Sequence[ModelPlan], opts: Mapping[str, Any]
    ) -> Tuple[str, ...]:
        model = plans[0].model
        dequantized = settings(model, opts)["output_scale"] is not None
        floats = dequantized or float_outputs([model])
        return self.definitions + (() if floats else (NO_TEXT_FLOATS,))

    def check(self, models: Sequence[Model], opts: Mapping[str, Any]) -> None:
        if len(models) != 1:
            raise UnsupportedModelError(
                f"an mlperftiny firmware holds one model, not {len(models)}",
                hint="choose one with --model NAME",
            )
        model = models[0]
        if not model.inputs:
            raise UnsupportedModelError(f"model {model.name!r} has no inputs to load with db")
        for index, spec in enumerate(model.outputs):
            dtype = parse_dtype(spec.dtype)
            if dtype.lanes != 1 or dtype.itemsize not in (1, 2, 4, 8):
                raise UnsupportedModelError(
                    f"model {model.name!r}: output {index} is {spec.dtype}, which the "
                    "benchmark protocol cannot print as numbers"
                )
        if settings(model, opts)["output_scale"] is not None and not any(
            parse_dtype(spec.dtype).code in (CODE_INT, CODE_UINT) for spec in model.outputs
        ):
            raise GenerateError(
                f"option output_scale dequantizes integer outputs; model {model.name!r} has "
                "none (" + ", ".join(spec.dtype for spec in model.outputs) + ")",
                hint="leave output_scale and output_zero_point out",
            )

    def ram_items(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, int]:
        return {"input buffer": sum(input_bytes([plan.model for plan in plans]))}

    def context(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, Any]:
        found = settings(plans[0].model, opts)
        scale = found["output_scale"]
        return {
            "header_includes": [],
            "model_fields": [],
            "defines": {
                "MLF_INPUT_BYTES": f"{sum(input_bytes([plans[0].model]))}u /* db load N: N */"
            },
            "mlperftiny": {
                "name": c_string(found["name"]),
                "profile": c_string(found["profile"]),
                "model": c_string(found["model"]),
                "dequantize": int(scale is not None),
                "scale": f"{float(np.float32(scale or 0.0)):.9e}f",
                "zero_point": int(found["output_zero_point"] or 0),
                "energy": int(found["energy"]),
            },
        }

    def describe(self, plans: Sequence[ModelPlan], opts: Mapping[str, Any]) -> Dict[str, Any]:
        return {"mlperftiny": settings(plans[0].model, opts)}
