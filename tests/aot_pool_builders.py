"""AOT models in the configurations where USMP pools cross the entry point, written as TVM
0.14 writes them (interface_c.cc and source_module.cc): pools the caller gives
``tvmgen_<mod>_run`` (``--workspace-pools``), a constant pool whose bytes are in the header,
inputs and outputs mapped inside the pools (``tir.usmp.use_workspace_io``), and the packed
interface's ``tvmgen_<mod>_run`` wrapper (with USMP pools appended, or unpacking the
arguments for a ``__tvm_main__`` built with ``unpacked-api=1``).

Every form computes what :func:`mlf_builders.aot_reference` gives for one output of 8 int8
elements: ``x`` float32[1,4] in, ``output[i] = int8(2 * x[i % 4])``.
"""

from __future__ import annotations

import json
from typing import List

from mlf_builders import STANDALONE_CRT, Files, model_metadata, write_dir

from project_api.read.params import save_params

FORMS = ("caller_pool", "constant_pool", "workspace_io", "packed_usmp", "packed_unpacked")
POOL_BYTES = 64  # scratch at 0..15, and with workspace_io x at 32 and output at 48
TWO = "0x00, 0x00, 0x00, 0x40"  # 2.0f, little-endian: the constant pool's bytes

POOLS_PARAM = "  struct tvmgen_default_workspace_pools* workspace_pools"
PACKED_PARAMS = (
    "TVMValue* args, int* type_code, int num_args, TVMValue* out_value, int* out_type_code, "
    "void* resource_handle"
)
_INCLUDES = '#include "tvm/runtime/c_runtime_api.h"\n#include <stdint.h>\n'
# The operator: output[i] = int8(scale * x[i % 4]), with 16 bytes of scratch.
_OP = """TVM_DLL int32_t tvmgen_default_fused_op(float* p0, int8_t* T_out, float* scale,
    uint8_t* pool) {
  float* tmp = (float*)&pool[0];
  for (int i = 0; i < 4; ++i) tmp[i] = *scale * p0[i];
  for (int i = 0; i < 8; ++i) T_out[i] = (int8_t)(int)tmp[i % 4];
  return 0;
}
"""


def pool_form_files(form: str) -> Files:
    """The archive of AOT model ``default`` in ``form`` (one of :data:`FORMS`)."""
    meta = model_metadata("default", 7, executor="aot", workspace=POOL_BYTES,
                          dependencies=[STANDALONE_CRT])  # fmt: skip
    main = meta["memory"]["functions"]["main"][0]
    main["inputs"] = {"x": {"size": 16, "dtype": "float32"}}
    main["outputs"] = {"output": {"size": 8, "dtype": "int8"}}
    files: Files = {
        "metadata.json": json.dumps({"version": 7, "modules": {"default": meta}}).encode(),
        "parameters/default.params": save_params({}),
        "runtime/include/tvm/runtime/crt/module.h": b"/* crt */\n",
        "templates/crt_config.h.template": b"/* template */\n",
        "src/default.relay": b"def @main(%x: Tensor[(1, 4), float32]) -> Tensor[(8), int8] {\n"
        b"  %x\n}\n",
    }
    if form.startswith("packed"):
        files["codegen/host/src/default_lib0.c"] = _packed_lib0(form == "packed_usmp").encode()
        files["codegen/host/src/default_lib1.c"] = _packed_lib1(form == "packed_usmp").encode()
    else:
        files["codegen/host/include/tvmgen_default.h"] = _header(form).encode()
        files["codegen/host/src/default_lib0.c"] = _c_lib0(form).encode()
        files["codegen/host/src/default_lib1.c"] = _c_lib1(form).encode()
    return files


# --- interface c: the header and the wrapper TVM writes ------------------------------------


