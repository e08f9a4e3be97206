"""Turn an extracted archive directory into validated :class:`Model` objects.

Knows where each MLF version put its files (spec mlf.md) and checks that those files agree
with metadata.json and with each other (params vs graph).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..errors import GraphError, MetadataError, ParamsError
from ..jsontext import json_problem, parse_json
from .aot import read_aot
from .code import (
    code_listing,
    is_junk,
    read_texts,
    require_aot_functions,
    require_graph_functions,
    uses_arm_dsp,
)
from .dtypes import UnknownDTypeError, dtype_from_numpy, parse_dtype
from .graph import Graph
from .metadata import MEMBER, ModelMetadata, main_io, operator_function_names, parse_metadata
from .model import Model, TensorSpec
from .params import load_params

SOURCE_SUFFIXES = (".c", ".cc", ".cpp")
SRC_DIR = "codegen/host/src"
LIB_DIR = "codegen/host/lib"
INCLUDE_DIR = "codegen/host/include"
PARAMS_DIR = "parameters"
GRAPH_DIR_V5 = "executor-config/graph"
GRAPH_DIR_V1 = "runtime-config/graph"


def read_metadata(root: Path) -> Dict[str, Any]:
    path = root / MEMBER
    try:
        data = parse_json(path.read_text(encoding="utf-8"), unique_keys=True)
    except json.JSONDecodeError as err:
        raise MetadataError(MEMBER, *json_problem(err)) from None
    except UnicodeDecodeError:
        raise MetadataError(MEMBER, "", "not UTF-8 text") from None
    if not isinstance(data, dict):
        raise MetadataError(MEMBER, "", "top level must be a JSON object")
    return data


def load_models(root: Path, metadata: Dict[str, Any]) -> Tuple[int, List[Model]]:
    """Validate everything and build one Model per model in ``metadata``."""
    version, entries = parse_metadata(metadata)
    multi = len(entries) > 1
    return version, [_build_model(root, version, entry, multi) for entry in entries]


def _build_model(root: Path, version: int, meta: ModelMetadata, multi: bool) -> Model:
    model = Model(
        name=meta.name,
        executor=meta.executor,
        style=meta.style,
        targets=meta.targets,
        metadata=meta.raw,
        root=root,
        workspace_bytes=meta.workspace_bytes,
        external_dependencies=meta.external_dependencies,
        metadata_functions=operator_function_names(meta.raw, meta.style),
    )
    model.sources, model.objects = _code_files(root, meta.name, multi)
    if not model.sources and not model.objects:
        expected = (
            f"its generated C, {SRC_DIR}/{meta.name}_libN.c"
            if multi
            else f"its generated C in {SRC_DIR} (or objects in {LIB_DIR})"
        )
        raise _name_mismatch(meta, expected, code_listing(root))
    if (root / INCLUDE_DIR).is_dir():
        model.include_dirs = [root / INCLUDE_DIR]
    if meta.executor == "operator":
        return model
    model.params_member = _params_member(root, meta, required=meta.executor == "graph")
    if model.params_member:
        model.params = load_params(root / model.params_member, member=model.params_member)
    texts = read_texts(model.sources)  # read once, for every check below
    model.arm_dsp = uses_arm_dsp(texts.values())
    if meta.executor == "graph":
        _attach_graph(model, root, version, meta)
        require_graph_functions(model, texts)
    else:
        inputs, outputs = _aot_io(meta)
        model.aot, model.inputs, model.outputs = read_aot(
            root, meta.name, texts, inputs, outputs, meta.workspace_bytes
        )
        require_aot_functions(model, texts)
    return model


# --- files ------------------------------------------------------------------------------


def _lib_index(path: Path) -> Tuple[int, str]:
    # lib2.c before lib10.c: order by the number TVM appended, then by name.
    match = re.search(r"lib(\d+)\.\w+$", path.name)
    return (int(match.group(1)) if match else -1, path.name)


def _code_files(root: Path, name: str, multi: bool) -> Tuple[List[Path], List[Path]]:
    """(sources, objects) of one model. In a multi-model archive only ``<name>_libN.*``."""
    own = re.compile(rf"^{re.escape(name)}_lib\d+\.(c|cc|cpp|o)$")

    def pick(directory: str, suffixes: Tuple[str, ...]) -> List[Path]:
        folder = root / directory
        if not folder.is_dir():
            return []
        found = [
            path
            for path in folder.iterdir()
            if path.is_file()
            and path.suffix in suffixes
            and not is_junk(path.name)
            and (not multi or own.match(path.name))
        ]
        return sorted(found, key=_lib_index)

    return pick(SRC_DIR, SOURCE_SUFFIXES), pick(LIB_DIR, (".o",))


def _present(root: Path, candidates: List[str]) -> Optional[str]:
    return next((member for member in candidates if (root / member).is_file()), None)


def _others(root: Path, directory: str, suffix: str) -> List[str]:
    folder = root / directory
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob(f"*{suffix}") if not is_junk(p.name))


def _name_mismatch(meta: ModelMetadata, expected: str, found: List[str]) -> MetadataError:
    where = f"{meta.location}.model_name" if meta.location else "model_name"
    held = ", ".join(found) if found else "nothing"
    return MetadataError(
        MEMBER, where, f"model {meta.name!r} needs {expected}, but the archive holds {held}"
    )


def _params_member(root: Path, meta: ModelMetadata, required: bool) -> Optional[str]:
    expected = f"{PARAMS_DIR}/{meta.name}.params"
    if (root / expected).is_file():
        return expected
    if required or _others(root, PARAMS_DIR, ".params"):
        raise _name_mismatch(meta, expected, _others(root, PARAMS_DIR, ".params"))
    return None


def _graph_member(root: Path, version: int, meta: ModelMetadata) -> str:
    if meta.location:  # v7 modules: one <mod>.graph per model
        candidates = [f"{GRAPH_DIR_V5}/{meta.name}.graph"]
    elif version >= 5:
        candidates = [f"{GRAPH_DIR_V5}/graph.json", f"{GRAPH_DIR_V5}/{meta.name}.graph"]
    else:
        candidates = [f"{GRAPH_DIR_V1}/graph.json", f"{GRAPH_DIR_V5}/graph.json"]
    found = _present(root, candidates)
    if found is None:
        held = _others(root, GRAPH_DIR_V5, "") + _others(root, GRAPH_DIR_V1, "")
        raise _name_mismatch(meta, candidates[0], held)
    return found


# --- graph models -----------------------------------------------------------------------


def _attach_graph(model: Model, root: Path, version: int, meta: ModelMetadata) -> None:
    member = _graph_member(root, version, meta)
    try:
        text = (root / member).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GraphError(member, "", "not UTF-8 text") from None
    graph = Graph.from_json(text, member)
    check_params_against_graph(model.params, model.params_member or "params", graph)
    model.graph, model.graph_member = graph, member
    model.inputs = graph_inputs(graph, model.params)
    model.outputs = graph_outputs(graph)


def check_params_against_graph(params: Dict[str, np.ndarray], member: str, graph: Graph) -> None:
    """Every param must be a graph input with the same shape and dtype.

    TVM's C++ runtime silently ignores unknown names; we refuse them, because a params file
    that does not belong to its graph is a packaging mistake worth stopping at.
    """
    for name, array in params.items():
        nid = graph.node_id(name)
        if nid is None:
            raise ParamsError(member, name, f"is not an input of the graph {graph.member}")
        eid = graph.entry_id(nid)
        where = f"{graph.member} attrs.shape[1][{eid}]"
        if tuple(array.shape) != graph.shapes[eid]:
            raise ParamsError(
                member, name, f"shape {list(array.shape)} but {where} is {list(graph.shapes[eid])}"
            )
        try:
            dtype = str(dtype_from_numpy(array.dtype))
        except UnknownDTypeError as err:
            raise ParamsError(member, name, str(err)) from None
        if parse_dtype(graph.dtypes[eid]) != parse_dtype(dtype):
            raise ParamsError(
                member,
                name,
                f"dtype {dtype} but {graph.member} attrs.dltype[1][{eid}] is {graph.dtypes[eid]}",
            )


def graph_inputs(graph: Graph, params: Dict[str, np.ndarray]) -> List[TensorSpec]:
    """Inputs the caller feeds: the ``null`` arg nodes not supplied by the params file."""
    specs = []
    for nid in graph.arg_nodes:
        node = graph.nodes[nid]
        if node.name not in params:
            eid = graph.entry_id(nid)
            specs.append(TensorSpec(node.name, graph.shapes[eid], graph.dtypes[eid]))
    return specs


def graph_outputs(graph: Graph) -> List[TensorSpec]:
    specs = []
    for i, (nid, index, _) in enumerate(graph.heads):
        eid = graph.entry_id(nid, index)
        specs.append(TensorSpec(f"output{i}", graph.shapes[eid], graph.dtypes[eid]))
    return specs


# --- AOT models -------------------------------------------------------------------------


def _aot_io(meta: ModelMetadata) -> Tuple[List[TensorSpec], List[TensorSpec]]:
    """AOT inputs/outputs from metadata (TVM >= 0.10 records name, size, dtype; no shape,
    so each is described as a flat vector of size/itemsize elements).

    TVM writes metadata.json with sorted keys, so the true order is lost; tuple outputs are
    named output0..N-1, and a natural sort (output2 before output10) restores theirs.
    """
    outputs = sorted(_io_specs(meta, "outputs"), key=lambda spec: _natural_key(spec.name))
    return _io_specs(meta, "inputs"), outputs


def _natural_key(name: str) -> Tuple[str, int]:
    match = re.match(r"^(.*?)(\d+)$", name)
    return (match.group(1), int(match.group(2))) if match else (name, -1)


def _io_specs(meta: ModelMetadata, key: str) -> List[TensorSpec]:
    entries = main_io(meta.raw, key) or {}
    specs = []
    for name, entry in entries.items():
        where = f"{meta.location + '.' if meta.location else ''}memory.functions.main.{key}.{name}"
        if not isinstance(entry, dict):
            raise MetadataError(MEMBER, where, "must be an object")
        try:
            itemsize = parse_dtype(str(entry.get("dtype"))).itemsize
        except UnknownDTypeError as err:
            raise MetadataError(MEMBER, f"{where}.dtype", str(err)) from None
        size = entry.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0 or size % itemsize:
            raise MetadataError(MEMBER, f"{where}.size", f"not a byte size of {entry['dtype']}")
        specs.append(TensorSpec(name, (size // itemsize,), entry["dtype"]))
    return specs
