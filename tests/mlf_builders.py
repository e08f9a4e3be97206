"""Build small Model Library Format archives (every layout TVM wrote) for tests.

``mlf_files(...)`` returns ``{member path: bytes}`` so a test can break one file before
writing it with ``write_tar`` (plain or gzip, with or without ``./``) or ``write_dir``.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from project_api.read.ctext import sanitize
from project_api.read.params import save_params

Files = Dict[str, bytes]

C_STUB = b"/* generated code stand-in */\nint stub_%d;\n"


def c_functions(names: List[str]) -> bytes:
    """C that defines ``names`` as TVM defines operator functions (each returns 0)."""
    lines = ["#include <stdint.h>"]
    for name in names:
        lines.append(
            f"int32_t {name}(void* args, int32_t* arg_type_ids, int32_t num_args, "
            "void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) { return 0; }"
        )
    return ("\n".join(lines) + "\n").encode()


def small_graph(name: str = "default") -> Dict[str, Any]:
    """x[1,4] + p0[4] -> relu -> output0[1,4], float32; two operator nodes."""
    add = f"tvmgen_{sanitize(name)}_fused_add"
    relu = f"tvmgen_{sanitize(name)}_fused_nn_relu"

    def op(func: str, inputs: List[List[int]]) -> Dict[str, Any]:
        attrs = {
            "func_name": func,
            "num_inputs": str(len(inputs)),
            "num_outputs": "1",
            "flatten_data": "0",
            "hash": "0123456789abcdef",
        }
        return {"op": "tvm_op", "name": func, "attrs": attrs, "inputs": inputs}

    return {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {"op": "null", "name": "p0", "inputs": []},
            op(add, [[0, 0, 0], [1, 0, 0]]),
            op(relu, [[2, 0, 0]]),
        ],
        "arg_nodes": [0, 1],
        "heads": [[3, 0, 0]],
        "node_row_ptr": [0, 1, 2, 3, 4],
        "attrs": {
            "dltype": ["list_str", ["float32"] * 4],
            "shape": ["list_shape", [[1, 4], [4], [1, 4], [1, 4]]],
            "storage_id": ["list_int", [0, 1, 2, 0]],
            "device_index": ["list_int", [1, 1, 1, 1]],
        },
    }


def small_params() -> Dict[str, np.ndarray]:
    return {"p0": np.arange(4, dtype=np.float32)}


def model_metadata(
    name: str,
    version: int,
    *,
    executor: str = "graph",
    workspace: int = 128,
    dependencies: Optional[List[dict]] = None,
) -> Dict[str, Any]:
    """Per-model metadata in the shape ``version`` used."""
    meta: Dict[str, Any] = {
        "model_name": name,
        "export_datetime": "2021-06-01 12:00:00Z",
        "target": {"1": "c -keys=cpu -model=host"} if version <= 5 else ["c -keys=cpu"],
        "executors" if version >= 3 else "runtimes": [executor],
        "memory": _memory(version, workspace),
    }
    if version >= 4:
        meta["style"] = "full-model"
    if dependencies is not None:
        meta["external_dependencies"] = dependencies
    return meta


def _memory(version: int, workspace: int) -> Any:
    sids = [
        {"storage_id": 0, "size_bytes": 16, "input_binding": "x"},
        {"storage_id": 1, "size_bytes": 16, "input_binding": "p0"},
        {"storage_id": 2, "size_bytes": 16},
    ]
    if version == 1:
        return sids
    if version == 5:  # the list form: one entry per function with its workspace per device
        functions: Any = [
            {
                "function_name": "main",
                "workspace": [{"device": 1, "workspace_size_bytes": workspace}],
            }
        ]
    else:
        functions = {
            "main": [
                {
                    "device": 1,
                    "workspace_size_bytes": workspace,
                    "constants_size_bytes": 16,
                    "io_size_bytes": 32,
                }
            ],
            "operator_functions": [],
        }
    return {"sids": sids, "functions": functions}


def _encode(value: Any) -> bytes:
    return json.dumps(value, indent=2).encode()


def graph_model_files(name: str, version: int) -> Files:
    """Files of one graph-executor model at the paths ``version`` used."""
    if version >= 7:
        graph_path, relay = f"executor-config/graph/{name}.graph", f"src/{name}.relay"
    elif version >= 5:
        graph_path, relay = "executor-config/graph/graph.json", "src/relay.txt"
    else:
        graph_path, relay = "runtime-config/graph/graph.json", "src/relay.txt"
    prefix = f"{name}_" if version >= 5 else ""
    return {
        graph_path: _encode(small_graph(name)),
        f"parameters/{name}.params": save_params(small_params()),
        relay: b"def @main(%x) { %x }\n",
        f"codegen/host/src/{prefix}lib0.c": C_STUB % 0,
        f"codegen/host/src/{prefix}lib1.c": c_functions(
            [f"tvmgen_{sanitize(name)}_fused_add", f"tvmgen_{sanitize(name)}_fused_nn_relu"]
        ),
    }


def mlf_files(
    version: int = 7,
    names: Union[str, List[str]] = "default",
    *,
    dependencies: Optional[List[dict]] = None,
) -> Files:
    """A complete graph-executor archive: one model (any version) or several (v7)."""
    names = [names] if isinstance(names, str) else names
    if version < 7:
        assert len(names) == 1, "only version 7 holds several models"
        metadata: Dict[str, Any] = {"version": version}
        metadata.update(model_metadata(names[0], version, dependencies=dependencies))
    else:
        metadata = {
            "version": version,
            "modules": {n: model_metadata(n, version, dependencies=dependencies) for n in names},
        }
    files: Files = {"metadata.json": _encode(metadata)}
    for name in names:
        files.update(graph_model_files(name, version))
    return files


def operator_files() -> Files:
    """What tvm.build + export_model_library_format writes: flat v7 metadata, lib0.c."""
    metadata = {
        "version": 7,
        "model_name": "add_op",
        "export_datetime": "2023-01-01 00:00:00Z",
        "style": "operator",
        "executors": [],
        "target": ["c -keys=cpu"],
        "memory": {
            "add": [
                {"size_bytes": 16, "shape": [4], "dtype": "float32", "input_binding": "A"},
                {"size_bytes": 16, "shape": [4], "dtype": "float32", "input_binding": "B"},
            ]
        },
    }
    return {
        "metadata.json": _encode(metadata),
        "codegen/host/src/lib0.c": C_STUB % 0,
        "src/tir-1.txt": b"# tir\n",
    }


# What tvm.build(..., name="add") with Runtime("crt", {"system-lib": True}) exports, in the
# shape AutoTVM's trials have: a packed function, the __tvm_main__ alias the C codegen adds for
# the entry function, and the system-lib registry naming both. C[i] = A[i] + B[i], float32[16].
OPERATOR_ADD_LIB0 = b"""#include <tvm/runtime/crt/module.h>
TVM_DLL int32_t add(TVMValue* args, int* type_code, int num_args, TVMValue* out_value,
                    int* out_type_code, void* resource_handle);
