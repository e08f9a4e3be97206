"""C text in the shape TVM's C backend (target ``c``) writes it.

An operator is written as a body of statements over named buffers; :func:`render_function`
wraps it in TVM's packed-function prologue (argument unpacking, DLTensor field reads, the
empty stride checks) and the workspace allocation/free protocol, so every kernel in the
factory has exactly the calling convention generated code has (spec tvm-c-abi.md §2–3).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterator, List, Sequence, Tuple

import numpy as np

from ..read.dtypes import parse_dtype

# TVM puts constant-size temporaries under this many bytes on the C stack and everything
# else in TVMBackendAllocWorkspace memory.
STACK_LIMIT_BYTES = 1024
# Our runtime (and TVM's) hands out workspace blocks on 64-byte boundaries.
WORKSPACE_ALIGN = 64
NAME_PLACEHOLDER = "@FUNC@"

C_TYPES = {
    "float32": "float",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
}

FUNCTION_SIGNATURE = (
    "TVM_DLL int32_t {name}(void* args, int32_t* arg_type_ids, int32_t num_args, "
    "void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {{"
)


def c_type(dtype: str) -> str:
    try:
        return C_TYPES[dtype]
    except KeyError:
        raise ValueError(f"the model factory has no C type for dtype {dtype!r}") from None


def float_literal(value: float) -> str:
    """A float32 constant spelled so that it parses back to the identical float32."""
    with np.errstate(over="ignore"):
        as_float32 = float(np.float32(value))
    if not math.isfinite(as_float32):
        raise ValueError(f"{value} has no finite float32 spelling in C")
    if as_float32 == 0.0:
        return "0.000000e+00f"
    return f"{as_float32:.8e}f"


def index(*terms: Tuple[str, int], offset: int = 0) -> str:
    """``index(("i", 64), ("k", 1))`` → ``((i * 64) + k)``: a linear index, TVM-parenthesised.

    Terms whose variable is ``"0"`` (a loop of extent 1) or whose stride is 0 drop out.
    """
    parts = [
        var if stride == 1 else f"({var} * {stride})"
        for var, stride in terms
        if stride and var != "0"
    ]
    if not parts:
        return str(offset)
    text = parts[0]
    for part in parts[1:]:
        text = f"({text} + {part})"
    if offset:
        text = f"({text} {'+' if offset > 0 else '-'} {abs(offset)})"
    return text


@dataclass(frozen=True)
class Buffer:
    """A tensor as the C body sees it: a ``void*`` variable and its element type."""

    var: str
    dtype: str
    shape: Tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __getitem__(self, idx: str) -> str:
        return f"(({c_type(self.dtype)}*){self.var})[{idx}]"


@dataclass(frozen=True)
class Scratch:
    """A temporary buffer: on the stack when small, from the workspace otherwise."""

    name: str
    dtype: str
    count: int

    @property
    def nbytes(self) -> int:
        return self.count * np.dtype(self.dtype).itemsize

    @property
    def on_stack(self) -> bool:
        return self.nbytes < STACK_LIMIT_BYTES


class Body:
    """Collects indented C statements."""

    def __init__(self) -> None:
        self.lines: List[str] = []
        self.depth = 1
        self.scratches: List[Scratch] = []
        self.includes: List[str] = []  # headers the body needs (#include "name")
        self.helpers: Dict[str, str] = {}  # static C functions the body calls, by name
        self.shared: FrozenSet[str] = frozenset()  # share keys of more than one operator

    def helper(self, name: str, text: str) -> None:
        """A ``static`` C function (``text``) written once before every function that calls
        it in a file, behind an include guard: operators of one shape share its code."""
        self.helpers[name] = text

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header + " {")
        self.depth += 1
        yield
        self.depth -= 1
        self.line("}")

    def include(self, header: str) -> None:
        """Asks for ``#include "header"`` before the function (a library's declarations), or
        for ``header`` as it is where it starts with ``#`` (``#if ... #include <...> #endif``)."""
        if header not in self.includes:
            self.includes.append(header)

    def loop(self, var: str, extent: int) -> contextlib.AbstractContextManager:
        return self.block(f"for (int32_t {var} = 0; {var} < {extent}; ++{var})")

    def scratch(self, name: str, dtype: str, count: int) -> Buffer:
        """Declares a temporary; stack arrays are declared here, workspace ones up front."""
        buffer = Scratch(name, dtype, count)
        if buffer.on_stack:
            self.line(f"{c_type(dtype)} {name}[{count}];")
        else:
            self.scratches.append(buffer)
        return Buffer(name, dtype, (count,))


