"""Benchmark 6: parameters bound in place (params RAM = 0) against copied into the arena.

The probe firmware asks the runtime for the arena it needs with the firmware's params blob
bound in place (``mlf_executor_arena_bytes(g, params, ...)``: the generator writes every
tensor 64-byte aligned, so every qualifying param is used where it lies in flash) and
without (every param copied: ``mlf_executor_arena_bytes(g, NULL, ...)``), then exercises the
copy path for real — a second executor, ``mlf_executor_load_params()`` into its arena, one
inference — and checks it computes the same outputs as the in-place one.

params RAM = arena − the arena of the graph's other storage (computed by the generator's
planner with every param pool left out): 0 when every param is bound in place.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .common import (
    KWS,
    Context,
    Part,
    PartResult,
    Skip,
    corpus_dir,
    corpus_options,
    device_board,
    factory_archive,
)
from .probe import cached_probe

SMOKE_MODEL = "mlp"


def _cases(ctx: Context) -> List[Tuple[str, Any, Dict[str, Any]]]:
    cases: List[Tuple[str, Any, Dict[str, Any]]] = [
        (SMOKE_MODEL, factory_archive(SMOKE_MODEL, ctx.work / "archives"), {})
    ]
    if not ctx.smoke:
        kws = corpus_dir() / f"{KWS}.tar"
        if kws.is_file():
            cases.append((KWS, kws, corpus_options(kws)))
        cases.append(("cnn_int8", factory_archive("cnn_int8", ctx.work / "archives"), {}))
    return cases


def run(ctx: Context, result: PartResult) -> None:
    board = device_board()
    result.summary["board"] = board
    for label, archive, options in _cases(ctx):
        probe = cached_probe(ctx, archive, board=board, options=options)
        v = probe.values
        context = probe.project.probe_context
        if not context["copy_path"]:
            result.skipped.append(f"{label}: no params, or functions outside the registry")
            continue
        without = int(context["arena_without_params"])
        in_place = int(v["arena_in_place_bytes"])
        copied = int(v["arena_copied_bytes"])
        row = {
            "model": label,
            "params_blob_bytes": int(v["params_blob_bytes"]),
            "arena_in_place_bytes": in_place,
            "arena_copied_bytes": copied,
            "params_ram_in_place": in_place - without,
            "params_ram_copied": copied - without,
            "copy_path_matches": bool(v.get("copy_match")),
        }
        if not row["copy_path_matches"]:
            raise RuntimeError(f"{label}: the params copy path computed other outputs")
        result.rows.append(row)
        ctx.log(
            f"params {label}: RAM {row['params_ram_in_place']} B in place, "
            f"{row['params_ram_copied']} B copied"
        )
    if not result.rows:
        raise Skip("no model with params could be measured")
    main = next((r for r in result.rows if r["model"] == KWS), result.rows[0])
    result.summary.update(
        {
            "model": main["model"],
            "params_ram_in_place": main["params_ram_in_place"],
            "params_ram_copied": main["params_ram_copied"],
            "target_met": all(r["params_ram_in_place"] == 0 for r in result.rows),
        }
    )


PART = Part(
    "params",
    "6. params bound in place vs copied",
    run,
    columns=[
        "model",
        "params_blob_bytes",
        "arena_in_place_bytes",
        "arena_copied_bytes",
        "params_ram_in_place",
        "params_ram_copied",
        "copy_path_matches",
    ],  # fmt: skip
)
