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
from typing import Any, Dict, List, Optional, Union

import numpy as np

from project_api.read.params import save_params

Files = Dict[str, bytes]

C_STUB = b"/* generated code stand-in */\nint stub_%d;\n"


def small_graph(name: str = "default") -> Dict[str, Any]:
    """x[1,4] + p0[4] -> relu -> output0[1,4], float32; two operator nodes."""
    add = f"tvmgen_{name}_fused_add"
    relu = f"tvmgen_{name}_fused_nn_relu"

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
        f"codegen/host/src/{prefix}lib1.c": C_STUB % 1,
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


STANDALONE_CRT = {
    "short_name": "tvm_standalone_crt",
    "url": "./runtime",
    "url_type": "mlf_path",
    "version_spec": "0.14.0",
}


def aot_files(name: str = "default") -> Files:
    """An AOT model with the C interface and the standalone CRT packed inside."""
    meta = model_metadata(name, 7, executor="aot", dependencies=[STANDALONE_CRT])
    main = meta["memory"]["functions"]["main"][0]
    main["inputs"] = {"x": {"size": 16, "dtype": "float32"}}
    main["outputs"] = {"output": {"size": 8, "dtype": "int8"}}
    metadata = {"version": 7, "modules": {name: meta}}
    return {
        "metadata.json": _encode(metadata),
        f"codegen/host/src/{name}_lib0.c": C_STUB % 0,
        f"codegen/host/include/tvmgen_{name}.h": b"int32_t tvmgen_default_run(void*, void*);\n",
        f"parameters/{name}.params": save_params({}),
        f"src/{name}.relay": b"def @main() {}\n",
        "runtime/include/tvm/runtime/crt/module.h": b"/* crt */\n",
        "runtime/src/runtime/crt/common/crt_runtime_api.c": b"/* crt */\n",
        "templates/crt_config.h.template": b"/* template */\n",
    }


def with_json(files: Files, member: str, edit: Any) -> Files:
    """A copy of ``files`` whose JSON ``member`` went through ``edit(data)`` (in place)."""
    data = json.loads(files[member])
    edit(data)
    out = dict(files)
    out[member] = _encode(data)
    return out


def clone(value: Any) -> Any:
    return copy.deepcopy(value)


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
