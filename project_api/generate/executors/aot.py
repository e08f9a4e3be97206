"""AOT archives: the model is one C function, presented to the runtime as a graph of one
operator call whose arguments are the model's inputs and outputs.

The inputs and outputs then live in the executor's arena, so the device protocol writes
inputs and reads outputs in place, and the executor's one indirect call is all the firmware
adds to a direct call of the entry point:

- interface ``c``: the call goes to a generated adapter that puts the tensors' data pointers
  into ``struct tvmgen_<mod>_inputs``/``outputs`` and calls ``tvmgen_<mod>_run``;
- interface ``packed``: ``tvmgen_<mod>___tvm_main__`` takes the DLTensors itself and is
  found in the model's system library.

Without USMP the model's C takes its scratch memory from ``TVMBackendAllocWorkspace`` (our
LIFO workspace); with USMP it holds static pools, placed by the linker script and counted by
the fit check.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ...read import Graph, Model
from ...read.aot import AotEntry
from ..registry import registry_c
from ..sizes import WORKSPACE_ALIGN, WorkspaceEstimate, align, function_allocations
from .base import ExecutorKind, LibraryCode, LibraryRequest
from .graph import system_library

AOT_GRAPH_MEMBER = "(AOT entry point)"


def aot_entry(model: Model) -> AotEntry:
    entry = model.aot
    assert isinstance(entry, AotEntry), f"model {model.name} was not read as an AOT model"
    return entry


class AotExecutor(ExecutorKind):
    name = "aot"

    def graph(self, model: Model) -> Graph:
        entry = aot_entry(model)
        func = entry.run_function if entry.interface == "c" else entry.main_function
        return entry_graph(model, func)

    def graph_format(self, requested: str) -> str:
        return "tables"  # one call: nothing for the device to parse

    def workspace(self, model: Model, override: Optional[int]) -> WorkspaceEstimate:
        return aot_workspace(model, override)

    def library(self, request: LibraryRequest) -> LibraryCode:
        entry = aot_entry(request.model)
        if entry.interface == "packed":
            return system_library(request)
        symbol = f"mlf_{request.c_name}_aot"
        text = adapter_c(entry, f"{symbol}_run", request.renames.get(entry.run_function))
        if request.bound:  # const tables take the adapter's address: no registry, no lookup
            array = f"{symbol}_func_ptrs"
            ptrs = f"static const TVMBackendPackedCFunc {array}[] = {{{symbol}_run}};\n"
            return LibraryCode(text + "\n" + ptrs, "NULL", func_ptrs=array)
        return LibraryCode(text + "\n" + _registry(symbol, entry.run_function), f"&{symbol}")

    def ram_items(self, model: Model) -> Dict[str, int]:
        pools = aot_entry(model).static_pool_bytes
        return {"model pools (USMP)": pools} if pools else {}

    def describe(self, model: Model) -> Dict[str, Any]:
        return {"executor": self.name, **aot_entry(model).describe()}


def entry_graph(model: Model, func: str) -> Graph:
    """A graph of one ``tvm_op`` calling ``func`` with every input, then every output."""
    specs = list(model.inputs) + list(model.outputs)
    n_in, n_out = len(model.inputs), len(model.outputs)
    nodes: List[Dict[str, Any]] = [
        {"op": "null", "name": s.name, "inputs": []} for s in model.inputs
    ]
    attrs = {"func_name": func, "num_inputs": str(n_in), "num_outputs": str(n_out)}
    inputs = [[i, 0, 0] for i in range(n_in)]
    nodes.append({"op": "tvm_op", "name": func, "inputs": inputs, "attrs": attrs})
    data = {
        "nodes": nodes,
        "arg_nodes": list(range(n_in)),
        "heads": [[n_in, j, 0] for j in range(n_out)],
        "node_row_ptr": list(range(n_in + 1)) + [n_in + n_out],
        "attrs": {
            "shape": ["list_shape", [list(s.shape) for s in specs]],
            "dltype": ["list_str", [s.dtype for s in specs]],
            "storage_id": ["list_int", list(range(len(specs)))],
        },
    }
    return Graph.from_dict(data, AOT_GRAPH_MEMBER)


def aot_workspace(model: Model, override: Optional[int]) -> WorkspaceEstimate:
    """``__tvm_main__`` holds its own allocations while each operator it calls allocates on
    top of them (LIFO): the need is main's blocks plus the largest operator's. The metadata's
    ``main`` figure is TVM's count of the same; each allocation may add an alignment block."""
    entry = aot_entry(model)
    reported = entry.workspace_bytes if not entry.usmp else 0
    found = function_allocations(model.sources)
    if found is None:
        if override is not None:
            return WorkspaceEstimate(int(override), "option", reported)
        slack = WORKSPACE_ALIGN * max(4, reported // 1024)
        return WorkspaceEstimate(align(reported, WORKSPACE_ALIGN) + slack, "metadata", reported)
    main = [sizes for first, sizes in found if entry.main_function in first]
    others = [sizes for first, sizes in found if entry.main_function not in first]
    main_sizes = main[0] if main else []
    code = sum(main_sizes) + max((sum(s) for s in others), default=0)
    calls = len(main_sizes) + max((len(s) for s in others), default=0)
    if override is not None:  # what the code allocates stays known (the plan checks it)
        return WorkspaceEstimate(int(override), "option", reported, code, calls)
    from_metadata = align(reported, WORKSPACE_ALIGN) + WORKSPACE_ALIGN * calls if calls else 0
    total = max(code, from_metadata)
    how = "none" if total == 0 else "code" if code >= from_metadata else "metadata"
    return WorkspaceEstimate(total, how, reported, code, calls)


def adapter_c(entry: AotEntry, function: str, renamed: Optional[str] = None) -> str:
    """The packed-convention function the executor calls for interface ``c``."""
    header = (entry.header_member or "").rsplit("/", 1)[-1]
    lines = []
    if renamed:
        lines.append(f"#define {entry.run_function} {renamed}")
    lines += [
        f'#include "{header}"',
        "",
        "static void* mlf_aot_data(TVMValue value) {",
        "  DLTensor* tensor = (DLTensor*)value.v_handle;",
        "  return (uint8_t*)tensor->data + tensor->byte_offset;",
        "}",
        "",
        "/* The executor's call of the AOT entry point: each argument is a DLTensor in the",
        f" * arena; {entry.run_function} takes their data pointers in TVM's structs. */",
        f"int {function}(TVMValue* args, int* type_codes, int num_args, TVMValue* ret,",
        "    int* ret_code, void* resource) {",
        "  (void)type_codes;",
        "  (void)ret;",
        "  (void)ret_code;",
        "  (void)resource;",
        f"  if (num_args != {len(entry.input_fields) + len(entry.output_fields)}) return -1;",
    ]
    for kind, fields, first in (
        ("inputs", entry.input_fields, 0),
        ("outputs", entry.output_fields, len(entry.input_fields)),
    ):
        lines.append(f"  struct {entry.prefix}_{kind} {kind} = {{")
        for index, field in enumerate(fields, start=first):
            lines.append(f"      .{field} = mlf_aot_data(args[{index}]),")
        lines.append("  };")
    lines.append(f"  return (int){entry.run_function}(&inputs, &outputs);")
    lines.append("}")
    return "\n".join(lines)


def _registry(symbol: str, name: str) -> str:
    return registry_c(symbol, [(name, f"{symbol}_run")])