def _header(form: str) -> str:
    members = ["  void* sram;"] + (["  void* weights;"] if form == "constant_pool" else [])
    lines = [
        "#ifndef TVMGEN_DEFAULT_H_", "#define TVMGEN_DEFAULT_H_", "#include <stdint.h>", "",
        "#define TVMGEN_DEFAULT_X_SIZE 16", "#define TVMGEN_DEFAULT_OUTPUT_SIZE 8",
        "struct tvmgen_default_inputs {", "  void* x;", "};", "",
        "struct tvmgen_default_outputs {", "  void* output;", "};", "",
        "struct tvmgen_default_workspace_pools {", *members, "};", "",
    ]  # fmt: skip
    if form == "workspace_io":
        for kind in ("inputs", "outputs"):
            lines += [f"struct tvmgen_default_{kind} tvmgen_default_map_{kind}(", POOLS_PARAM,
                      ");", ""]  # fmt: skip
        lines += ["int32_t tvmgen_default_run(", POOLS_PARAM, ");"]
    else:
        lines += ["int32_t tvmgen_default_run(", "  struct tvmgen_default_inputs* inputs,",
                  "  struct tvmgen_default_outputs* outputs,", POOLS_PARAM, ");"]  # fmt: skip
    lines += [f"#define TVMGEN_DEFAULT_WORKSPACE_SIZE {POOL_BYTES}",
              f"#define TVMGEN_DEFAULT_SRAM_WORKSPACE_POOL_SIZE {POOL_BYTES}"]  # fmt: skip
    if form == "constant_pool":
        lines += ["#define TVMGEN_DEFAULT_WEIGHTS_CONSTANT_POOL_SIZE 4",
                  "#define TVMGEN_DEFAULT_WEIGHTS_CONSTANT_POOL_DATA \\",
                  f"    {TWO}\\", ""]  # fmt: skip
    return "\n".join(lines + ["#endif // TVMGEN_DEFAULT_H_", ""])


def _c_lib0(form: str) -> str:
    text = _INCLUDES + "#include <tvmgen_default.h>\n"
    if form == "workspace_io":
        for kind, field, offset in (("inputs", "x", 32), ("outputs", "output", 48)):
            text += (
                f"struct tvmgen_default_{kind} tvmgen_default_map_{kind}(\n"
                "  struct tvmgen_default_workspace_pools* workspace_pools\n\n){\n"
                f"struct tvmgen_default_{kind} ret = {{\n"
                f"\t.{field} = &((uint8_t*)workspace_pools->sram)[{offset}],\n}};\n"
                "return ret;\n}\n"
            )
        return text + (
            "TVM_DLL int32_t tvmgen_default___tvm_main__(uint8_t* sram_0_var);\n"
            "int32_t tvmgen_default_run(struct tvmgen_default_workspace_pools* workspace_pools) "
            "{return tvmgen_default___tvm_main__(workspace_pools->sram);\n}\n"
        )
    weights = "workspace_pools->weights" if form == "constant_pool" else "0"
    return text + (
        "TVM_DLL int32_t tvmgen_default___tvm_main__(void* x,void* output0,uint8_t* sram_0_var,"
        "uint8_t* weights_1_var);\n"
        "int32_t tvmgen_default_run(struct tvmgen_default_inputs* inputs,"
        "struct tvmgen_default_outputs* outputs,struct tvmgen_default_workspace_pools* "
        "workspace_pools) {return tvmgen_default___tvm_main__(inputs->x,outputs->output,"
        f"workspace_pools->sram,{weights});\n}}\n"
    )


def _c_lib1(form: str) -> str:
    if form == "workspace_io":
        return (
            _INCLUDES
            + _OP
            + (
                "TVM_DLL int32_t tvmgen_default___tvm_main__(uint8_t* sram_0_var) {\n"
                "  static const float two = 2.0f;\n"
                "  return tvmgen_default_fused_op((float*)&sram_0_var[32], "
                "(int8_t*)&sram_0_var[48], (float*)&two, &sram_0_var[16]);\n}\n"
            )
        )
    scale = "(float*)weights_1_var" if form == "constant_pool" else "(float*)&two"
    return (
        _INCLUDES
        + _OP
        + (
            "TVM_DLL int32_t tvmgen_default___tvm_main__(float* x_buffer_var, "
            "int8_t* output_buffer_var, uint8_t* sram_0_var, uint8_t* weights_1_var) {\n"
            "  static const float two = 2.0f;\n  (void)two;\n"
            f"  return tvmgen_default_fused_op(x_buffer_var, output_buffer_var, {scale}, "
            "&sram_0_var[16]);\n}\n"
        )
    )


