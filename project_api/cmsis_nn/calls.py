"""Which CMSIS-NN API a model's generated C was written for, and each call it makes.

TVM's CMSIS-NN code generator (``tir_to_runtime.cc``) writes one function per offloaded
operator, every argument a literal: ``cmsis_nn_context context= {NULL,0};``, the tiles,
activation and parameter structs, ``cmsis_nn_dims input_dims = {1,49,10,1};`` …, then the
call. Its shape tells the API:

- ``arm_cmsis_nn_status status = arm_X(&context, …);`` then ``switch (!status)``: TVM 0.12 to
  0.18, written for CMSIS-NN v4 (v4.1.0 from TVM 0.13 on: its buffer sizes, no kernel sums,
  int64 bias pointers for int16 convolutions);
- ``arm_status status = arm_X(…)`` / ``ARM_MATH_SUCCESS``: TVM 0.11 and older, written for the NN
  part of CMSIS 5.

``arm_softmax_s8`` and the element-wise kernels are called directly with literal arguments in
both. Anything else that mentions ``arm_*`` (hand-written code, the factory's extern calls) is
not TVM's and is left as it is.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

API_V4 = "v4"  # TVM 0.12-0.18: CMSIS-NN v4 (v4.1.0 from TVM 0.13)
API_CMSIS5 = "cmsis5"  # TVM <= 0.11: CMSIS 5's NN

# The calls TVM 0.14 makes that take a cmsis_nn_context (EmitConv2D, EmitFullyConnected,
# EmitPool2D) and whose meaning the adapter (crt/cmsis_nn/) keeps: scratch sizes, kernel sums,
# bias layout. Max pooling takes a context but never uses it.
ADAPTED_KERNELS = tuple(
    f"{kernel}_{bits}"
    for kernel in ("convolve_wrapper", "depthwise_conv_wrapper", "fully_connected", "avgpool")
    for bits in ("s8", "s16")
)
CONTEXT_KERNELS = ADAPTED_KERNELS + ("max_pool_s8", "max_pool_s16")
# Called without a context: arm_softmax_s16 with a status, the others bare.
DIRECT_KERNELS = (
    "softmax_s8",
    "softmax_s16",
    "elementwise_add_s8",
    "elementwise_add_s16",
    "elementwise_mul_s8",
    "elementwise_mul_s16",
)
# Arguments TVM passes to each directly called kernel (a different count is not TVM's call).
_DIRECT_ARGS = {
    "softmax_s8": 7,
    "softmax_s16": 7,
    "elementwise_add_s8": 16,
    "elementwise_add_s16": 16,
    "elementwise_mul_s8": 11,
    "elementwise_mul_s16": 11,
}

_FUNCTION_START = re.compile(r"^[A-Za-z_][^;\n]*\)\s*\{\s*$", re.MULTILINE)
# A word not preceded by another word character (read.code.NAME's look-behind): each letter
# of a long word would otherwise start a scan to its end.
_FUNCTION_NAME = re.compile(r"(\w(?<!\w\w)\w*)\s*\(")
# "arm_" at a word's start (a look-behind after it, not a \b before it, lets the engine skip
# ahead to it).
_STATUS_CALL = re.compile(
    r"(arm_(?<!\warm_)(?:cmsis_nn_)?status)\s+status\s*=\s*arm_(\w+)\s*\(([^;]{0,2000}?)\)\s*;"
)
# TVM writes each call on one line (a call that spanned lines made every line a scan).
_DIRECT_CALL = re.compile(r"^[ \t]*arm_(\w+)\s*\(([^;{}\n]{0,2000}?)\)\s*;", re.MULTILINE)
_INT = r"\s*(-?\d+)\s*"
_CONTEXT = re.compile(r"cmsis_nn_context\s+context\s*=\s*\{\s*(\w+)\s*," + _INT + r"\}\s*;")
_TILE = re.compile(
    r"cmsis_nn_tile\s+(stride|padding|dilation)\s*=\s*\{" + _INT + "," + _INT + r"\}"
)
_DIMS = re.compile(
    r"cmsis_nn_dims\s+(input|filter|bias|output)_dims\s*=\s*\{"
    + _INT + "," + _INT + "," + _INT + "," + _INT + r"\}"
)  # fmt: skip
_CONV = re.compile(r"cmsis_nn_conv_params\s+conv_params\s*=\s*\{" + _INT + "," + _INT + ",")
_DW_CONV = re.compile(
    r"cmsis_nn_dw_conv_params\s+conv_params\s*=\s*\{" + _INT + "," + _INT + "," + _INT + ","
)
_FC = re.compile(r"cmsis_nn_fc_params\s+fc_params\s*=\s*\{" + _INT + "," + _INT + "," + _INT + ",")

Dims = Tuple[int, int, int, int]  # n, h, w, c
Tile = Tuple[int, int]  # w, h


@dataclass(frozen=True)
class CallSite:
    """One call TVM generated: the kernel (``convolve_wrapper_s8``, without ``arm_``), where,
    and the literal arguments it passes (what the adapter's memory plan needs)."""

    kernel: str
    function: str
    path: Path
    line: int
    context_bytes: int = 0  # the scratch TVM sized for its target's CPU (0: {NULL,0})
    dims: Dict[str, Dims] = field(default_factory=dict)  # input, filter, bias, output
    tiles: Dict[str, Tile] = field(default_factory=dict)  # stride, padding, dilation
    input_offset: int = 0
    ch_mult: int = 0  # depthwise only

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}: arm_{self.kernel} in {self.function}"

    def dim(self, name: str) -> Dims:
        return self.dims.get(name, (1, 1, 1, 1))

    def tile(self, name: str) -> Tile:
        return self.tiles.get(name, (1, 1) if name != "padding" else (0, 0))


