"""An AOT archive whose operator calls every CMSIS-NN kernel TVM 0.14 offloads, the way TVM 0.14's
CMSIS-NN code generator writes the calls (``tir_to_runtime.cc``: literal structs, a
``cmsis_nn_context`` of ``{NULL,0}`` or of a buffer TVM sized, ``switch (!status)``), over
parameter sets that take every path the wrappers choose between: 1x1 (fast and strided), 1xN,
generic and dilated convolutions, depthwise convolutions with a channel multiplier of one (3x3
and larger), above one, and of one input channel, batches, fully connected layers with and
without bias, pooling, softmax and element-wise kernels, int8 and int16.

Its output is every call's output bytes, concatenated (:func:`segments` names them). The
reference is what CMSIS-NN v4.1.0, TVM 0.14's target, computes (tests run it on the host): the
calls must mean the same on every CMSIS-NN the adapter covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from mlf_builders import Files, aot_files

NAME = "cov"
Dims = Tuple[int, int, int, int]


@dataclass(frozen=True)
class Case:
    kernel: str  # convolve_wrapper_s8, ...
    input: Dims
    filter: Dims = (1, 1, 1, 1)
    output: Dims = (1, 1, 1, 1)
    stride: Tuple[int, int] = (1, 1)  # w, h
    padding: Tuple[int, int] = (0, 0)
    dilation: Tuple[int, int] = (1, 1)
    bias: bool = True
    ch_mult: int = 1
    activation: Tuple[int, int] = (-128, 127)
    context: int = 0  # a buffer TVM sized (bytes), else {NULL,0}
    input_offset: int = 5
    output_offset: int = -7


def _conv(i: Dims, f: Dims, o: Dims, **kw: object) -> Case:
    return Case("convolve_wrapper_s8", i, f, o, **kw)  # type: ignore[arg-type]


def _dw(i: Dims, f: Dims, o: Dims, **kw: object) -> Case:
    return Case("depthwise_conv_wrapper_s8", i, f, o, **kw)  # type: ignore[arg-type]


CASES: Tuple[Case, ...] = (
    _conv((1, 5, 4, 16), (8, 1, 1, 16), (1, 5, 4, 8)),  # 1x1 fast
    _conv((1, 6, 6, 8), (5, 1, 1, 8), (1, 3, 3, 5), stride=(2, 2)),  # 1x1 strided
    _conv((1, 6, 5, 3), (7, 3, 3, 3), (1, 6, 5, 7), padding=(1, 1)),  # generic
    _conv((1, 1, 12, 4), (6, 1, 3, 4), (1, 1, 12, 6), padding=(1, 0)),  # 1xN
    _conv((1, 7, 7, 4), (3, 3, 3, 4), (1, 7, 7, 3), padding=(2, 2), dilation=(2, 2)),
    _conv((1, 4, 4, 8), (4, 3, 3, 8), (1, 2, 2, 4), bias=False),
    _conv((2, 4, 4, 4), (4, 3, 3, 4), (2, 4, 4, 4), padding=(1, 1)),  # batch
    _conv((1, 5, 5, 5), (9, 2, 2, 5), (1, 2, 2, 9), stride=(2, 2), activation=(0, 127)),
    _conv((1, 9, 6, 1), (12, 3, 3, 1), (1, 9, 6, 12), padding=(1, 1), input_offset=-83),
    _dw((1, 6, 6, 16), (1, 3, 3, 16), (1, 6, 6, 16), padding=(1, 1)),  # 3x3
    _dw((1, 7, 7, 12), (1, 5, 5, 12), (1, 7, 7, 12), padding=(2, 2)),
    _dw((1, 5, 5, 4), (1, 3, 3, 8), (1, 5, 5, 8), padding=(1, 1), ch_mult=2),
    _dw((1, 12, 6, 1), (1, 4, 3, 16), (1, 6, 3, 16), stride=(2, 2), padding=(1, 1), ch_mult=16,
        input_offset=-83),  # one input channel, as KWS's first layer
    _dw((1, 7, 7, 8), (1, 3, 3, 8), (1, 7, 7, 8), padding=(2, 2), dilation=(2, 2)),
    _dw((1, 5, 5, 1), (1, 3, 3, 3), (1, 5, 5, 3), padding=(1, 1), ch_mult=3, bias=False),
    _dw((2, 4, 4, 8), (1, 3, 3, 8), (2, 4, 4, 8), padding=(1, 1)),  # batch
    _dw((1, 6, 6, 16), (1, 3, 3, 16), (1, 6, 6, 16), padding=(1, 1), context=1024),
    Case("fully_connected_s8", (1, 1, 1, 64), (64, 1, 1, 12), (1, 1, 1, 12), input_offset=128,
         output_offset=14),
    Case("fully_connected_s8", (1, 1, 1, 37), (37, 1, 1, 5), (1, 1, 1, 5), bias=False),
    Case("fully_connected_s8", (3, 1, 1, 20), (20, 1, 1, 7), (3, 1, 1, 7)),
    Case("fully_connected_s8", (1, 1, 1, 16), (16, 1, 1, 9), (1, 1, 1, 9), input_offset=0),
    Case("avgpool_s8", (1, 5, 4, 16), (1, 5, 4, 1), (1, 1, 1, 16), stride=(4, 5)),
    Case("avgpool_s8", (1, 6, 6, 8), (1, 2, 2, 1), (1, 3, 3, 8), stride=(2, 2)),
    Case("avgpool_s8", (1, 5, 5, 4), (1, 3, 3, 1), (1, 5, 5, 4), padding=(1, 1)),
    Case("max_pool_s8", (1, 6, 6, 8), (1, 2, 2, 1), (1, 3, 3, 8), stride=(2, 2)),
    Case("max_pool_s8", (1, 5, 5, 4), (1, 3, 3, 1), (1, 5, 5, 4), padding=(1, 1)),
    Case("softmax_s8", (1, 1, 2, 12)),
    Case("elementwise_add_s8", (1, 1, 1, 50)),
    Case("elementwise_mul_s8", (1, 1, 1, 50)),
    Case("convolve_wrapper_s16", (1, 5, 5, 4), (6, 3, 3, 4), (1, 5, 5, 6), padding=(1, 1),
         activation=(-32768, 32767), input_offset=0, output_offset=0),
    Case("convolve_wrapper_s16", (1, 4, 4, 8), (4, 1, 1, 8), (1, 4, 4, 4),
         activation=(-32768, 32767), input_offset=0, output_offset=0),
    Case("depthwise_conv_wrapper_s16", (1, 5, 5, 8), (1, 3, 3, 8), (1, 5, 5, 8), padding=(1, 1),
         activation=(-32768, 32767), input_offset=0, output_offset=0),
    Case("depthwise_conv_wrapper_s16", (1, 4, 4, 3), (1, 3, 3, 6), (1, 4, 4, 6), padding=(1, 1),
         ch_mult=2, activation=(-32768, 32767), input_offset=0, output_offset=0),
    Case("fully_connected_s16", (1, 1, 1, 32), (32, 1, 1, 6), (1, 1, 1, 6),
         activation=(-32768, 32767), input_offset=0, output_offset=0),
    Case("avgpool_s16", (1, 6, 6, 8), (1, 2, 2, 1), (1, 3, 3, 8), stride=(2, 2),
         activation=(-32768, 32767)),
    Case("max_pool_s16", (1, 6, 6, 8), (1, 2, 2, 1), (1, 3, 3, 8), stride=(2, 2),
         activation=(-32768, 32767)),
    Case("softmax_s16", (1, 1, 2, 10)),
    Case("elementwise_add_s16", (1, 1, 1, 40)),
    Case("elementwise_mul_s16", (1, 1, 1, 40)),
)  # fmt: skip


def _elements(dims: Dims) -> int:
    return int(np.prod(dims))


def _bits(case: Case) -> int:
    return 16 if case.kernel.endswith("s16") else 8


def _out_elements(case: Case) -> int:
    if case.kernel.startswith(("softmax", "elementwise")):
        return _elements(case.input)
    return _elements(case.output)


def segments() -> List[Tuple[str, int, int]]:
    """(name, byte offset, bytes) of each call's output in the archive's output."""
    out: List[Tuple[str, int, int]] = []
    at = 0
    for index, case in enumerate(CASES):
        size = _out_elements(case) * _bits(case) // 8
        out.append((f"{index}:{case.kernel}", at, size))
        at += size
    return out


OUTPUT_BYTES = sum(size for _, _, size in segments())


def _array(name: str, ctype: str, values: Sequence[int], section: str = "") -> str:
    body = ", ".join(str(int(v)) for v in values)
    return f"static const {ctype} {name}[{len(values)}]{section} = {{{body}}};"


def _lut(kind: str) -> List[int]:
    """TFLite-like int16 lookup tables for arm_softmax_s16 (513 entries)."""
    if kind == "exp":  # exp(x), x in [-10, 0]
        return [round(math.exp(-10 + 10 * i / 512) * 32767) for i in range(513)]
    return [min(32767, round(32767 / (1 + i / 512))) for i in range(513)]  # 1 / (1 + x)


class _Writer:
    def __init__(self) -> None:
        self.rng = np.random.default_rng(20261128)
        self.decls: List[str] = []
        self.funcs: List[str] = []
        self.calls: List[str] = []
        self.at = 0

    def data(self, name: str, ctype: str, values: np.ndarray) -> str:
        self.decls.append(_array(name, ctype, values.reshape(-1).tolist()))
        return name

    def quant(self, index: int, channels: int) -> Tuple[str, str]:
        mult = self.rng.integers(1 << 30, (1 << 31) - 1, channels)
        shift = self.rng.integers(-9, -5, channels)
        return (self.data(f"mult_{index}", "int32_t", mult),
                self.data(f"shift_{index}", "int32_t", shift))  # fmt: skip

    def activations(self, index: int, case: Case) -> str:
        """The call's input: static values, shifted by the model input's first element."""
        bits = _bits(case)
        n = _elements(case.input)
        limit = 127 if bits == 8 else 4000
        base = self.rng.integers(-limit, limit + 1, n)
        self.decls.append(_array(f"base_{index}", f"int{bits}_t", base))
        self.decls.append(f"static int{bits}_t in_{index}[{n}];")
        self.calls.append(
            f"  for (int i = 0; i < {n}; ++i) in_{index}[i] = (int{bits}_t)(base_{index}[i] + "
            f"(int)x_buffer_var[i % 4]);"
        )
        return f"in_{index}"


def _dims(name: str, d: Dims) -> str:
    return f"  cmsis_nn_dims {name}_dims = {{{d[0]},{d[1]},{d[2]},{d[3]}}};"


def _context(index: int, case: Case, decls: List[str]) -> str:
    if not case.context:
        return "  cmsis_nn_context context= {NULL,0};"
    decls.append(
        f"static int8_t context_buffer_{index}[{case.context}] __attribute__((aligned(16)));"
    )
    return f"  cmsis_nn_context context= {{context_buffer_{index},{case.context}}};"


_ERROR_CHECK = [
    "  switch (!status) {",
    "  case ARM_CMSIS_NN_SUCCESS: break;",
    "  case ARM_CMSIS_NN_ARG_ERROR: return -1;",
    "  case ARM_CMSIS_NN_NO_IMPL_ERROR: return -1;",
    "  }",
]


def _checked(w: _Writer, fn: str, inp: str, lines: List[str]) -> List[str]:
    """A call's function ended as TVM ends it (its error check), and called from main."""
    w.calls.append(f"  if ({fn}({inp}, out + {w.at}) != 0) return -1;")
    return lines + [*_ERROR_CHECK, "  return 0;", "}"]


