"""``host_driven`` with ``device_protocol=microtvm``: the firmware runs TVM's microTVM RPC server
(``template_project/firmware/mlf_utvm_*.c``) so that TVM's own host drives it:
``tvm.micro.Session``, ``create_local_graph_executor``, ``AotModule``, ``time_evaluator``,
``tvmc run --device micro`` and AutoTVM.

The host lays a graph model out itself (one allocation per storage pool, params copied per
tensor), so a graph model has no executor, arena or params on the device: only its system
library, whose functions the host calls by name. An AOT model keeps its executor (and its
arena, for the inputs and outputs the AOT executor module hands out). The device memory the
host allocates from is one arena, sized by ``device_memory_bytes`` or from the models' storage
pools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...board import Board
from ...errors import GenerateError
from ...read import Model
from ..registry import function_pointers_c, registry_c, unregistered_functions
from ..table_sizes import json_parse_bytes, state_bytes
from ..tables import MLF_FUNC_COPY
from .host_driven import HostDriven

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import ModelPlan

RX_BYTES = 2048  # TVM's TVM_CRT_MAX_PACKET_SIZE_BYTES: a full copy block fills it exactly
# tvm.graph_executor.create's request around its graph JSON (one packet): session header,
# MinRPC length, code, handle, four type codes and values, the string's length; rounded up.
CREATE_OVERHEAD = 128
SLACK_BYTES = 8 * 1024  # tensors of tvm.nd.empty, the time evaluator's and AutoTVM's
HOST_MEMORY_BYTES = 8 << 20  # the host board's RAM costs nothing: room for any test script
UNIT = 64  # every device allocation is 64-byte aligned and a multiple of 64 bytes
# sizeof(mlf_utvm) on a 32-bit target, rounded up (argument scratch, block and function
# tables, time evaluator results): 5,480 B in the KWS firmware for qemu-mps2-an385.
STATE_BYTES = 6 * 1024
EXECUTOR_STRUCT_BYTES = 160  # sizeof(mlf_executor) on a 64-bit host is 136


def _units(nbytes: int) -> int:
    return max(UNIT, (nbytes + UNIT - 1) // UNIT * UNIT)


def device_memory(
    plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any], on_device: bool = False
) -> int:
    """The device arena: the option, else every storage pool of the graph models as TVM's host
    allocates them (4-byte rounded, in 64-byte units) or, with graph executors ``on_device``
    and if larger, what they take when created there (graph_executor_bytes), plus slack, and
    on the host board at least 8 MiB."""
    given: Optional[int] = opts.get("device_memory_bytes")
    if given is not None:
        return int(given)
    pools = sum(
        _units(4 * ((nbytes + 3) // 4))
        for plan in plans
        if plan.kind.name == "graph"
        for nbytes in plan.tvm_tables.storage_bytes
    )
    buffers = sum(_units(nbytes) for plan in plans for nbytes in _operator_buffers(plan))
    # A script runs a graph one way or the other: the host's pools, or an executor on the device.
    executors = sum(graph_executor_bytes(plan, board) for plan in plans) if on_device else 0
    graphs = max(pools, executors)
    return max(graphs + buffers + SLACK_BYTES, HOST_MEMORY_BYTES if board.is_host else 0)


def _operator_buffers(plan: ModelPlan) -> List[int]:
    """An operator-style archive's buffers as its metadata lists them (``memory``: every
    function's arguments), twice: the host allocates a function's inputs and outputs."""
    if plan.kind.name != "operator":
        return []
    memory = plan.model.metadata.get("memory")
    entries = [e for v in memory.values() for e in v] if isinstance(memory, dict) else []
    sizes = [e.get("size_bytes") for e in entries if isinstance(e, dict)]
    return 2 * [int(n) for n in sizes if isinstance(n, int) and n > 0]


def rx_bytes(plans: Sequence[ModelPlan], on_device: bool = False) -> int:
    """The receive buffer: a copy block, or with graph executors ``on_device`` the largest
    graph JSON or params blob of a graph model, which ``tvm.contrib.graph_executor.create``
    and ``load_params`` send in one packet each (the device parses them)."""
    if not on_device:
        return RX_BYTES
    texts = [_graph_bytes(plan, plan.model.graph_member) + CREATE_OVERHEAD for plan in plans]
    params = [_graph_bytes(plan, plan.model.params_member) + CREATE_OVERHEAD for plan in plans]
    return max([RX_BYTES, *texts, *params])


def _graph_bytes(plan: ModelPlan, member: Optional[str]) -> int:
    """The size of a graph model's member (its graph JSON, its params blob); 0 otherwise."""
    if plan.kind.name != "graph" or member is None:
        return 0
    return (plan.model.root / member).stat().st_size


