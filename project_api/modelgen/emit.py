"""Archive members in the exact shape TVM 0.14's export_model_library_format writes them.

graph.json in dmlc's JSON writer style, ``<mod>_lib0.c`` (the system-lib registry),
``<mod>_lib1.c...`` (operators), metadata.json (v5/v6 flat, v7 ``modules``), the params
file, the Relay-text placeholder, and a reproducible tar (``./`` names, root uid/gid, fixed
mtime, sorted members).
"""

from __future__ import annotations

import gzip as gzip_module
import io
import json
import tarfile
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..read.model import TensorSpec
from ..read.params import save_params
from .lower import Lowered
from .ops import TensorType

TARGET = "c -keys=cpu -model=host"
DEVICE_CPU = 1
FUNCTIONS_PER_FILE = 32
SUPPORTED_VERSIONS = (5, 6, 7)
DEFAULT_EXPORT_DATETIME = "2024-01-01 00:00:00Z"
DEFAULT_MTIME = 1704067200  # the same instant, for tar members

OPERATOR_FILE_HEADER = (
    f"// tvm target: {TARGET}\n"
    "#define TVM_EXPORTS\n"
    '#include "tvm/runtime/c_runtime_api.h"\n'
    '#include "tvm/runtime/c_backend_api.h"\n'
    "#include <math.h>\n"
    "#include <stdbool.h>\n"
)
REGISTRY_DECLARATION = (
    '#ifdef __cplusplus\nextern "C"\n#endif\n'
    "TVM_DLL int32_t {name}(TVMValue* args, int* type_code, int num_args, "
    "TVMValue* out_value, int* out_type_code, void* resource_handle);\n"
)


# --- graph.json -------------------------------------------------------------------------


# dmlc's writer puts an int array on one line only when it has at most this many items.
DMLC_INLINE_MAX = 10


class _OnePerLine(list):
    """A list of ints that dmlc's writer puts one item per line (node entries)."""


def dmlc_json(value: object, level: int = 0) -> str:
    """JSON as TVM's C++ writer formats graph.json (``", "`` + newline separators)."""
    pad = "  " * level
    if isinstance(value, dict):
        items = [f"{pad}  {json.dumps(k)}: {dmlc_json(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ", \n".join(items) + "\n" + pad + "}" if items else "{}"
    if isinstance(value, list):
        if not value:
            return "[]"
        inline = len(value) <= DMLC_INLINE_MAX and not isinstance(value, _OnePerLine)
        if inline and all(isinstance(v, int) for v in value):
            return "[" + ", ".join(str(v) for v in value) + "]"
        items = [f"{pad}  {dmlc_json(v, level + 1)}" for v in value]
        return "[\n" + ", \n".join(items) + "\n" + pad + "]"
    return json.dumps(value)


def graph_json(lowered: Lowered) -> str:
    nodes = []
    for node in lowered.nodes:
        entry = {key: node[key] for key in ("op", "name", "attrs") if key in node}
        entry["inputs"] = [_OnePerLine(e) for e in node["inputs"]]
        nodes.append(entry)
    types = lowered.entry_types
    graph = {
        "nodes": nodes,
        "arg_nodes": lowered.arg_nodes,
        "heads": [_OnePerLine([nid, index, 0]) for nid, index in lowered.heads],
        "attrs": {
            "dltype": ["list_str", [t.dtype for t in types]],
            "device_index": ["list_int", [DEVICE_CPU] * len(types)],
            "storage_id": ["list_int", lowered.storage_ids],
            "shape": ["list_shape", [list(t.shape) for t in types]],
        },
        "node_row_ptr": lowered.node_row_ptr,
    }
    return dmlc_json(graph)


# --- C sources ------------------------------------------------------------------------------


def c_string_escape(data: bytes) -> str:
    """Bytes as C string-literal text, escaped the way TVM's StrEscape (octal mode) does."""
    special = {
        ord('"'): '\\"',
        ord("\\"): "\\\\",
        ord("\t"): "\\t",
        ord("\r"): "\\r",
        ord("\n"): "\\n",
    }
    text = []
    for byte in data:
        if byte in special:
            text.append(special[byte])
        elif 0x20 <= byte <= 0x7E:
            text.append(chr(byte))
        else:
            text.append(f"\\{byte:03o}")
    return "".join(text)


def names_blob(names: Sequence[str]) -> str:
    """The registry's names literal: uint16 count (little-endian), then NUL-terminated names."""
    count = len(names)
    if count > 0xFFFF:
        raise ValueError(f"{count} functions do not fit the registry's uint16 count")
    raw = count.to_bytes(2, "little") + b"".join(name.encode() + b"\0" for name in names)
    return c_string_escape(raw)