def _conv_like(w: _Writer, index: int, case: Case) -> List[str]:
    bits = _bits(case)
    fn = f"tvmgen_{NAME}_cmsis_nn_main_{index}"
    inp = w.activations(index, case)
    weights = w.data(f"filter_{index}", "int8_t", w.rng.integers(-127, 128, _elements(case.filter)))
    out_c = case.output[3]
    lines = [f"TVM_DLL int32_t {fn}(void* input_, void* output_) {{",
             f"  void* filter_ = (void*){weights};"]  # fmt: skip
    dw = case.kernel.startswith("depthwise")
    fc = case.kernel.startswith("fully")
    bias = "NULL"
    if case.bias:
        ctype = "int32_t" if bits == 8 else "int64_t"
        limit = 4000 if bits == 8 else 1 << 20
        values = w.rng.integers(-limit, limit, out_c)
        lines.append(f"  void* bias_ = (void*){w.data(f'bias_{index}', ctype, values)};")
        bias = "bias_"
    lines.append(_context(index, case, w.decls))
    lo, hi = case.activation
    if fc:
        mult = int(w.rng.integers(1 << 30, (1 << 31) - 1))
        lines += [
            f"  cmsis_nn_activation activation = {{{lo},{hi}}};",
            f"  cmsis_nn_fc_params fc_params = {{{case.input_offset}, 0, {case.output_offset}, "
            "activation};",
            f"  cmsis_nn_per_tensor_quant_params quant_params = {{{mult}, -7}};",
        ]
    else:
        mult, shift = w.quant(index, out_c)
        struct = "cmsis_nn_dw_conv_params" if dw else "cmsis_nn_conv_params"
        extra = f", {case.ch_mult}" if dw else ""
        lines += [
            f"  cmsis_nn_tile stride = {{{case.stride[0]},{case.stride[1]}}};",
            f"  cmsis_nn_tile padding = {{{case.padding[0]},{case.padding[1]}}};",
            f"  cmsis_nn_tile dilation = {{{case.dilation[0]},{case.dilation[1]}}};",
            f"  cmsis_nn_activation activation = {{{lo},{hi}}};",
            f"  {struct} conv_params = {{{case.input_offset}, {case.output_offset}{extra}, "
            "stride, padding, dilation, activation};",
            f"  void* multiplier_ = (void*){mult};",
            f"  void* shift_ = (void*){shift};",
            "  cmsis_nn_per_channel_quant_params quant_params = {multiplier_, shift_};",
        ]
    lines += [
        _dims("input", case.input),
        _dims("filter", case.filter),
        _dims("bias", (1, 1, 1, out_c)),
        _dims("output", case.output),
        f"  arm_cmsis_nn_status status = arm_{case.kernel}(&context, "
        f"&{'fc_params' if fc else 'conv_params'}, &quant_params, &input_dims, input_, "
        f"&filter_dims, filter_, &bias_dims, {bias}, &output_dims, output_);",
    ]
    return _checked(w, fn, inp, lines)