def graph_executor_bytes(plan: ModelPlan, board: Board) -> int:
    """Device memory for a graph executor the host creates on the device from the model's
    graph JSON (mlf_utvm_graph.c): a block with the JSON's copy and its parsed tables, a block
    with the executor, its function pointers, its state and its arena, in whole 64-byte units.
    0 for other models."""
    text = _graph_bytes(plan, plan.model.graph_member)
    if not text:
        return 0
    ptr = 8 if board.is_host else 4
    tvm = plan.tvm_tables  # the host's JSON keeps TVM's storage ids
    tables = json_parse_bytes(plan.kind.graph(plan.model), tvm, ptr)
    executor = EXECUTOR_STRUCT_BYTES + ptr * len(tvm.funcs)
    state = executor + state_bytes(tvm, ptr) + tvm.arena_bytes() + UNIT
    return _units(text + 8 + tables) + _units(state)


def rpc_workspace(plans: Sequence[ModelPlan]) -> int:
    """The workspace the models' functions draw from when the host calls them (an AOT model
    keeps its own)."""
    return max((p.workspace.bytes for p in plans if p.kind.name != "aot"), default=0)


def signatures(plan: ModelPlan) -> Optional[Dict[str, Any]]:
    """C for what every function of a graph model takes (mlf_utvm_signature): the count of
    its tensors and the bytes of each, the largest any call of it passes. The server refuses a
    call that passes less, since TVM's generated code checks nothing. None when the functions
    are not all C functions the linker can bind, or calls of one disagree on the count."""
    tables = plan.tables
    per_func: Dict[int, List[int]] = {}
    for op in tables.ops:
        if op.func == MLF_FUNC_COPY:
            continue
        sizes = [tables.views[view].nbytes for view in op.args]
        known = per_func.setdefault(op.func, sizes)
        if len(known) != len(sizes):
            return None
        per_func[op.func] = [max(a, b) for a, b in zip(known, sizes)]
    prefix = f"mlf_{plan.c_name}_sig"
    names = [tables.funcs[index] for index in per_func]
    declared = function_pointers_c(f"{prefix}_funcs", names, plan.model.sources, plan.renames)
    lengths = [len(sizes) for sizes in per_func.values()]
    if declared is None or sum(lengths) > 0xFFFF:
        return None
    firsts = [sum(lengths[:i]) for i in range(len(lengths))]
    arg_bytes = [f"{n}u" for sizes in per_func.values() for n in sizes]
    return {
        "c": "\n".join(
            [
                declared,
                f"static const mlf_utvm_signature {prefix}s[] = {{",
                *(f"    {{{n}u, {first}u}}," for n, first in zip(lengths, firsts)),
                "};",
                f"static const uint32_t {prefix}_bytes[] = {{{', '.join(arg_bytes) or '0u'}}};",
            ]
        ),
        "funcs": f"{prefix}_funcs",
        "signatures": f"{prefix}s",
        "bytes": f"{prefix}_bytes",
        "count": len(per_func),
    }