def registry_source(names: Sequence[str], *, ordered: bool = False) -> str:
    """``<mod>_lib0.c``: forward declarations, function array, registry, entry point; the
    names sorted, or in the order given (``ordered``: AOT's, run first)."""
    names = list(names) if ordered else sorted(names)
    parts = ["#include <tvm/runtime/crt/module.h>\n"]
    parts += [REGISTRY_DECLARATION.format(name=name) for name in names]
    parts.append("static TVMBackendPackedCFunc _tvm_func_array[] = {\n")
    parts += [f"    (TVMBackendPackedCFunc){name},\n" for name in names]
    parts.append("};\n")
    parts.append("static const TVMFuncRegistry _tvm_func_registry = {\n")
    parts.append(f'    "{names_blob(names)}",    _tvm_func_array,\n')
    parts.append("};\n")
    parts.append("static const TVMModule _tvm_system_lib = {\n    &_tvm_func_registry,\n};\n")
    parts.append("const TVMModule* TVMSystemLibEntryPoint(void) {\n")
    parts.append("    return &_tvm_system_lib;\n}\n;")
    return "".join(parts)


def operator_sources(lowered: Lowered) -> List[str]:
    """Operator files (``lib1.c``, ``lib2.c``...), functions sorted by name like TVM's."""
    names = sorted(lowered.functions)
    files = []
    for start in range(0, len(names), FUNCTIONS_PER_FILE):
        chunk = names[start : start + FUNCTIONS_PER_FILE]
        texts = [lowered.functions[n].text.named(n) for n in chunk]
        files.append(OPERATOR_FILE_HEADER + "".join(texts))
    return files


# --- metadata.json ----------------------------------------------------------------------------


def _tensor_sizes(specs: Mapping[str, Tuple[int, str]]) -> Dict[str, Dict[str, object]]:
    return {name: {"dtype": dtype, "size": size} for name, (size, dtype) in specs.items()}


def module_metadata(
    lowered: Lowered,
    version: int,
    *,
    export_datetime: str = DEFAULT_EXPORT_DATETIME,
    external_dependencies: Optional[Sequence[Mapping[str, str]]] = None,
) -> Dict[str, object]:
    """The per-model metadata (flat in v5/v6, ``modules.<mod>`` in v7)."""
    inputs = {spec.name: (spec.nbytes, spec.dtype) for spec in input_types(lowered)}
    heads = output_types(lowered)
    names = ["output"] if len(heads) == 1 else [f"output{i}" for i in range(len(heads))]
    outputs = {name: (t.nbytes, t.dtype) for name, t in zip(names, heads)}
    io_bytes = sum(size for size, _ in inputs.values()) + sum(s for s, _ in outputs.values())
    main: Dict[str, object] = {
        "constants_size_bytes": int(sum(int(a.nbytes) for a in lowered.params.values())),
        "device": DEVICE_CPU,
        "io_size_bytes": io_bytes,
        "workspace_size_bytes": lowered.workspace_size_bytes,
    }
    if version >= 7:
        main["inputs"] = _tensor_sizes(inputs)
        main["outputs"] = _tensor_sizes(outputs)
    metadata: Dict[str, object] = {
        "executors": ["graph"],
        "export_datetime": export_datetime,
        "memory": {
            "functions": {"main": [main], "operator_functions": operator_functions(lowered)},
            "sids": storage_entries(lowered),
        },
        "model_name": lowered.module,
        "style": "full-model",
        "target": {str(DEVICE_CPU): TARGET} if version == 5 else [TARGET],
    }
    if external_dependencies:
        metadata["external_dependencies"] = [dict(dep) for dep in external_dependencies]
    return metadata


def input_types(lowered: Lowered) -> List[TensorSpec]:
    """The graph inputs that are not params, in arg_nodes order."""
    specs = []
    for nid in lowered.arg_nodes:
        name = lowered.nodes[nid]["name"]
        if name not in lowered.params:
            t = lowered.entry_types[lowered.node_row_ptr[nid]]
            specs.append(TensorSpec(name, t.shape, t.dtype))
    return specs


def output_types(lowered: Lowered) -> List[TensorType]:
    return [lowered.entry_types[lowered.node_row_ptr[nid] + i] for nid, i in lowered.heads]


def operator_functions(lowered: Lowered) -> List[Dict[str, object]]:
    entries: List[Dict[str, object]] = []
    for name in dict.fromkeys(lowered.op_functions):
        if name in lowered.functions:
            workspace = lowered.functions[name].text.workspace_bytes
            entries.append(
                {
                    "function_name": name,
                    "workspace": [{"device": DEVICE_CPU, "workspace_size_bytes": workspace}],
                }
            )
    return entries


def storage_entries(lowered: Lowered) -> List[Dict[str, object]]:
    entries: List[Dict[str, object]] = []
    for sid, size in enumerate(lowered.storage_bytes):
        entry: Dict[str, object] = {"storage_id": sid, "size_bytes": size}
        if sid in lowered.input_bindings:
            entry["input_binding"] = lowered.input_bindings[sid]
        entries.append(entry)
    return entries


def metadata_json(document: Mapping[str, object]) -> str:
    return json.dumps(document, indent=2, sort_keys=True)


# --- Relay placeholder and params ---------------------------------------------------------


def relay_type(shape: Sequence[int], dtype: str) -> str:
    if not shape:
        return dtype
    return f"Tensor[({', '.join(str(d) for d in shape)}), {dtype}]"