def _pool(w: _Writer, index: int, case: Case) -> List[str]:
    fn = f"tvmgen_{NAME}_cmsis_nn_main_{index}"
    inp = w.activations(index, case)
    lo, hi = case.activation
    lines = [
        f"TVM_DLL int32_t {fn}(void* input_, void* output_) {{",
        _context(index, case, w.decls),
        f"  cmsis_nn_tile stride = {{{case.stride[0]},{case.stride[1]}}};",
        f"  cmsis_nn_tile padding = {{{case.padding[0]},{case.padding[1]}}};",
        f"  cmsis_nn_activation activation = {{{lo},{hi}}};",
        "  cmsis_nn_pool_params pool_params = {stride, padding, activation};",
        _dims("input", case.input),
        _dims("filter", case.filter),
        _dims("output", case.output),
        f"  arm_cmsis_nn_status status = arm_{case.kernel}(&context, &pool_params, "
        "&input_dims, input_, &filter_dims, &output_dims, output_);",
    ]
    return _checked(w, fn, inp, lines)


def _direct(w: _Writer, index: int, case: Case) -> List[str]:
    fn = f"tvmgen_{NAME}_cmsis_nn_main_{index}"
    inp = w.activations(index, case)
    n = _elements(case.input)
    k = case.kernel
    lines = [f"TVM_DLL int32_t {fn}(void* input_, void* output_) {{"]
    if k == "softmax_s8":
        lines.append(f"  arm_softmax_s8(input_, {case.input[2]}, {case.input[3]}, 1242899200, 24, "
                     "-124, output_);")  # fmt: skip
    elif k == "softmax_s16":
        exp = w.data(f"exp_lut_{index}", "int16_t", np.array(_lut("exp")))
        one = w.data(f"one_lut_{index}", "int16_t", np.array(_lut("one")))
        lines += [
            f"  cmsis_nn_softmax_lut_s16 softmax_params= {{(int16_t*){exp}, (int16_t*){one}}};",
            f"  arm_cmsis_nn_status status = arm_softmax_s16(input_, {case.input[2]}, "
            f"{case.input[3]}, 1718013132, 1, &softmax_params, output_);",
            *_ERROR_CHECK,
        ]
    else:
        second = w.activations(index + 1000, case)
        if k == "elementwise_add_s8":
            args = (f"input_, {second}, 3, 1073741824, 0, -2, 1073741824, 0, 20, output_, 1, "
                    f"1073741824, -19, -128, 127, {n}")  # fmt: skip
        elif k == "elementwise_mul_s8":
            args = f"input_, {second}, 3, -2, output_, 1, 1073741824, -7, -128, 127, {n}"
        elif k == "elementwise_add_s16":
            args = (f"input_, {second}, 0, 1073741824, 0, 0, 1073741824, 0, 15, output_, 0, "
                    f"1073741824, -15, -32768, 32767, {n}")  # fmt: skip
        else:
            args = f"input_, {second}, 0, 0, output_, 0, 1073741824, -15, -32768, 32767, {n}"
        lines.append(f"  arm_{k}({args});")
    lines += ["  return 0;", "}"]
    w.calls.append(f"  if ({fn}({inp}, out + {w.at}) != 0) return -1;")
    return lines


