"""Benchmark 7: AOT archives beside the graph archive of the same model, and what our
firmware adds to a bare call of TVM's AOT entry point.

On qemu-mps2-an385 (Cortex-M3) under ``-icount shift=0``, for ``kws_int8`` (graph),
``kws_int8_aot`` (C interface, ``TVMBackendAllocWorkspace``) and ``kws_int8_aot_usmp`` (C
interface, USMP static pool) of the corpus, in one run:

- instructions per inference through the firmware's executor (the probe firmware of
  bench/probe.py, the same path the device protocol's ``run`` takes);
- for the AOT archives, the same inference as a bare program does it: ``tvmgen_kws_run``
  called directly with TVM's own structs (from the archive's header) over the same buffers;
  overhead % = (firmware - bare) / bare * 100, target <= 0.01 %;
- RAM and flash of the normal ``host_driven`` firmware, linked (``footprint --build``),
  with the model's own USMP pools shown apart.

``--smoke`` measures ``mnist8_aot`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from .common import QEMU_BOARD, Context, Part, PartResult, Skip, corpus_dir, require_qemu
from .probe import cached_probe

TARGET_PERCENT = 0.01
KWS_CASES = ("kws_int8", "aot/kws_int8_aot", "aot/kws_int8_aot_usmp")
SMOKE_CASES = ("aot/mnist8_aot",)
OVERHEAD_CASE = "aot/kws_int8_aot_usmp"


def _archive(stem: str) -> Optional[Path]:
    path = corpus_dir() / f"{stem}.tar"
    return path if path.is_file() else None


def _memory(ctx: Context, archive: Path, label: str) -> Dict[str, Any]:
    """Linked RAM and flash of the firmware ``mlf-project run`` would build."""
    from project_api.driver import Project
    from project_api.footprint import project_footprint

    project = Project.generate(
        archive,
        (ctx.work / "aot" / label.replace("/", "_")).resolve(),
        board=QEMU_BOARD,
        force=True,
    )
    project.build()
    report = project_footprint(project, estimate=False)
    return {
        "flash_bytes": report.flash_total_bytes,
        "ram_bytes": report.ram_total_bytes,
        "model_pools_bytes": report.model_pools_bytes,
        # What the model's calls take (in the arena, as windows, with the liveness plan).
        "workspace_bytes": int(project.models[0]["sizes"]["workspace_bytes"]),
        "model_code_bytes": report.model_code_bytes,
    }


def measure(ctx: Context, stem: str) -> Dict[str, Any]:
    archive = _archive(stem)
    if archive is None:
        raise Skip(f"{stem}.tar is not in the corpus ({corpus_dir()})")
    probe = cached_probe(ctx, archive, board=QEMU_BOARD)
    firmware = probe.per_inference("executor_ticks")
    bare = probe.per_inference("direct_ticks")
    assert firmware is not None
    row: Dict[str, Any] = {
        "model": stem.rsplit("/", 1)[-1],
        "executor": "aot" if stem.startswith("aot/") else "graph",
        "instructions": round(firmware, 1),
        "bare_instructions": None if bare is None else round(bare, 1),
        "overhead_instructions": None if bare is None else round(firmware - bare, 1),
        "overhead_percent": None if not bare else round(100.0 * (firmware - bare) / bare, 5),
        "quantum_instructions": probe.quantum,
        "outputs_match": None if bare is None else bool(probe.values.get("direct_match")),
        "reps": int(probe.values["reps"]),
    }
    row.update(_memory(ctx, archive, stem))
    return row


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    result.summary["board"] = f"{QEMU_BOARD} (-icount shift=0)"
    for stem in SMOKE_CASES if ctx.smoke else KWS_CASES:
        try:
            row = measure(ctx, stem)
        except Skip as why:
            result.skipped.append(str(why))
            continue
        if row["outputs_match"] is False:
            raise RuntimeError(f"{stem}: the bare call computed other outputs than the firmware")
        result.rows.append(row)
        ctx.log(
            f"aot {row['model']}: {row['instructions']:,.0f} instructions, flash "
            f"{row['flash_bytes']:,} B, RAM {row['ram_bytes']:,} B"
        )
    if not result.rows:
        raise Skip("no AOT archive in the corpus: " + "; ".join(result.skipped))
    _summarise(result.rows, result.summary)


def _summarise(rows: List[Dict[str, Any]], summary: Dict[str, Any]) -> None:
    by_model = {row["model"]: row for row in rows}
    graph = by_model.get("kws_int8")
    for row in rows:
        if graph is not None and row is not graph:
            row["vs_graph_instructions"] = round(row["instructions"] / graph["instructions"], 4)
    # The graph row's "bare" figure is bench/dispatch.py's straight-line limit, not an AOT call.
    measured = [r for r in rows if r["overhead_percent"] is not None and r["executor"] == "aot"]
    if not measured:
        return
    worst = max(measured, key=lambda r: r["overhead_percent"])
    summary["worst_model"] = worst["model"]
    summary["worst_percent"] = worst["overhead_percent"]
    summary["target_percent"] = TARGET_PERCENT
    target = by_model.get(OVERHEAD_CASE.rsplit("/", 1)[-1])
    if target is not None:
        summary["kws_aot_percent"] = target["overhead_percent"]
        summary["kws_aot_overhead_instructions"] = target["overhead_instructions"]
        summary["kws_aot_instructions"] = target["instructions"]
        summary["target_met"] = all(
            by_model[s.rsplit("/", 1)[-1]]["overhead_percent"] <= TARGET_PERCENT
            for s in KWS_CASES
            if s.startswith("aot/") and s.rsplit("/", 1)[-1] in by_model
        )
    else:
        summary["note"] = f"{OVERHEAD_CASE} not measured (smoke run or corpus): target not checked"


PART = Part(
    "aot",
    "7. AOT archives beside the graph archive; firmware vs a bare tvmgen_<m>_run",
    run,
    columns=[
        "model",
        "executor",
        "instructions",
        "bare_instructions",
        "overhead_instructions",
        "overhead_percent",
        "vs_graph_instructions",
        "flash_bytes",
        "ram_bytes",
        "model_pools_bytes",
        "workspace_bytes",
        "outputs_match",
    ],  # fmt: skip
)