def extra_library(plan: ModelPlan) -> Optional[Dict[str, str]]:
    """C for a registry of the functions a graph model calls that TVM left out of its system
    library (external codegens such as CMSIS-NN register nothing there): the host looks every
    function up by name. None when TVM's registry has them all."""
    missing = unregistered_functions(plan.tables.funcs, plan.model.sources)
    if not missing:
        return None
    symbol = f"mlf_{plan.c_name}_extra"
    entries = [(name, plan.renames.get(name, name)) for name in missing]
    return {"c": registry_c(symbol, entries), "symbol": f"&{symbol}"}


class HostDrivenMicroTvm(HostDriven):
    firmware_sources: Tuple[str, ...] = (
        "mlf_utvm_alloc.c",
        "mlf_utvm_framing.c",
        "mlf_utvm_globals.c",
        "mlf_utvm_graph_none.c",  # tvm.graph_executor.create refused, saying how to get it
        "mlf_utvm_minrpc.c",
        "mlf_utvm_session.c",
    )
    serves_operators = True  # AutoTVM's trials: the host times the functions by name
    # TVM's host may set inputs of one model, run another, load params: arenas stay apart.
    shares_arena = False
    graph_executor_on_device = False
    driven_by = "TVM's tvm.micro.Session"
    cli_command = "tvmc run --device micro, or a script with tvm.micro.Session"

    @property
    def main_template(self) -> str:
        return "main_host_driven_microtvm.c.j2"

    def check(self, models: Sequence[Model], opts: Mapping[str, Any]) -> None:
        if opts.get("profile"):
            raise GenerateError(
                "option profile needs device_protocol=mlf",
                hint="the profile is read over our device protocol, which TVM's host cannot",
            )
        if opts.get("graph_format") == "json":
            raise GenerateError(
                "option graph_format=json needs device_protocol=mlf",
                hint="TVM's host sends the graph itself; the firmware embeds none",
            )

    def keeps_executor(self, plan: ModelPlan) -> bool:
        return plan.kind.name == "aot"  # the host runs a graph itself

    def ram_items(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, int]:
        return {
            "receive buffer": rx_bytes(plans, self.graph_executor_on_device) + 1,
            "device memory": device_memory(plans, board, opts, self.graph_executor_on_device),
            "RPC workspace": rpc_workspace(plans),
            "RPC server state": STATE_BYTES,
        }

    def context(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, Any]:
        workspace = rpc_workspace(plans)
        on_device = self.graph_executor_on_device
        return {
            "signatures": {
                plan.c_name: signatures(plan) for plan in plans if plan.kind.name == "graph"
            },
            "extra_libraries": {
                plan.c_name: extra_library(plan) for plan in plans if plan.kind.name == "graph"
            },
            "header_includes": [],
            "model_fields": [],
            "defines": {
                "MLF_UTVM_RX_BYTES": f"{rx_bytes(plans, on_device)}u",
                "MLF_UTVM_MEMORY_BYTES": f"{device_memory(plans, board, opts, on_device)}u",
                "MLF_UTVM_WORKSPACE_BYTES": f"{workspace}u",
            },
        }

    def describe(self, plans: Sequence[ModelPlan], opts: Mapping[str, Any]) -> Dict[str, Any]:
        # The arena's size is in the fit items ("device memory").
        return {"device_protocol": "microtvm"}


class HostDrivenMicroTvmGraph(HostDrivenMicroTvm):
    """With ``device_graph_executor``: the firmware also answers ``tvm.graph_executor.create``
    (mlf_utvm_graph.c over the runtime's JSON parser), sized for the models' graph JSON and
    params."""

    firmware_sources = tuple(
        "mlf_utvm_graph.c" if name == "mlf_utvm_graph_none.c" else name
        for name in HostDrivenMicroTvm.firmware_sources
    )
    parses_graph_json = True  # tvm.graph_executor.create sends the graph JSON at run time
    graph_executor_on_device = True