@dataclass(frozen=True)
class CmsisNnCalls:
    """The CMSIS-NN calls of a model's C as TVM wrote them: ``api`` (:data:`API_V4`,
    :data:`API_CMSIS5`, or None when nothing is TVM's), every call site in source order."""

    api: Optional[str]
    sites: Tuple[CallSite, ...] = ()

    @property
    def kernels(self) -> List[str]:
        """The kernels called, each once, in first-call order."""
        seen: List[str] = []
        for site in self.sites:
            if site.kernel not in seen:
                seen.append(site.kernel)
        return seen

    @property
    def adapted(self) -> List[CallSite]:
        """The calls whose meaning the adapter keeps (:data:`ADAPTED_KERNELS`)."""
        return [s for s in self.sites if s.kernel in ADAPTED_KERNELS]

    def describe(self) -> str:
        names = ", ".join(f"arm_{k}" for k in self.kernels)
        return f"{len(self.sites)} call{'s' if len(self.sites) != 1 else ''} ({names})"


def _split_functions(text: str) -> List[Tuple[int, str]]:
    """(offset, text) of each function TVM wrote (they start at column 0, ``{`` ending the line)."""
    starts = [m.start() for m in _FUNCTION_START.finditer(text)]
    bounds = starts + [len(text)]
    return [(bounds[i], text[bounds[i] : bounds[i + 1]]) for i in range(len(starts))]


def _args(text: str) -> List[str]:
    return [a.strip() for a in text.split(",")] if text.strip() else []


def _facts(body: str) -> Dict[str, Any]:
    """What a function's body sets up for its calls (context, dims, tiles, offsets): read
    once per function, however many calls it makes."""
    context = _CONTEXT.search(body)
    context_bytes = 0
    if context is not None and context.group(1) != "NULL":
        context_bytes = int(context.group(2))
    dims = {m.group(1): tuple(int(m.group(i)) for i in range(2, 6)) for m in _DIMS.finditer(body)}
    tiles = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _TILE.finditer(body)}
    input_offset = ch_mult = 0
    dw = _DW_CONV.search(body)
    conv = _CONV.search(body)
    fc = _FC.search(body)
    if dw is not None:
        input_offset, ch_mult = int(dw.group(1)), int(dw.group(3))
    elif conv is not None:
        input_offset = int(conv.group(1))
    elif fc is not None:
        input_offset = int(fc.group(1))
    return {
        "context_bytes": context_bytes,
        "dims": dims,
        "tiles": tiles,
        "input_offset": input_offset,
        "ch_mult": ch_mult,
    }


class _Lines:
    """Line numbers of offsets in ``text``, its line breaks found once (not counted again
    from the start for each call)."""

    def __init__(self, text: str) -> None:
        self.breaks = [m.start() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> int:
        return bisect.bisect_left(self.breaks, offset) + 1


def find_cmsis_nn_calls(sources: Iterable[Union[Path, str]]) -> CmsisNnCalls:
    """The CMSIS-NN calls TVM wrote into ``sources`` (C files); unreadable files are skipped
    (the reader has checked them already)."""
    sites: List[CallSite] = []
    apis = set()
    for source in sources:
        path = Path(source)
        if path.suffix not in (".c", ".cc", ".cpp"):
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "arm_" not in text:
            continue
        lines = _Lines(text)
        for offset, body in _split_functions(text):
            header = _FUNCTION_NAME.search(body.split("\n", 1)[0].split("(", 1)[0] + "(")
            function = header.group(1) if header else "?"
            calls: List[Tuple[str, int]] = []  # (kernel, offset in body)
            for match in _STATUS_CALL.finditer(body):
                kind, kernel = match.group(1), match.group(2)
                if kernel not in CONTEXT_KERNELS + ("softmax_s16",):
                    continue
                apis.add(API_V4 if kind == "arm_cmsis_nn_status" else API_CMSIS5)
                calls.append((kernel, match.start()))
            for match in _DIRECT_CALL.finditer(body):
                kernel = match.group(1)
                if _DIRECT_ARGS.get(kernel) != len(_args(match.group(2))):
                    continue
                if kernel == "softmax_s16":
                    continue  # called with a status (above)
                calls.append((kernel, match.start()))
            facts = _facts(body) if calls else {}
            for kernel, at in calls:
                line = lines.at(offset + at)
                sites.append(
                    CallSite(kernel=kernel, function=function, path=path, line=line, **facts)
                )
    api = None
    if apis:
        api = API_CMSIS5 if API_CMSIS5 in apis else API_V4
    elif sites:
        api = API_V4  # only direct calls: the same in every API TVM wrote
    return CmsisNnCalls(api, tuple(sites))
