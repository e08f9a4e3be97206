"""Archive members of an AOT model in the shape TVM 0.14 writes them (interface ``c``,
``unpacked-api``, no USMP; interface ``packed`` is modelgen/emit_aot_packed.py).

``codegen/host/include/tvmgen_<mod>.h`` declares the input and output structs, their sizes,
``tvmgen_<mod>_run`` and the workspace size; ``<mod>_lib0.c`` defines ``tvmgen_<mod>_run``
over ``tvmgen_<mod>___tvm_main__``; ``<mod>_lib1.c`` holds the weights as ``const`` arrays
in ``.rodata.tvm``, every operator as an unpacked function, and ``__tvm_main__``, which
takes the intermediate tensors from ``TVMBackendAllocWorkspace`` (one block per storage of
the graph plan, freed in reverse) and calls each operator with its tensors' pointers. A
``__nop`` (RESHAPE) costs nothing: its output is its input's pointer.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

import numpy as np

from ..read.ctext import sanitize
from ..read.params import save_params
from .cgen import c_type, float_literal
from .emit import (
    DEFAULT_EXPORT_DATETIME,
    DEVICE_CPU,
    TARGET,
    input_types,
    operator_functions,
    output_types,
    relay_text,
    relay_type,
)
from .lower import Lowered
from .ops import TensorType

ALIGN = 16  # TVM's workspace-byte-alignment
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VALUES_PER_LINE = 16


def output_names(lowered: Lowered) -> List[str]:
    count = len(lowered.heads)
    return ["output"] if count == 1 else [f"output{i}" for i in range(count)]


class MainPlan:
    """Which pointer every tensor of the graph is in ``__tvm_main__``, and its calls: each
    operator's function with the (pointer, type) of every argument, inputs then outputs."""

    def __init__(self, lowered: Lowered, *, numbered: bool = False) -> None:
        """``numbered``: the inputs' and outputs' pointers are ``arg<i>_buffer_var`` in call
        order (interface packed) rather than named after them (interface c)."""
        self.lowered = lowered
        self.numbered = numbered
        self.prefix = f"tvmgen_{sanitize(lowered.module)}"
        self.pointer: Dict[int, str] = {}  # root entry -> C expression
        self.root: Dict[int, int] = {}  # entry -> the entry whose storage it is
        self.allocations: List[Tuple[str, int]] = []  # (variable, bytes) in order
        self.steps: List[Tuple[str, List[Tuple[str, TensorType]]]] = []
        self.plan()

    def entry(self, nid: int, index: int) -> int:
        return self.lowered.node_row_ptr[nid] + index

    def find(self, entry: int) -> int:
        while entry in self.root:
            entry = self.root[entry]
        return entry

    def plan(self) -> None:
        low = self.lowered
        count = 0
        for nid in low.arg_nodes:
            name = low.nodes[nid]["name"]
            if name in low.params:
                self.pointer[self.entry(nid, 0)] = f"(void*){self.prefix}_{name}"
                continue
            label = f"arg{count}" if self.numbered else sanitize(name)
            self.pointer[self.entry(nid, 0)] = f"{label}_buffer_var"
            count += 1
        for nid in low.op_nodes:
            node = low.nodes[nid]
            if node["attrs"]["func_name"] == "__nop":
                src = self.entry(*node["inputs"][0][:2])
                self.root[self.entry(nid, 0)] = src
            elif node["attrs"]["func_name"] == "__copy":
                raise ValueError("AOT: a __copy node is not supported")
        for number, (nid, index) in enumerate(low.heads):
            root = self.find(self.entry(nid, index))
            if root in self.pointer:
                raise ValueError(f"AOT: output {number} is not computed by an operator of its own")
            label = f"arg{count + number}" if self.numbered else output_names(low)[number]
            self.pointer[root] = f"{label}_buffer_var"
        storage: Dict[int, str] = {}
        for nid in low.op_nodes:
            node = low.nodes[nid]
            if node["attrs"]["func_name"] == "__nop":
                continue
            count = int(node["attrs"]["num_outputs"])
            for k in range(count):
                root = self.find(self.entry(nid, k))
                if root in self.pointer:
                    continue
                sid = low.storage_ids[root]
                if sid not in storage:
                    storage[sid] = f"sid_{sid}"
                    self.allocations.append((storage[sid], low.storage_bytes[sid]))
                self.pointer[root] = storage[sid]
            entries = [self.entry(i, k) for i, k, _ in node["inputs"]]
            entries += [self.entry(nid, k) for k in range(count)]
            args = [(self.pointer[self.find(e)], low.entry_types[e]) for e in entries]
            self.steps.append((node["attrs"]["func_name"], args))

    def workspace_bytes(self) -> int:
        blocks = sum(-(-size // ALIGN) * ALIGN for _, size in self.allocations)
        used = {name for name in self.lowered.op_functions if name in self.lowered.functions}
        deepest = max((self.lowered.functions[n].text.workspace_bytes for n in used), default=0)
        return blocks + deepest

    def text(self, inputs: List[str], outputs: List[str]) -> str:
        params = ", ".join(f"void* {n}_buffer_var" for n in [*inputs, *outputs])
        lines = [f"TVM_DLL int32_t {self.prefix}___tvm_main__({params}) {{"]
        for var, size in self.allocations:
            lines += [
                f"  void* {var} = TVMBackendAllocWorkspace(1, 0, (uint64_t){size}, 0, 8);",
                f"  if ({var} == NULL) {{",
                "    return -1;",
                "  }",
            ]
        for func, args in self.steps:
            pointers = ", ".join(pointer for pointer, _ in args)
            lines.append(f"  if ({func}({pointers}) != 0 ) return -1;")
        for var, _ in reversed(self.allocations):
            lines += [
                f"  if (TVMBackendFreeWorkspace(1, 0, {var}) != 0) {{",
                "    return -1;",
                "  }",
            ]
        lines += ["  return 0;", "}", ""]
        return "\n".join(lines)


def constant_array(name: str, array: np.ndarray) -> str:
    flat = np.ascontiguousarray(array).reshape(-1)
    dtype = str(array.dtype)
    if dtype == "float32":
        values = [float_literal(float(v)) for v in flat]
    else:
        values = [str(int(v)) for v in flat]
    rows = [
        "  " + ", ".join(values[i : i + VALUES_PER_LINE])
        for i in range(0, len(values), VALUES_PER_LINE)
    ]
    return (
        f'static const {c_type(dtype)} __attribute__((section(".rodata.tvm"), aligned(16))) '
        f"{name}[{max(flat.size, 1)}] = {{\n" + ",\n".join(rows or ["  0"]) + "\n};\n"
    )


def _header(prefix: str, ins: List[Tuple[str, int]], outs: List[Tuple[str, int]], ws: int) -> str:
    guard = f"{prefix.upper()}_H_"
    lines = [f"#ifndef {guard}", f"#define {guard}", "#include <stdint.h>", "",
             "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]  # fmt: skip
    for name, size in [*ins, *outs]:
        lines.append(f"#define {prefix.upper()}_{name.upper()}_SIZE {size}")
    for kind, fields in (("inputs", ins), ("outputs", outs)):
        lines += ["", f"struct {prefix}_{kind} {{"]
        lines += [f"  void* {name};" for name, _ in fields]
        lines.append("};")
    lines += [
        "",
        f"int32_t {prefix}_run(",
        f"  struct {prefix}_inputs* inputs,",
        f"  struct {prefix}_outputs* outputs",
        ");",
        f"#define {prefix.upper()}_WORKSPACE_SIZE {ws}",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        f"#endif // {guard}",
        "",
    ]
    return "\n".join(lines)


def _lib0(prefix: str, inputs: List[str], outputs: List[str]) -> str:
    params = ",".join(f"void* {n}" for n in [*inputs, *outputs])
    args = ",".join([*(f"inputs->{n}" for n in inputs), *(f"outputs->{n}" for n in outputs)])
    return (
        '#include "tvm/runtime/c_runtime_api.h"\n#ifdef __cplusplus\nextern "C" {\n#endif\n'
        f"#include <{prefix}.h>\n"
        f"TVM_DLL int32_t {prefix}___tvm_main__({params});\n"
        f"int32_t {prefix}_run(struct {prefix}_inputs* inputs,struct {prefix}_outputs* outputs) "
        f"{{return {prefix}___tvm_main__({args});\n}}\n"
        "#ifdef __cplusplus\n}\n#endif\n;"
    )


def aot_relay_text(lowered: Lowered) -> str:
    """The Relay stand-in with ``@main``'s result type, whence the reader takes the outputs'
    shapes (an AOT archive records byte sizes only)."""
    text = relay_text(lowered)
    types = [relay_type(t.shape, t.dtype) for t in output_types(lowered)]
    result = types[0] if len(types) == 1 else "(" + ", ".join(types) + ")"
    head, brace, rest = text.partition(") {\n")
    return f"{head}) -> {result} {{\n{rest}" if brace else text


def aot_module_members(lowered: Lowered) -> Dict[str, bytes]:
    """Every member of one AOT model (paths without ``./``), except metadata.json."""
    mod = lowered.module
    main = MainPlan(lowered)
    ins = [(sanitize(s.name), s.nbytes) for s in input_types(lowered)]
    c_names = [n for n, _ in ins]
    if len(set(c_names)) != len(c_names) or not all(IDENTIFIER.match(n) for n in c_names):
        raise ValueError(
            f"AOT: the input names {[s.name for s in input_types(lowered)]} do not make "
            "distinct C identifiers for tvmgen_<name>_inputs"
        )
    outs = [(n, t.nbytes) for n, t in zip(output_names(lowered), output_types(lowered))]
    in_names, out_names = [n for n, _ in ins], [n for n, _ in outs]
    parts = [
        "// tvm target: " + TARGET + "\n#define TVM_EXPORTS\n"
        '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'
        "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n"
    ]
    parts += [constant_array(f"{main.prefix}_{name}", a) for name, a in lowered.params.items()]
    for name in sorted(lowered.functions):
        unpacked = lowered.functions[name].unpacked
        if unpacked is None:  # pragma: no cover - every lowered function has both forms
            raise ValueError(f"AOT: {name} has no unpacked form")
        parts.append(unpacked.named(name))
    parts.append(main.text(in_names, out_names))
    return {
        f"codegen/host/include/{main.prefix}.h": _header(
            main.prefix, ins, outs, main.workspace_bytes()
        ).encode(),
        f"codegen/host/src/{mod}_lib0.c": _lib0(main.prefix, in_names, out_names).encode(),
        f"codegen/host/src/{mod}_lib1.c": "".join(parts).encode(),
        f"parameters/{mod}.params": save_params({}),
        f"src/{mod}.relay": aot_relay_text(lowered).encode(),
    }


def aot_module_metadata(
    lowered: Lowered,
    *,
    export_datetime: str = DEFAULT_EXPORT_DATETIME,
    external_dependencies: object = None,
) -> Dict[str, object]:
    """The model's entry of a version-7 ``metadata.json`` for the AOT executor."""
    main = MainPlan(lowered)
    inputs = {s.name: {"dtype": s.dtype, "size": s.nbytes} for s in input_types(lowered)}
    outputs = {
        n: {"dtype": t.dtype, "size": t.nbytes}
        for n, t in zip(output_names(lowered), output_types(lowered))
    }
    io_bytes = sum(s.nbytes for s in input_types(lowered)) + sum(
        t.nbytes for t in output_types(lowered)
    )
    constants = int(sum(int(a.nbytes) for a in lowered.params.values()))
    entry: Dict[str, object] = {
        "constants_size_bytes": constants,
        "device": DEVICE_CPU,
        "inputs": inputs,
        "io_size_bytes": io_bytes,
        "outputs": outputs,
        "workspace_size_bytes": main.workspace_bytes(),
    }
    metadata: Dict[str, object] = {
        "executors": ["aot"],
        "export_datetime": export_datetime,
        "memory": {
            "functions": {"main": [entry], "operator_functions": operator_functions(lowered)}
        },
        "model_name": lowered.module,
        "style": "full-model",
        "target": [TARGET],
    }
    if external_dependencies:
        metadata["external_dependencies"] = external_dependencies
    return metadata
