"""AOT archives: the model is one C function, presented to the runtime as a graph of one
operator call whose arguments are the model's inputs and outputs.

The inputs and outputs then live in the executor's arena, so the device protocol writes
inputs and reads outputs in place, and the executor's one indirect call is all the firmware
adds to a direct call of the entry point:

- interface ``c``: the call goes to a generated adapter that puts the tensors' data pointers
  into ``struct tvmgen_<mod>_inputs``/``outputs`` and calls ``tvmgen_<mod>_run``, giving it
  the pools it takes from its caller (defined beside the adapter); with the inputs and
  outputs mapped inside those pools (``use_workspace_io``) the adapter copies them in and out;
- interface ``packed``: ``tvmgen_<mod>_run`` takes the DLTensors itself; a small adapter gives
  it a type code for every argument its ``__tvm_main__`` reads (USMP adds the pools). Without
  that wrapper, ``__tvm_main__`` is found in the model's system library.

Without USMP the model's C takes its scratch memory from ``TVMBackendAllocWorkspace`` (our
LIFO workspace); with USMP it holds static pools, placed by the linker script and counted by
the fit check, as are the workspace pools the adapter defines for it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ...read import Graph, Model
from ...read.aot import AotEntry
from ..registry import registry_c
from ..sizes import (
    WorkspaceEstimate,
    figure_bytes,
    function_allocations,
    function_sites,
    lifo_bytes,
    window_bytes,
    with_adapter,
)
from .base import ExecutorKind, LibraryCode, LibraryRequest
from .graph import system_library

AOT_GRAPH_MEMBER = "(AOT entry point)"
# The fit check's items for the model's pools (per model: "<name> " before them when several);
# footprint plans from them.
POOLS_RAM_ITEM = "model pools (USMP)"
CONSTANT_POOLS_FLASH_ITEM = "model constant pools"
POOL_SECTION = ".bss.noinit.tvm"  # beside USMP's own pools: not zeroed at start-up
POOL_ALIGN = 16  # TVM aligns its pool buffers to 16 bytes (and USMP offsets to the
# workspace-byte-alignment, 16 by default)


def aot_entry(model: Model) -> AotEntry:
    entry = model.aot
    assert isinstance(entry, AotEntry), f"model {model.name} was not read as an AOT model"
    return entry


class AotExecutor(ExecutorKind):
    name = "aot"

    def graph(self, model: Model) -> Graph:
        entry = aot_entry(model)
        return entry_graph(model, entry.entry_function)

    def graph_format(self, requested: str) -> str:
        return "tables"  # one call: nothing for the device to parse

    def workspace(
        self, model: Model, override: Optional[int], adapter: Optional[Mapping[str, int]] = None
    ) -> WorkspaceEstimate:
        return aot_workspace(model, override, adapter)

    def library(self, request: LibraryRequest) -> LibraryCode:
        entry = aot_entry(request.model)
        if entry.interface == "packed" and not entry.packed_run:
            return system_library(request)
        symbol = f"mlf_{request.c_name}_aot"
        renamed = request.renames.get(entry.run_function)
        if entry.interface == "packed":
            text = packed_adapter_c(entry, f"{symbol}_run", renamed)
        else:
            text = adapter_c(entry, request.model, symbol, renamed)
        if request.bound:  # const tables take the adapter's address: no registry, no lookup
            array = f"{symbol}_func_ptrs"
            ptrs = f"static const TVMBackendPackedCFunc {array}[] = {{{symbol}_run}};\n"
            return LibraryCode(text + "\n" + ptrs, "NULL", func_ptrs=array)
        return LibraryCode(text + "\n" + _registry(symbol, entry.run_function), f"&{symbol}")

    def ram_items(self, model: Model) -> Dict[str, int]:
        pools = aot_entry(model).pool_ram_bytes
        return {POOLS_RAM_ITEM: pools} if pools else {}

    def flash_items(self, model: Model) -> Dict[str, int]:
        constants = aot_entry(model).constant_pool_bytes
        return {CONSTANT_POOLS_FLASH_ITEM: constants} if constants else {}

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


def aot_workspace(
    model: Model, override: Optional[int], adapter: Optional[Mapping[str, int]] = None
) -> WorkspaceEstimate:
    """``__tvm_main__`` holds its own allocations while each operator it calls allocates on
    top of them (LIFO): the need is main's blocks with the largest operator's on top, the
    CMSIS-NN adapter's bytes (``adapter``) on top of its function's own (the runtime's rule,
    :func:`~..sizes.lifo_bytes`). The metadata's ``main`` figure is TVM's count of the same;
    each allocation may add a padding block and a link (:func:`~..sizes.figure_bytes`). With
    USMP TVM's code allocates nothing: the adapter's bytes are the whole workspace."""
    entry = aot_entry(model)
    adapter = dict(adapter or {})
    pairs = tuple(sorted(adapter.items()))
    reported = entry.workspace_bytes if not entry.usmp else 0
    found = function_allocations(model.sources)
    sites = function_sites(model)
    if found is None:
        if override is not None:
            return WorkspaceEstimate(int(override), "option", reported, adapter=pairs)
        deepest_call = None
        if sites is not None:
            main_sites = sites.get(entry.main_function, 0)
            deepest_call = main_sites + max(
                (n for fn, n in sites.items() if fn != entry.main_function), default=0
            )
        above = max(adapter.values(), default=0)
        total = window_bytes(figure_bytes(reported, deepest_call, above))
        return WorkspaceEstimate(total, "metadata", reported, adapter=pairs)
    main = [sizes for first, sizes in found if entry.main_function in first]
    others = [(first, sizes) for first, sizes in found if entry.main_function not in first]
    main_sizes = main[0] if main else []
    deepest = max(
        max((lifo_bytes(s) for _, s in others), default=0),
        with_adapter(others, adapter, skip=entry.main_function),
        adapter.get(entry.main_function, 0),
    )
    code = window_bytes(lifo_bytes(main_sizes, deepest))
    calls = len(main_sizes) + max((len(s) for _, s in others), default=0)
    if override is not None:  # what the code allocates stays known (the plan checks it)
        return WorkspaceEstimate(int(override), "option", reported, code, calls, pairs)
    from_metadata = window_bytes(figure_bytes(reported, calls)) if calls else 0
    total = max(code, from_metadata)
    how = "none" if total == 0 else "code" if code >= from_metadata else "metadata"
    return WorkspaceEstimate(total, how, reported, code, calls, pairs)


_ADAPTER_HEAD = [
    "static void* mlf_aot_data(TVMValue value) {",
    "  DLTensor* tensor = (DLTensor*)value.v_handle;",
    "  return (uint8_t*)tensor->data + tensor->byte_offset;",
    "}",
    "",
]
_PACKED_PARAMS = (
    "TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_code, void* resource"
)


def adapter_c(entry: AotEntry, model: Model, symbol: str, renamed: Optional[str] = None) -> str:
    """The packed-convention function ``<symbol>_run`` the executor calls for interface
    ``c``, and the pools it hands ``tvmgen_<mod>_run``."""
    function = f"{symbol}_run"
    header = (entry.header_member or "").rsplit("/", 1)[-1]
    lines = [f"#define {entry.run_function} {renamed}"] if renamed else []
    lines += [f'#include "{header}"', "#include <string.h>", ""] + _ADAPTER_HEAD
    if entry.caller_pools:
        lines += _caller_pools_c(entry, symbol) + [""]
    n_args = len(entry.input_fields) + len(entry.output_fields)
    lines += [
        "/* The executor's call of the AOT entry point: each argument is a DLTensor in the",
        f" * arena; {entry.run_function} takes their data pointers in TVM's structs. */",
        f"int {function}({_PACKED_PARAMS}) {{",
        "  (void)type_codes;",
        "  (void)ret;",
        "  (void)ret_code;",
        "  (void)resource;",
        f"  if (num_args != {n_args}) return -1;",
    ]
    if entry.io_in_pools:  # the model reads and writes them inside its pools: copy
        pools = f"&{symbol}_pools"
        lines.append(f"  struct {entry.prefix}_inputs inputs = {entry.prefix}_map_inputs({pools});")
        for index, field in enumerate(entry.input_fields):
            size = model.inputs[index].nbytes
            lines.append(f"  memcpy(inputs.{field}, mlf_aot_data(args[{index}]), {size});")
        lines.append(f"  int status = (int){entry.run_function}({pools});")
        lines.append(
            f"  struct {entry.prefix}_outputs outputs = {entry.prefix}_map_outputs({pools});"
        )
        for index, field in enumerate(entry.output_fields):
            arg = len(entry.input_fields) + index
            size = model.outputs[index].nbytes
            lines.append(f"  memcpy(mlf_aot_data(args[{arg}]), outputs.{field}, {size});")
        return "\n".join(lines + ["  return status;", "}"])
    for kind, fields, first in (
        ("inputs", entry.input_fields, 0),
        ("outputs", entry.output_fields, len(entry.input_fields)),
    ):
        lines.append(f"  struct {entry.prefix}_{kind} {kind} = {{")
        for index, field in enumerate(fields, start=first):
            lines.append(f"      .{field} = mlf_aot_data(args[{index}]),")
        lines.append("  };")
    pools_arg = f", &{symbol}_pools" if entry.caller_pools else ""
    lines.append(f"  return (int){entry.run_function}(&inputs, &outputs{pools_arg});")
    lines.append("}")
    return "\n".join(lines)


def _caller_pools_c(entry: AotEntry, symbol: str) -> List[str]:
    """The pools ``tvmgen_<mod>_run`` takes from its caller: workspace pools uninitialised
    (placed with USMP's own), constant pools in flash from the header's bytes."""
    lines = []
    for pool in entry.caller_pools:
        array = f"{symbol}_pool_{pool.member}"
        if pool.constant:
            lines += [
                f"static const uint8_t {array}[{max(pool.size, 1)}]"
                f" __attribute__((aligned({POOL_ALIGN}))) = {{",
                f"    {pool.data_macro(entry.prefix)}",
                "};",
            ]
        else:
            lines += [
                f'__attribute__((section("{POOL_SECTION}"), aligned({POOL_ALIGN})))',
                f"static uint8_t {array}[{max(pool.size, 1)}];",
            ]
    lines.append(f"static struct {entry.prefix}_workspace_pools {symbol}_pools = {{")
    for pool in entry.caller_pools:
        lines.append(f"    .{pool.member} = (void*){symbol}_pool_{pool.member},")
    lines.append("};")
    return lines


def packed_adapter_c(entry: AotEntry, function: str, renamed: Optional[str] = None) -> str:
    """The executor's call of a packed ``tvmgen_<mod>_run``: the same arguments, with a type
    code for each of the ``packed_slots`` arguments its ``__tvm_main__`` reads (it reads one
    for every pool USMP appends, too)."""
    run = renamed or entry.run_function
    slots = entry.packed_slots
    return "\n".join(
        [
            f"int32_t {run}({entry.packed_run});",
            "",
            f"int {function}({_PACKED_PARAMS}) {{",
            f"  int codes[{slots}];",
            f"  for (int i = 0; i < {slots}; ++i) {{",
            "    codes[i] = i < num_args ? type_codes[i] : kTVMDLTensorHandle;",
            "  }",
            f"  return (int){run}(args, codes, num_args, ret, ret_code, resource);",
            "}",
        ]
    )


def _registry(symbol: str, name: str) -> str:
    return registry_c(symbol, [(name, f"{symbol}_run")])
