"""Benchmark 2: the runtime's RAM beyond tensors (and workspace), chains of 10/100/400 adds.

For each chain (factory models chain_add_N: N ``add`` operators on [1,256] float32) and both
graph paths, the probe firmware reports on the device, from the runtime itself:
``mlf_executor_state_bytes()``, ``mlf_graph_measure_json()`` (JSON path) and the sizes of the
``mlf_executor`` / ``mlf_workspace`` structs; the runtime's own globals (last-error text,
bound workspace) come from the linker map (host: object files).

runtime RAM = executor state + graph tables in RAM + executor/workspace structs + runtime
globals. Const tables live in flash (their bytes are reported beside); with graph.json the
tables are parsed into a RAM buffer the generator sizes (an upper bound of the runtime's own
measure, both reported). The receive buffer of the device protocol is the firmware's, not
the runtime's, and is not counted here (``mlf-project footprint`` counts it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from .common import Context, Part, PartResult, device_board, factory_archive
from .probe import cached_probe

TARGET_BYTES = 16 * 1024
CHAINS = (10, 100, 400)
SMOKE_CHAINS = (10,)


def runtime_globals(project: Any) -> int:
    from project_api.footprint import linked_sizes

    linked = linked_sizes(Path(project.build_dir), Path(project.firmware))
    return linked.category_bytes("runtime", (".data", ".bss"))


def run(ctx: Context, result: PartResult) -> None:
    board = device_board()
    result.summary["board"] = board
    if board == "host":
        result.summary["note"] = "no Arm toolchain/QEMU: measured on the host (8-byte pointers)"
    chains = SMOKE_CHAINS if ctx.smoke else CHAINS
    for n in chains:
        archive = factory_archive(f"chain_add_{n}", ctx.work / "archives")
        for fmt in ("tables", "json"):
            probe = cached_probe(ctx, archive, board=board, graph_format=fmt)
            v = probe.values
            (described,) = probe.project.models
            sizes = described["sizes"]
            state = int(v["state_bytes"])
            structs = int(v["executor_struct_bytes"]) + int(v["workspace_struct_bytes"])
            globals_ = runtime_globals(probe.project)
            graph_ram = int(sizes["graph_parse_bytes"]) if fmt == "json" else 0
            measured_graph = int(v.get("graph_measure_bytes", 0))
            total = state + graph_ram + structs + globals_
            row: Dict[str, Any] = {
                "model": f"chain_add_{n}",
                "graph_format": fmt,
                "ops": int(v["num_ops"]),
                "state_bytes": state,
                "generator_state_bytes": int(sizes["state_bytes"]),
                "graph_ram_bytes": graph_ram,
                "graph_measure_bytes": measured_graph,
                "graph_flash_bytes": int(sizes["graph_tables_bytes"] or sizes["graph_json_bytes"]),
                "structs_bytes": structs,
                "runtime_globals_bytes": globals_,
                "runtime_ram_bytes": total,
                "runtime_ram_measured_bytes": state + measured_graph + structs + globals_,
                "tensor_bytes": int(v["arena_in_place_bytes"]),
                "pointer_bytes": int(v["pointer_bytes"]),
            }
            if row["state_bytes"] != row["generator_state_bytes"]:
                raise RuntimeError(f"generator and runtime disagree on executor state: {row}")
            if fmt == "json" and measured_graph > graph_ram:
                raise RuntimeError(f"the parse buffer is smaller than the runtime's measure: {row}")
            result.rows.append(row)
    largest = max(chains)
    for row in result.rows:
        if row["model"] == f"chain_add_{largest}":
            result.summary[f"runtime_ram_{row['graph_format']}"] = row["runtime_ram_bytes"]
    result.summary.update(
        {
            "chain": f"chain_add_{largest}",
            "target_bytes": TARGET_BYTES,
            "target_met": all(
                r["runtime_ram_bytes"] <= TARGET_BYTES
                for r in result.rows
                if r["model"] == f"chain_add_{largest}"
            ),
        }
    )
    ctx.log(
        f"runtime RAM chain_add_{largest}: tables {result.summary.get('runtime_ram_tables')} B, "
        f"json {result.summary.get('runtime_ram_json')} B"
    )


PART = Part(
    "ram",
    "2. runtime RAM beyond tensors, chains of add operators",
    run,
    columns=[
        "model",
        "graph_format",
        "ops",
        "state_bytes",
        "graph_ram_bytes",
        "graph_measure_bytes",
        "structs_bytes",
        "runtime_globals_bytes",
        "runtime_ram_bytes",
        "graph_flash_bytes",
        "tensor_bytes",
    ],  # fmt: skip
)