# --- interface packed: the system library and TVM's packed run wrapper ----------------------


def _packed_lib0(usmp: bool) -> str:
    if not usmp:  # unpacked-api=1 (no system library): run unpacks the DLTensors itself
        return (
            _INCLUDES + "TVM_DLL int32_t tvmgen_default___tvm_main__(void* x,void* output0);\n"
            "int32_t tvmgen_default_run(void* args, void* type_code, int num_args, "
            "void* out_value, void* out_type_code, void* resource_handle) {\n"
            "return tvmgen_default___tvm_main__(((DLTensor*)(((TVMValue*)args)[0].v_handle))[0]"
            ".data,((DLTensor*)(((TVMValue*)args)[1].v_handle))[0].data);\n}\n"
        )
    functions = ["tvmgen_default_run", "tvmgen_default___tvm_main__"]
    lines: List[str] = ["#include <tvm/runtime/crt/module.h>"]
    for name in functions:
        lines.append(f"TVM_DLL int32_t {name}({PACKED_PARAMS});")
    names = "".join(f"{name}\\000" for name in functions)
    lines += [
        "static TVMBackendPackedCFunc _tvm_func_array[] = {",
        *[f"    (TVMBackendPackedCFunc){name}," for name in functions],
        "};",
        f'static const TVMFuncRegistry _tvm_func_registry = {{\n    "\\002\\000{names}",'
        " _tvm_func_array,\n};",
        "static const TVMModule _tvm_system_lib = {\n    &_tvm_func_registry,\n};",
        "const TVMModule* TVMSystemLibEntryPoint(void) {\n    return &_tvm_system_lib;\n}",
        '__attribute__((section(".bss.noinit.tvm"), aligned(16)))',
        f"static uint8_t global_workspace[{POOL_BYTES}];",
        f"int32_t tvmgen_default_run({PACKED_PARAMS}) {{",
        "TVMValue tensors[3];",
        "tensors[0] = ((TVMValue*)args)[0];",
        "tensors[1] = ((TVMValue*)args)[1];",
        "DLTensor global_workspace_dltensor = {\n.data = &global_workspace\n};",
        "TVMValue global_workspace_tvm_value = {\n.v_handle = &global_workspace_dltensor\n};",
        "tensors[2] = global_workspace_tvm_value;",
        "return tvmgen_default___tvm_main__((void*)tensors, type_code, num_args, out_value, "
        "out_type_code, resource_handle);",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _packed_lib1(usmp: bool) -> str:
    if not usmp:
        return (
            _INCLUDES
            + _OP
            + (
                "static uint8_t scratch[16] __attribute__((aligned(16)));\n"
                "TVM_DLL int32_t tvmgen_default___tvm_main__(float* x_buffer_var, "
                "int8_t* output_buffer_var) {\n  static const float two = 2.0f;\n"
                "  return tvmgen_default_fused_op(x_buffer_var, output_buffer_var, (float*)&two, "
                "scratch);\n}\n"
            )
        )
    return (
        _INCLUDES
        + _OP
        + (
            "TVM_DLL int32_t tvmgen_default___tvm_main__(void* args, int32_t* arg_type_ids, "
            "int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, "
            "void* resource_handle) {\n"
            "  int32_t pool_code = arg_type_ids[2];\n  (void)pool_code;\n"
            "  float* x = (float*)(((DLTensor*)(((TVMValue*)args)[0].v_handle))->data);\n"
            "  int8_t* out = (int8_t*)(((DLTensor*)(((TVMValue*)args)[1].v_handle))->data);\n"
            "  uint8_t* pool = (uint8_t*)(((DLTensor*)(((TVMValue*)args)[2].v_handle))->data);\n"
            "  static const float two = 2.0f;\n"
            "  return tvmgen_default_fused_op(x, out, (float*)&two, pool);\n}\n"
        )
    )


if __name__ == "__main__":  # write every form under ./aot_forms/ to look at them
    from pathlib import Path

    for name in FORMS:
        write_dir(Path("aot_forms") / f"{name}.mlf", pool_form_files(name))