def coverage_files(usmp: bool = False) -> Files:
    """The archive's members (AOT, interface c; ``x`` float32[1,4] in, ``output`` int8 out)."""
    files = aot_files(NAME, usmp=usmp, outputs=[("output", OUTPUT_BYTES)])
    w = _Writer()
    functions: List[str] = []
    for index, case in enumerate(CASES):
        if case.kernel.startswith(("convolve", "depthwise", "fully")):
            functions += _conv_like(w, index, case)
        elif case.kernel.startswith(("avgpool", "max_pool")):
            functions += _pool(w, index, case)
        else:
            functions += _direct(w, index, case)
        w.at += dict((n, s) for n, _, s in segments())[f"{index}:{case.kernel}"]
    text = [
        "// tvm target: cmsis-nn",
        "#define TVM_EXPORTS",
        '#include "tvm/runtime/c_runtime_api.h"',
        '#include "tvm/runtime/c_backend_api.h"',
        "#include <stdint.h>",
        "#include <stdlib.h>",
        "#include <arm_nnfunctions.h>",
        "#include <arm_nn_types.h>",
        "#include <arm_nn_math_types.h>",
        *w.decls,
        *functions,
        f"TVM_DLL int32_t tvmgen_{NAME}___tvm_main__(float* x_buffer_var, "
        "int8_t* output_buffer_var) {",
        "  int8_t* out = output_buffer_var;",
        *w.calls,
        "  return 0;",
        "}",
        "",
    ]
    files[f"codegen/host/src/{NAME}_lib1.c"] = "\n".join(text).encode()
    metadata = (
        files["metadata.json"]
        .decode()
        .replace('"c -keys=cpu"', '"c -keys=cpu -model=host", "cmsis-nn "')
    )
    files["metadata.json"] = metadata.encode()
    return files