def relay_text(lowered: Lowered) -> str:
    """A readable stand-in for TVM's ``src/<mod>.relay`` (one line per graph operator).

    The quantization of the model's inputs and outputs, when known (a compiled ``.tflite``),
    is stated as TVM's Relay states it: a ``qnn.dequantize`` of each quantized input and a
    ``qnn.quantize`` of each quantized output, with constant scale and zero point
    (``read/quant.py`` reads them back, and ``export``'s header states them)."""
    types = lowered.entry_types
    names: Dict[int, str] = {}
    params = []
    lines = []
    for nid in lowered.arg_nodes:
        eid = lowered.node_row_ptr[nid]
        names[eid] = "%" + lowered.nodes[nid]["name"]
        params.append(f"{names[eid]}: {relay_type(types[eid].shape, types[eid].dtype)}")
    for number, nid in enumerate(lowered.arg_nodes):
        quant = lowered.input_quantization.get(lowered.nodes[nid]["name"])
        if quant is not None:
            eid = lowered.node_row_ptr[nid]
            lines.append(
                f"  %input{number}_real = qnn.dequantize({names[eid]}, {_real(quant[0])}, "
                f"{quant[1]}) /* the input's quantization */;"
            )
    for number, nid in enumerate(lowered.op_nodes):
        node = lowered.nodes[nid]
        first, count = lowered.node_row_ptr[nid], int(node["attrs"]["num_outputs"])
        args = ", ".join(names[lowered.node_row_ptr[i] + k] for i, k, _ in node["inputs"])
        result = [types[first + k] for k in range(count)]
        ty = ", ".join(relay_type(t.shape, t.dtype) for t in result)
        ty = ty if count == 1 else f"({ty})"
        lines.append(f"  %{number} = {node['name']}({args}) /* ty={ty} */;")
        for k in range(count):
            names[first + k] = f"%{number}" if count == 1 else f"%{number}.{k}"
    heads = [names[lowered.node_row_ptr[nid] + index] for nid, index in lowered.heads]
    for k, quant in sorted(lowered.output_quantization.items()):
        if 0 <= k < len(heads):
            lines.append(
                f"  %output{k} = qnn.quantize({heads[k]}, {_real(quant[0])}, {quant[1]}) "
                "/* the output's quantization */;"
            )
            heads[k] = f"%output{k}"
    result_text = heads[0] if len(heads) == 1 else "(" + ", ".join(heads) + ")"
    return (
        "def @main(" + ", ".join(params) + ") {\n" + "\n".join(lines) + f"\n  {result_text}\n}}\n"
    )


def _real(value: float) -> str:
    """A scale as Relay writes a float32 constant (``0.584703f``), exact as a double."""
    return f"{float(value)!r}f"


def params_bytes(params: Mapping[str, np.ndarray]) -> bytes:
    return save_params(params)


# --- archive layout --------------------------------------------------------------------------


def module_members(lowered: Lowered, version: int) -> Dict[str, bytes]:
    """Every member of one model (paths without ``./``), except metadata.json."""
    mod = lowered.module
    flat = version < 7
    graph_path = (
        "executor-config/graph/graph.json" if flat else f"executor-config/graph/{mod}.graph"
    )
    relay_path = "src/relay.txt" if flat else f"src/{mod}.relay"
    sources = [registry_source(list(lowered.functions)), *operator_sources(lowered)]
    members = {f"codegen/host/src/{mod}_lib{i}.c": text.encode() for i, text in enumerate(sources)}
    members[graph_path] = graph_json(lowered).encode()
    members[f"parameters/{mod}.params"] = params_bytes(lowered.params)
    members[relay_path] = relay_text(lowered).encode()
    return members


def tar_bytes(members: Mapping[str, bytes], *, mtime: int = DEFAULT_MTIME) -> bytes:
    """A tar shaped like TVM's (``./`` root, sorted depth-first, root-owned) and reproducible."""
    tree: Dict[str, object] = {}
    for path, data in members.items():
        node = tree
        *dirs, leaf = path.split("/")
        for part in dirs:
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[leaf] = data
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_tree(tar, ".", tree, mtime, root=True)
    return buffer.getvalue()


def _add_tree(
    tar: tarfile.TarFile, name: str, tree: Dict[str, object], mtime: int, root: bool = False
) -> None:
    tar.addfile(_tarinfo(name, tarfile.DIRTYPE, 0o700 if root else 0o755, 0, mtime))
    for key in sorted(tree):
        child = tree[key]
        path = f"{name}/{key}"
        if isinstance(child, dict):
            _add_tree(tar, path, child, mtime)
        else:
            assert isinstance(child, bytes)
            tar.addfile(
                _tarinfo(path, tarfile.REGTYPE, 0o644, len(child), mtime), io.BytesIO(child)
            )


def _tarinfo(name: str, kind: bytes, mode: int, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def gzip_bytes(data: bytes) -> bytes:
    return gzip_module.compress(data, compresslevel=9, mtime=0)