TVM_DLL int32_t __tvm_main__(TVMValue* args, int* type_code, int num_args, TVMValue* out_value,
                             int* out_type_code, void* resource_handle);
static TVMBackendPackedCFunc _tvm_func_array[] = {
    (TVMBackendPackedCFunc)add,
    (TVMBackendPackedCFunc)__tvm_main__,
};
static const TVMFuncRegistry _tvm_func_registry = {
    "\\002\\000add\\000__tvm_main__\\000", _tvm_func_array,
};
static const TVMModule _tvm_system_lib = {&_tvm_func_registry};
const TVMModule* TVMSystemLibEntryPoint(void) { return &_tvm_system_lib; }
"""
OPERATOR_ADD_LIB1 = b"""#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <stdint.h>
TVM_DLL int32_t add(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value,
                    int32_t* out_ret_tcode, void* resource_handle) {
  if (num_args != 3) return -1;
  for (int32_t i = 0; i < 3; ++i) {
    if (arg_type_ids[i] != kTVMDLTensorHandle && arg_type_ids[i] != kTVMNDArrayHandle) return -1;
  }
  DLTensor* a = (DLTensor*)((TVMValue*)args)[0].v_handle;
  DLTensor* b = (DLTensor*)((TVMValue*)args)[1].v_handle;
  DLTensor* c = (DLTensor*)((TVMValue*)args)[2].v_handle;
  float* pa = (float*)a->data;
  float* pb = (float*)b->data;
  float* pc = (float*)c->data;
  for (int32_t i = 0; i < 16; ++i) pc[i] = pa[i] + pb[i];
  return 0;
}
TVM_DLL int32_t __tvm_main__(void* args, int32_t* arg_type_ids, int32_t num_args,
                             void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {
  return add(args, arg_type_ids, num_args, out_ret_value, out_ret_tcode, resource_handle);
}
"""


def operator_add_files() -> Files:
    """A working operator-style archive (``add``, float32[16] + float32[16]), for the
    host-driven flow AutoTVM uses: no graph, the host calls the function by name."""
    files = operator_files()
    metadata = json.loads(files["metadata.json"])
    metadata["memory"] = {
        "add": [
            {"size_bytes": 64, "shape": [16], "dtype": "float32", "input_binding": name}
            for name in ("A", "B", "C")
        ]
    }
    files["metadata.json"] = _encode(metadata)
    files["codegen/host/src/lib0.c"] = OPERATOR_ADD_LIB0
    files["codegen/host/src/lib1.c"] = OPERATOR_ADD_LIB1
    return files


STANDALONE_CRT = {
    "short_name": "tvm_standalone_crt",
    "url": "./runtime",
    "url_type": "mlf_path",
    "version_spec": "0.14.0",
}


AotOutputs = List[Tuple[str, int]]


def aot_files(
    name: str = "default",
    *,
    interface: str = "c",
    usmp: bool = False,
    outputs: Optional[AotOutputs] = None,
) -> Files:
    """A runnable AOT model as TVM 0.14 writes it, with the standalone CRT packed inside:
    ``x`` float32[1,4] in; each output ``j`` (name, n int8 elements) holds
    ``int8(2 * x[i % 4] + j)`` (:func:`aot_reference`). Interface ``c`` (a header and
    ``tvmgen_<name>_run``) or ``packed``; ``usmp`` keeps scratch in a static
    ``.bss.noinit.tvm`` pool instead of TVMBackendAllocWorkspace."""
    outputs = outputs if outputs is not None else [("output", 8)]
    meta = model_metadata(name, 7, executor="aot", workspace=0 if usmp else 96,
                          dependencies=[STANDALONE_CRT])  # fmt: skip
    main = meta["memory"]["functions"]["main"][0]
    main["inputs"] = {"x": {"size": 16, "dtype": "float32"}}
    main["outputs"] = {out: {"size": size, "dtype": "int8"} for out, size in outputs}
    files: Files = {
        "metadata.json": _encode({"version": 7, "modules": {name: meta}}),
        f"codegen/host/src/{name}_lib1.c": _aot_ops_c(name, outputs, interface, usmp).encode(),
        f"parameters/{name}.params": save_params({}),
        "runtime/include/tvm/runtime/crt/module.h": b"/* crt */\n",
        "runtime/src/runtime/crt/common/crt_runtime_api.c": b"#error TVM's CRT is not ours\n",
        "templates/crt_config.h.template": b"/* template */\n",
    }
    results = ", ".join(f"Tensor[({size}), int8]" for _, size in outputs)
    result = results if len(outputs) == 1 else f"({results})"
    files[f"src/{name}.relay"] = (
        f"def @main(%x: Tensor[(1, 4), float32] /* span=x:0:0 */) -> {result} {{\n  %x\n}}\n"
    ).encode()
    if interface == "c":
        files[f"codegen/host/include/tvmgen_{name}.h"] = aot_header(name, outputs, 96).encode()
        files[f"codegen/host/src/{name}_lib0.c"] = _aot_run_c(name, outputs).encode()
    else:
        files[f"codegen/host/src/{name}_lib0.c"] = _aot_registry_c(name).encode()
    return files


def aot_reference(x: np.ndarray, outputs: Optional[AotOutputs] = None) -> Dict[str, np.ndarray]:
    """The outputs of :func:`aot_files`' model, keyed output0..N-1."""
    outputs = outputs if outputs is not None else [("output", 8)]
    flat = np.asarray(x, dtype=np.float32).reshape(-1)
    return {
        f"output{j}": np.array([int(2 * flat[i % 4] + j) for i in range(size)], dtype=np.int8)
        for j, (_, size) in enumerate(outputs)
    }


def aot_header(name: str, outputs: AotOutputs, workspace: int) -> str:
    upper = f"TVMGEN_{name.upper()}"
    lines = ["#ifndef TVMGEN_H_", "#define TVMGEN_H_", "#include <stdint.h>"]
    lines.append(f"#define {upper}_X_SIZE 16")
    lines += [f"#define {upper}_{out.upper()}_SIZE {size}" for out, size in outputs]
    lines += [f"struct tvmgen_{name}_inputs {{", "  void* x;", "};"]
    lines += [f"struct tvmgen_{name}_outputs {{"] + [f"  void* {o};" for o, _ in outputs] + ["};"]
    lines.append(f"int32_t tvmgen_{name}_run(")
    lines.append(f"  struct tvmgen_{name}_inputs* inputs,")
    lines.append(f"  struct tvmgen_{name}_outputs* outputs")
    lines.append(");")
    lines += [f"#define {upper}_WORKSPACE_SIZE {workspace}", "#endif", ""]
    return "\n".join(lines)


def _aot_run_c(name: str, outputs: AotOutputs) -> str:
    params = ", ".join(["void* x"] + [f"void* {o}" for o, _ in outputs])
    args = ", ".join(["inputs->x"] + [f"outputs->{o}" for o, _ in outputs])
    return (
        '#include "tvm/runtime/c_runtime_api.h"\n'
        f"#include <tvmgen_{name}.h>\n"
        f"TVM_DLL int32_t tvmgen_{name}___tvm_main__({params});\n"
        f"int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs,"
        f"struct tvmgen_{name}_outputs* outputs) {{return tvmgen_{name}___tvm_main__({args});\n}}\n"
    )


def _aot_registry_c(name: str) -> str:
    main = f"tvmgen_{name}___tvm_main__"
    return (
        "#include <tvm/runtime/crt/module.h>\n"
        f"TVM_DLL int32_t {main}(TVMValue* args, int* type_code, int num_args, "
        "TVMValue* out_value, int* out_type_code, void* resource_handle);\n"
        "static TVMBackendPackedCFunc _tvm_func_array[] = {\n"
        f"    (TVMBackendPackedCFunc){main},\n}};\n"
        f'static const TVMFuncRegistry _tvm_func_registry = {{\n    "\\001\\000{main}\\000", '
        "_tvm_func_array,\n};\n"
        "static const TVMModule _tvm_system_lib = {\n    &_tvm_func_registry,\n};\n"
        "const TVMModule* TVMSystemLibEntryPoint(void) {\n    return &_tvm_system_lib;\n}\n"
    )


def _aot_ops_c(name: str, outputs: AotOutputs, interface: str, usmp: bool) -> str:
    """One operator per output (scratch: 16 bytes each) called from __tvm_main__."""
    lines = [
        '#include "tvm/runtime/c_runtime_api.h"',
        '#include "tvm/runtime/c_backend_api.h"',
        "#include <stdint.h>",
    ]
    if usmp:
        lines += ['__attribute__((section(".bss.noinit.tvm"), aligned(8)))',
                  "static uint8_t global_workspace[32];"]  # fmt: skip
    for j, (_, size) in enumerate(outputs):
        scratch = (
            "  float* tmp = (float*)&global_workspace[16];"
            if usmp
            else "  float* tmp = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)16, 0, 8);\n"
            "  if (tmp == NULL) return -1;"
        )
        lines += [
            f"TVM_DLL int32_t tvmgen_{name}_fused_op_{j}(float* p0, int8_t* T_out) {{",
            scratch,
            "  for (int i = 0; i < 4; ++i) tmp[i] = 2.0f * p0[i];",
            f"  for (int i = 0; i < {size}; ++i) T_out[i] = (int8_t)((int)tmp[i % 4] + {j});",
        ]
        if not usmp:
            lines.append("  if (TVMBackendFreeWorkspace(1, 0, tmp) != 0) return -1;")
        lines += ["  return 0;", "}"]
    outs = [f"int8_t* {o}_buffer_var" for o, _ in outputs]
    main = f"tvmgen_{name}___tvm_main__"
    if interface == "c":
        lines.append(f"TVM_DLL int32_t {main}(float* x_buffer_var, {', '.join(outs)}) {{")
    else:
        lines += [
            f"TVM_DLL int32_t {main}(void* args, int32_t* arg_type_ids, int32_t num_args, "
            "void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {",
            f"  if (num_args != {1 + len(outputs)}) return -1;",
            "  float* x_buffer_var = (float*)(((DLTensor*)(((TVMValue*)args)[0].v_handle))->data);",
        ]
        for j, (o, _) in enumerate(outputs):
            lines.append(
                f"  int8_t* {o}_buffer_var = "
                f"(int8_t*)(((DLTensor*)(((TVMValue*)args)[{j + 1}].v_handle))->data);"
            )
    if usmp:
        lines.append("  float* sid_1 = (float*)&global_workspace[0];")
    else:
        lines += ["  float* sid_1 = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)16, 0, 8);",
                  "  if (sid_1 == NULL) return -1;"]  # fmt: skip
    lines.append("  for (int i = 0; i < 4; ++i) sid_1[i] = x_buffer_var[i];")
    for j, (o, _) in enumerate(outputs):
        lines.append(f"  if (tvmgen_{name}_fused_op_{j}(sid_1, {o}_buffer_var) != 0) return -1;")
    if not usmp:
        lines.append("  if (TVMBackendFreeWorkspace(1, 0, sid_1) != 0) return -1;")
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def with_json(files: Files, member: str, edit: Any) -> Files:
    """A copy of ``files`` whose JSON ``member`` went through ``edit(data)`` (in place)."""
    data = json.loads(files[member])
    edit(data)
    out = dict(files)
    out[member] = _encode(data)
    return out


def clone(value: Any) -> Any:
    return copy.deepcopy(value)


def tar_files(path: Path) -> Files:
    """The regular members of the tar ``path`` as ``{member path: bytes}`` (no ``./``), to
    break one and write the archive again."""
    files: Files = {}
    with tarfile.open(path) as tar:
        for info in tar.getmembers():
            stream = tar.extractfile(info) if info.isfile() else None
            if stream is not None:
                files[info.name.removeprefix("./")] = stream.read()
    return files


def write_dir(root: Path, files: Files) -> Path:
    for member, data in files.items():
        path = root / member
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def write_tar(path: Path, files: Files, *, gz: bool = False, dot_prefix: bool = True) -> Path:
    """A tar like TVM's (``./`` names, root entry, directories) - gzip-compressed if asked."""
    buffer = io.BytesIO()
    prefix = "./" if dot_prefix else ""
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if dot_prefix:
            tar.addfile(_info("./", tarfile.DIRTYPE))
        for directory in sorted({str(Path(m).parent) for m in files} - {"."}):
            parts = directory.split("/")
            for depth in range(1, len(parts) + 1):
                name = prefix + "/".join(parts[:depth]) + "/"
                if name not in tar.getnames() and name.rstrip("/") not in tar.getnames():
                    tar.addfile(_info(name.rstrip("/"), tarfile.DIRTYPE))
        for member, data in sorted(files.items()):
            info = _info(prefix + member, tarfile.REGTYPE, size=len(data))
            tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def _info(name: str, kind: bytes, *, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info


def write_raw_tar(path: Path, entries: List[tarfile.TarInfo], data: Optional[Files] = None) -> Path:
    """A tar of hand-made members (for hostile archives); ``data`` gives file contents."""
    data = data or {}
    with tarfile.open(path, "w") as tar:
        for info in entries:
            payload = data.get(info.name)
            if payload is not None:
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                tar.addfile(info)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    return _info(name, kind, link=link)


# --- export_library artifacts -----------------------------------------------------------


def dmlc_string(text: Union[str, bytes]) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return len(raw).to_bytes(8, "little") + raw


def u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def u64_vector(values: List[int]) -> bytes:
    return u64(len(values)) + b"".join(u64(v) for v in values)


def graph_factory_payload(graph: Dict[str, Any], params: Dict[str, np.ndarray], name: str) -> bytes:
    """GraphExecutorFactory::SaveToBinary: graph JSON, params, module name."""
    blob = save_params(params)
    names = list(params)
    # save_params = list header + names + count + tensors; reuse its tensor bytes.
    tensors_at = 24 + sum(8 + len(n.encode()) for n in names) + 8
    return (
        dmlc_string(json.dumps(graph))
        + u64(len(names))
        + u64(len(names))
        + b"".join(dmlc_string(n) for n in names)
        + blob[tensors_at:]
        + dmlc_string(name)
    )


def mblob(entries: List[bytes], row_ptr: Optional[List[int]] = None, children=None) -> bytes:
    """The ``__tvm_dev_mblob`` symbol bytes: u64 nbytes, then count and entries."""
    body = list(entries)
    if row_ptr is not None:
        body.append(dmlc_string("_import_tree") + u64_vector(row_ptr) + u64_vector(children or []))
    payload = u64(len(body)) + b"".join(body)
    return u64(len(payload)) + payload


def mblob_c_source(blob: bytes) -> str:
    """A devc.c like PackImportsToC writes, defining ``__tvm_dev_mblob``."""
    hexes = ",".join(f"0x{b:x}" for b in blob)
    return (
        '#ifdef __cplusplus\nextern "C" {\n#endif\n'
        "extern const unsigned char __tvm_dev_mblob[];\n"
        f"const unsigned char __tvm_dev_mblob[{len(blob)}] = {{\n  {hexes}\n}};\n"
        "#ifdef __cplusplus\n}\n#endif\n"
    )