def split(output: np.ndarray) -> Dict[str, bytes]:
    """The archive's output cut into the calls' outputs."""
    raw = np.asarray(output, dtype=np.int8).reshape(-1).tobytes()
    return {name: raw[at : at + size] for name, at, size in segments()}


def differences(got: np.ndarray, want: np.ndarray) -> List[str]:
    """The calls whose output bytes differ."""
    a, b = split(got), split(want)
    return [name for name in a if a[name] != b.get(name)]


def inputs(seed: Optional[int] = None) -> Dict[str, np.ndarray]:
    x = np.zeros((1, 4), dtype=np.float32)
    if seed is not None:
        x[:] = np.random.default_rng(seed).integers(-20, 20, (1, 4))
    return {"x": x}


def _tar_files(path: Path) -> Files:
    import tarfile

    files: Files = {}
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            if member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                files[member.name.lstrip("./") if member.name.startswith("./") else member.name] = (
                    handle.read()
                )
    return files


def _renamed(files: Files, old: str, new: str) -> Files:
    """A TVM model's members with the model renamed (C symbols, header, file names, metadata)."""
    out: Files = {}
    pairs = [
        (f"tvmgen_{old}_", f"tvmgen_{new}_"),
        (f"TVMGEN_{old.upper()}_", f"TVMGEN_{new.upper()}_"),
        (f"tvmgen_{old}.h", f"tvmgen_{new}.h"),
    ]
    for name, data in files.items():
        target = name.replace(f"/{old}_lib", f"/{new}_lib").replace(
            f"tvmgen_{old}.h", f"tvmgen_{new}.h"
        )
        target = target.replace(f"src/{old}.relay", f"src/{new}.relay")
        target = target.replace(f"parameters/{old}.params", f"parameters/{new}.params")
        if name.endswith((".c", ".h")) and name.startswith("codegen/"):
            text = data.decode()
            for a, b in pairs:
                text = text.replace(a, b)
            data = text.encode()
        out[target] = data
    return out


def combined_files(graph_tar: Path, aot_tar: Path) -> Files:
    """One v7 archive of three models for one firmware: TVM's KWS graph archive (``kws``), its
    AOT + USMP archive renamed ``kwsa``, and the call-coverage model (``cov``)."""
    import json

    graph = _tar_files(graph_tar)
    aot = _renamed(_tar_files(aot_tar), "kws", "kwsa")
    cov = coverage_files()
    modules = {}
    for files, name in ((graph, "kws"), (aot, "kwsa"), (cov, NAME)):
        meta = json.loads(files.pop("metadata.json"))
        (module,) = meta["modules"].values()
        module["model_name"] = name
        modules[name] = module
    merged: Files = {**cov, **graph, **aot}
    merged["metadata.json"] = json.dumps({"version": 7, "modules": modules}, indent=2).encode()
    return merged
