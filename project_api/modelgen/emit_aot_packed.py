"""Archive members of an AOT model for TVM 0.14's interface ``packed`` (no USMP).

What TVM writes with ``Executor("aot")``'s defaults and ``Runtime("crt", {"system-lib":
True})``, the form a host-driven microTVM session runs: no header;

- ``<mod>_lib0.c``: the system-lib registry (``tvmgen_<mod>_run``, every operator,
  ``__tvm_main__``, ``get_c_metadata``) and ``tvmgen_<mod>_run``, which hands its arguments
  (the inputs' then the outputs' DLTensors) to ``__tvm_main__`` in the packed convention;
- ``<mod>_lib1.c``: ``tvmgen_<mod>_get_c_metadata``, the tables (``kTvmgenMetadata``) that
  name every input and output in call order with its shape and DLPack type;
- ``<mod>_lib2.c``: the weights as ``const`` arrays in ``.rodata.tvm``, every operator as a
  packed function, and a packed ``__tvm_main__``: it takes the data pointers from its
  DLTensor arguments, the intermediate tensors from ``TVMBackendAllocWorkspace`` (one block
  per storage of the graph plan, freed in reverse), and calls each operator with DLTensors
  it fills on its stack (shape, no strides, the caller's device).
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..read.dtypes import parse_dtype
from ..read.params import save_params
from .emit import OPERATOR_FILE_HEADER, c_string_escape, registry_source
from .emit import input_types as model_inputs
from .emit import output_types as model_outputs
from .emit_aot import MainPlan, aot_relay_text, constant_array
from .lower import Lowered
from .ops import TensorType

PACKED_PARAMS = (
    "TVMValue* args, int* type_code, int num_args, TVMValue* out_value, int* out_type_code, "
    "void* resource_handle"
)


def _run(prefix: str, count: int) -> str:
    """``tvmgen_<mod>_run``: its ``count`` DLTensor arguments handed on to ``__tvm_main__``."""
    lines = [
        '#include "tvm/runtime/c_runtime_api.h"',
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        f"TVM_DLL int32_t {prefix}___tvm_main__({PACKED_PARAMS});",
        "",
        f"int32_t {prefix}_run({PACKED_PARAMS}) {{",
        f"TVMValue tensors[{count}];",
    ]
    lines += [f"tensors[{i}] = ((TVMValue*)args)[{i}];" for i in range(count)]
    lines += [
        f"return {prefix}___tvm_main__((void*)tensors, type_code, num_args, out_value, "
        "out_type_code, resource_handle);",
        "}",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        ";",
    ]
    return "\n".join(lines)


def _tensor_table(key: str, tensors: Sequence[Tuple[str, TensorType]]) -> List[str]:
    lines = []
    for i, (_, t) in enumerate(tensors):
        dims = ", \n".join(f"{d}L" for d in t.shape) or "1L"
        rank = max(len(t.shape), 1)
        lines.append(
            f"static const int64_t kTvmgenMetadata_{key}_{i}_shape[{rank}] = {{\n{dims}}};"
        )
    lines.append(f"static const struct TVMTensorInfo kTvmgenMetadata_{key}[{len(tensors)}] = {{")
    rows = []
    for i, (name, t) in enumerate(tensors):
        dtype = parse_dtype(t.dtype)
        rows.append(
            f'{{\n"{c_string_escape(name.encode())}" /* name*/, \n'
            f"kTvmgenMetadata_{key}_{i}_shape, \n{len(t.shape)}L /* num_shape*/, \n"
            f"{{{dtype.code}, {dtype.bits}, 1}} /* dtype*/}}"
        )
    lines.append(",\n".join(rows))
    lines.append("};")
    return lines


def _c_metadata(prefix: str, ins: Sequence[Tuple[str, TensorType]],
                outs: Sequence[Tuple[str, TensorType]]) -> str:  # fmt: skip
    """``<mod>_lib1.c``: ``get_c_metadata`` and the tables the firmware reads the order from."""
    lines = [
        "#include <inttypes.h>",
        "#include <tvm/runtime/metadata_types.h>",
        "#include <tvm/runtime/c_runtime_api.h>",
        *_tensor_table("inputs", ins),
        *_tensor_table("outputs", outs),
        "static const struct TVMTensorInfo kTvmgenMetadata_workspace_pools[0] = {",
        "};",
        "static const struct TVMConstantInfo kTvmgenMetadata_constant_pools[0] = {",
        "};",
        "static const struct TVMMetadata kTvmgenMetadata[1] = {",
        "{",
        "1L /* version*/, ",
        "kTvmgenMetadata_inputs, ",
        f"{len(ins)}L /* num_inputs*/, ",
        "kTvmgenMetadata_outputs, ",
        f"{len(outs)}L /* num_outputs*/, ",
        "kTvmgenMetadata_workspace_pools, ",
        "0L /* num_workspace_pools*/, ",
        "kTvmgenMetadata_constant_pools, ",
        "0L /* num_constant_pools*/, ",
        f'"{prefix}" /* mod_name*/}}',
        "};",
        "#ifdef __cplusplus",
        'extern "C"',
        "#endif",
        f"TVM_DLL int32_t {prefix}_get_c_metadata(TVMValue* arg_values, int* arg_tcodes, "
        "int num_args, TVMValue* ret_values, int* ret_tcodes, void* resource_handle) {",
        "    ret_values[0].v_handle = (void*) &kTvmgenMetadata;",
        "    ret_tcodes[0] = kTVMOpaqueHandle;",
        "    return 0;",
        "};",
        "",
    ]
    return "\n".join(lines)


def _dltensor(slot: int, pointer: str, t: TensorType, shape_at: int) -> List[str]:
    dtype = parse_dtype(t.dtype)
    tensor = f"  stack_array[{slot}]"
    lines = [f"  stack_shape[{shape_at + d}] = (int64_t){n};" for d, n in enumerate(t.shape)]
    lines += [
        f"{tensor}.data = {pointer};",
        f"{tensor}.shape = &stack_shape[{shape_at}];",
        f"{tensor}.strides = NULL;",
        f"{tensor}.ndim = {len(t.shape)};",
        f"{tensor}.dtype.code = (uint8_t){dtype.code};",
        f"{tensor}.dtype.bits = (uint8_t){dtype.bits};",
        f"{tensor}.dtype.lanes = (uint16_t)1;",
        f"{tensor}.byte_offset = (uint64_t)0;",
        f"{tensor}.device.device_id = dev_id;",
        f"{tensor}.device.device_type = kDLCPU;",
        f"  stack_value[{slot}].v_handle = &stack_array[{slot}];",
        f"  stack_tcode[{slot}] = kTVMDLTensorHandle;",
    ]
    return lines


def _main(main: MainPlan, names: Sequence[str]) -> str:
    """The packed ``__tvm_main__``: arguments ``names`` (inputs then outputs) as DLTensors."""
    slots = max((len(args) for _, args in main.steps), default=1)
    dims = max((sum(len(t.shape) for _, t in args) for _, args in main.steps), default=1)
    lines = [
        '#ifdef __cplusplus\nextern "C"\n#endif',
        f"TVM_DLL int32_t {main.prefix}___tvm_main__(void* args, int32_t* arg_type_ids, "
        "int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {",
        f"  DLTensor stack_array[{slots}];",
        f"  TVMValue stack_value[{slots}];",
        f"  int32_t stack_tcode[{slots}];",
        f"  int64_t stack_shape[{max(dims, 1)}];",
        "  TVMValue ret_val;",
        "  int32_t ret_type_code;",
        "  (void)arg_type_ids; (void)out_ret_value; (void)out_ret_tcode; (void)resource_handle;",
        f"  if (num_args < {len(names)}) {{",
        "    return -1;",
        "  }",
    ]
    for i, name in enumerate(names):
        lines.append(
            f"  void* {name}_buffer_var = ((DLTensor*)(((TVMValue*)args)[{i}].v_handle))->data;"
        )
    lines.append(
        "  int32_t dev_id = ((DLTensor*)(((TVMValue*)args)[0].v_handle))->device.device_id;"
    )
    for var, size in main.allocations:
        lines += [
            f"  void* {var} = TVMBackendAllocWorkspace(1, dev_id, (uint64_t){size}, 0, 8);",
            f"  if ({var} == NULL) {{",
            "    return -1;",
            "  }",
        ]
    for func, args in main.steps:
        shape_at = 0
        for slot, (pointer, t) in enumerate(args):
            lines += _dltensor(slot, pointer, t, shape_at)
            shape_at += len(t.shape)
        lines += [
            f"  if ({func}(stack_value, stack_tcode, {len(args)}, &ret_val, &ret_type_code, "
            "NULL) != 0) {",
            "    return -1;",
            "  }",
        ]
    for var, _ in reversed(main.allocations):
        lines += [
            f"  if (TVMBackendFreeWorkspace(1, dev_id, {var}) != 0) {{",
            "    return -1;",
            "  }",
        ]
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def aot_packed_members(lowered: Lowered) -> Dict[str, bytes]:
    """Every member of one AOT model with interface ``packed`` (paths without ``./``),
    except metadata.json."""
    mod = lowered.module
    main = MainPlan(lowered, numbered=True)
    ins = [(s.name, TensorType(s.shape, s.dtype)) for s in model_inputs(lowered)]
    # get_c_metadata numbers the outputs (output0..), as TVM's tables do, where metadata.json
    # names a single one "output"
    outs = [(f"output{i}", t) for i, t in enumerate(model_outputs(lowered))]
    args = [f"arg{i}" for i in range(len(ins) + len(outs))]
    operators = sorted(lowered.functions)
    registry = [f"{main.prefix}_run", *operators, f"{main.prefix}___tvm_main__",
                f"{main.prefix}_get_c_metadata"]  # fmt: skip
    parts = [OPERATOR_FILE_HEADER]
    parts += [constant_array(f"{main.prefix}_{name}", a) for name, a in lowered.params.items()]
    parts += [lowered.functions[name].text.named(name) for name in operators]
    parts.append(_main(main, args))
    return {
        f"codegen/host/src/{mod}_lib0.c": (
            registry_source(registry, ordered=True) + "\n" + _run(main.prefix, len(args))
        ).encode(),
        f"codegen/host/src/{mod}_lib1.c": _c_metadata(main.prefix, ins, outs).encode(),
        f"codegen/host/src/{mod}_lib2.c": "".join(parts).encode(),
        f"parameters/{mod}.params": save_params({}),
        f"src/{mod}.relay": aot_relay_text(lowered).encode(),
    }