@dataclass
class FunctionText:
    """One operator function: its C text (name still a placeholder) and workspace use."""

    text: str
    workspace: Sequence[Scratch] = field(default_factory=tuple)

    @property
    def workspace_bytes(self) -> int:
        """Peak workspace: every block is live for the whole call, each 64-byte aligned."""
        return sum(-(-s.nbytes // WORKSPACE_ALIGN) * WORKSPACE_ALIGN for s in self.workspace)

    def named(self, name: str) -> str:
        return self.text.replace(NAME_PLACEHOLDER, name)


def data_var(arg: str) -> str:
    """The variable holding an argument's data pointer (TVM appends ``_1``)."""
    return f"{arg}_1"


def render_function(arg_names: Sequence[str], body: Body) -> FunctionText:
    """TVM's packed-function wrapper around ``body`` (the name is filled in later)."""
    name = NAME_PLACEHOLDER
    if set(arg_names) & {data_var(arg) for arg in arg_names}:
        raise ValueError(f"argument names {arg_names} collide with their data variables")
    lines = _includes(body) + helper_lines(body) + ["#ifdef __cplusplus", 'extern "C"', "#endif"]
    lines.append(FUNCTION_SIGNATURE.format(name=name))
    lines += [f"  int32_t {arg}_code = arg_type_ids[{i}];" for i, arg in enumerate(arg_names)]
    lines += [
        f"  void* {arg} = (((TVMValue*)args)[{i}].v_handle);" for i, arg in enumerate(arg_names)
    ]
    for i, arg in enumerate(arg_names):
        tensor = f"(((DLTensor*){arg})[0]"
        lines.append(f"  void* {data_var(arg)} = {tensor}.data);")
        lines.append(f"  void* {name}_{arg}_shape = {tensor}.shape);")
        lines.append(f"  void* {name}_{arg}_strides = {tensor}.strides);")
        if i == 0:
            lines.append(f"  int32_t dev_id = {tensor}.device.device_id);")
    for arg in arg_names:
        lines += [f"  if (!({name}_{arg}_strides == NULL)) {{", "  }"]
    # TVM leaves these unused (asserts are off for target c); the casts keep -Wall quiet.
    lines += [f"  (void){arg}_code; (void){name}_{arg}_shape;" for arg in arg_names]
    workspace = list(body.scratches)
    if not workspace:
        lines.append("  (void)dev_id;")
    return _with_workspace(lines, workspace, body)


UNPACKED_SIGNATURE = "TVM_DLL int32_t {name}({params}) {{"


def render_unpacked(arg_names: Sequence[str], body: Body) -> FunctionText:
    """The same body as an unpacked function (TVM's ``unpacked-api``, AOT's interface c):
    each argument a data pointer, named as the body reads it (``p0_1``)."""
    params = ", ".join(f"void* {data_var(arg)}" for arg in arg_names)
    lines = _includes(body) + helper_lines(body) + ["#ifdef __cplusplus", 'extern "C"', "#endif"]
    lines.append(UNPACKED_SIGNATURE.format(name=NAME_PLACEHOLDER, params=params))
    workspace = list(body.scratches)
    if workspace:
        lines.append("  int32_t dev_id = 0;")
    return _with_workspace(lines, workspace, body)


def _includes(body: Body) -> List[str]:
    """The headers a body asked for (guarded headers: included again is harmless); an entry
    that starts with ``#`` is preprocessor text as it is (headers included conditionally)."""
    return [h if h.startswith("#") else f'#include "{h}"' for h in body.includes]


def helper_lines(body: Body) -> List[str]:
    """The body's helper functions, each behind an include guard (one copy per file)."""
    lines: List[str] = []
    for name, text in body.helpers.items():
        guard = f"MLF_HELPER_{name}"
        lines += [f"#ifndef {guard}", f"#define {guard}", text.rstrip("\n"), "#endif"]
    return lines


def _with_workspace(lines: List[str], workspace: List[Scratch], body: Body) -> FunctionText:
    """The function's text: ``lines`` (its head), each scratch taken from the workspace in
    order, the body, the scratches given back in reverse (LIFO) order."""
    for scratch in workspace:
        hint = parse_dtype(scratch.dtype)  # TVMBackendAllocWorkspace's DLPack code and bits
        lines += [
            f"  void* {scratch.name} = TVMBackendAllocWorkspace(1, dev_id, "
            f"(uint64_t){scratch.nbytes}, {hint.code}, {hint.bits});",
            f"  if ({scratch.name} == NULL) {{",
            "    return -1;",
            "  }",
        ]
    lines += body.lines
    for scratch in reversed(workspace):
        lines += [
            f"  if (TVMBackendFreeWorkspace(1, dev_id, {scratch.name}) != 0) {{",
            "    return -1;",
            "  }",
        ]
    lines += ["  return 0;", "}", ""]
    return FunctionText("\n".join(lines) + "\n", tuple(workspace))
