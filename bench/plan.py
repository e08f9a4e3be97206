"""Part 20: the liveness plan (tensors and operator workspace windows in one arena) against
TVM's plan (storage ids side by side plus the largest operator's workspace), in one run.

- every corpus archive (graph and AOT): the arena the generator plans, the liveness lower
  bound (the most bytes live during one operator call; also at the runtime's 64-byte grid)
  and TVM's plan — target: within 3 % of the bound;
- KWS (``kws_int8``) ``host_driven`` firmware on qemu-mps2-an385, built with the plan and with
  ``memory_plan=tvm`` (the layout before it): linked flash and RAM (``size``) and instructions
  per inference (QEMU ``-icount``, outputs checked against the reference) — targets: RAM
  <= 96,000 B, instructions within +0.01 % of TVM's plan's;
- KWS on nucleo-f401re (96 KiB of RAM): generated and built with the plan; refused with TVM's;
- two models of similar size in one firmware (``cnn_pair``, ``--model '*'``) on an385, run
  alternately (each model's outputs equal what it gave alone) — target: linked RAM <= the
  larger model's firmware alone + 1 KB (the arena is the larger model's).

``--smoke``: the smallest corpus archive (``mlp_default``) for the KWS rows, the pair as in
the full run, no nucleo-f401re build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .common import (
    QEMU_BOARD,
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    corpus_dir,
    factory_archive,
    generate,
    require_qemu,
    size_berkeley,
)
from .machines import measured

CASE, SMOKE_CASE = "kws_int8", "mlp_default"
SMALL_BOARD = "nucleo-f401re"
BOUND_MARGIN = 0.03  # the planned arena within 3 % of the liveness lower bound
RAM_TARGET = 96_000  # KWS host_driven firmware on qemu-mps2-an385, linked
PAIR_MARGIN = 1024  # two models in one firmware: RAM <= the larger alone + 1 KB
INSTRUCTION_MARGIN = 0.0001  # +0.01 %


def plan_rows() -> List[Dict[str, Any]]:
    """The three plans of every model of every corpus archive (nothing built)."""
    from project_api.board import load_board
    from project_api.generate.memory_plan import Block, lower_bound
    from project_api.generate.plan import plan_models
    from project_api.modelgen.corpus import corpus_archives
    from project_api.read import open_archive

    board = load_board(QEMU_BOARD)
    archives = corpus_archives(corpus_dir()) + corpus_archives(corpus_dir() / "aot")
    if not archives:
        raise Skip(f"no corpus archives in {corpus_dir()}")
    rows = []
    for archive in archives:
        with open_archive(archive) as opened:
            for plan in plan_models(opened, "*", board):
                memory = plan.memory
                assert memory is not None
                grid = [
                    Block(b.what, -(-b.size // 64) * 64, b.first, b.last) for b, _ in memory.blocks
                ]
                rows.append(
                    {
                        "archive": archive.stem,
                        "model": plan.name,
                        "executor": plan.kind.name,
                        "tvm_plan_bytes": plan.tvm_plan_bytes,
                        "planned_bytes": memory.arena_bytes,
                        "lower_bound_bytes": memory.lower_bound,
                        "grid_bound_bytes": lower_bound(grid),
                        "over_bound_percent": round(100 * memory.over_bound, 3),
                        "saved_percent": round(
                            100 * (1 - memory.arena_bytes / plan.tvm_plan_bytes), 1
                        )
                        if plan.tvm_plan_bytes
                        else 0.0,
                    }
                )
    return rows


def _within_bound(row: Dict[str, Any]) -> bool:
    planned = row["planned_bytes"]
    return planned <= (1 + BOUND_MARGIN) * row["lower_bound_bytes"] or (
        planned <= row["grid_bound_bytes"]
    )


def _linked(project: Any) -> Dict[str, int]:
    sizes = size_berkeley(Path(project.firmware))
    return {"flash_bytes": sizes["text"] + sizes["data"], "ram_bytes": sizes["data"] + sizes["bss"]}


def firmware_rows(ctx: Context, archive: Path) -> List[Dict[str, Any]]:
    """KWS (or the smoke case) on an385 with the liveness plan and with TVM's."""
    rows = []
    for plan in ("liveness", "tvm"):
        options = {"memory_plan": plan}
        count, project = measured(ctx, archive, QEMU_BOARD, options, f"plan_{plan}")
        rows.append(
            {
                "figure": f"{archive.stem} firmware, {plan} plan",
                "board": QEMU_BOARD,
                **_linked(project),
                "arena_bytes": int(project.models[0]["sizes"]["arena_bytes"]),
                "instructions": count,
            }
        )
        ctx.log(f"  {archive.stem} {plan}: {rows[-1]}")
    return rows


def small_board_row(ctx: Context, archive: Path) -> Dict[str, Any]:
    """KWS on nucleo-f401re: fits and builds with the plan; TVM's plan is refused."""
    from project_api.errors import FitError

    refused = ""
    try:
        generate(archive, ctx.scratch("plan_f401_tvm"), board=SMALL_BOARD,
                 options={"memory_plan": "tvm"})  # fmt: skip
    except FitError as err:
        refused = str(err).split(": ", 1)[-1]
    project = generate(archive, ctx.scratch("plan_f401"), board=SMALL_BOARD)
    project.build()
    row = {"figure": f"{archive.stem} on {SMALL_BOARD}", "board": SMALL_BOARD, **_linked(project)}
    row["available_ram_bytes"] = int(project.board.ram.length)
    row["tvm_plan_refused"] = refused or None
    return row


def pair_rows(ctx: Context) -> List[Dict[str, Any]]:
    """cnn_pair: both models in one an385 firmware against the larger one alone; run
    alternately, each model's outputs are what it gave before the other ran."""
    from project_api.modelgen import catalog

    archive = factory_archive("cnn_pair", ctx.work / "plan_factory")
    pair = catalog()["cnn_pair"]()
    models = {pair.name: pair, pair.companions[0].name: pair.companions[0]}
    both = generate(archive, ctx.scratch("plan_pair"), board=QEMU_BOARD, model="*")
    both.build()
    arenas = {m["name"]: int(m["sizes"]["arena_bytes"]) for m in both.models}
    larger = max(arenas, key=lambda name: arenas[name])
    alone = generate(archive, ctx.scratch("plan_pair_alone"), board=QEMU_BOARD, model=larger)
    alone.build()
    first: Dict[str, Dict[str, np.ndarray]] = {}
    with both.session(timeout=30, run_timeout=120) as session:
        for _ in range(2):
            for name, model in models.items():
                outputs = session.run(model.sample_inputs(), model=name)
                seen = first.setdefault(name, outputs)
                if any(not np.array_equal(outputs[k], seen[k]) for k in seen):
                    raise RuntimeError(f"{name} gave other outputs after the other model ran")
    return [
        {"figure": "cnn_pair, both models (one arena)", "board": QEMU_BOARD, **_linked(both),
         "arena_bytes": int(both.info["shared_arena_bytes"])},
        {"figure": f"cnn_pair, {larger} alone", "board": QEMU_BOARD, **_linked(alone),
         "arena_bytes": arenas[larger]},
    ]  # fmt: skip


def _pick(rows: List[Dict[str, Any]], start: str) -> Optional[Dict[str, Any]]:
    return next((r for r in rows if str(r.get("figure", "")).startswith(start)), None)


def run(ctx: Context, result: PartResult) -> None:
    plans = plan_rows()
    require_qemu()
    stem = SMOKE_CASE if ctx.smoke else CASE
    archive = corpus_dir() / f"{stem}.tar"
    if not archive.with_suffix(".outputs.npz").is_file():
        raise Skip(f"{archive.name} and its reference outputs are not in the corpus")
    firmware = firmware_rows(ctx, archive)
    rows = plans + firmware
    if not ctx.smoke:
        rows.append(small_board_row(ctx, archive))
    rows += pair_rows(ctx)
    result.rows = rows
    ours, tvm = firmware
    both, alone = rows[-2], rows[-1]
    worst = max(plans, key=lambda r: r["over_bound_percent"])
    grid_worst = max(plans, key=lambda r: r["planned_bytes"] / r["grid_bound_bytes"])
    small = _pick(rows, f"{stem} on {SMALL_BOARD}")
    s: Dict[str, Any] = {
        "model": stem,
        "archives": len({r["archive"] for r in plans}),
        "models": len(plans),
        "worst_archive": worst["archive"],
        "worst_over_bound_percent": worst["over_bound_percent"],
        "within_margin": sum(
            1 for r in plans if r["planned_bytes"] <= (1 + BOUND_MARGIN) * r["lower_bound_bytes"]
        ),
        "worst_over_grid_percent": round(
            100 * (grid_worst["planned_bytes"] / grid_worst["grid_bound_bytes"] - 1), 3
        ),
        "bound_target_met": all(_within_bound(r) for r in plans),
        "ram_bytes": ours["ram_bytes"],
        "tvm_ram_bytes": tvm["ram_bytes"],
        "flash_bytes": ours["flash_bytes"],
        "tvm_flash_bytes": tvm["flash_bytes"],
        "instructions": ours["instructions"],
        "tvm_instructions": tvm["instructions"],
        "instructions_percent": round(100 * (ours["instructions"] / tvm["instructions"] - 1), 5),
        "ram_target_met": ours["ram_bytes"] <= RAM_TARGET if not ctx.smoke else None,
        "instructions_target_met": ours["instructions"]
        <= (1 + INSTRUCTION_MARGIN) * tvm["instructions"],
        "pair_ram_bytes": both["ram_bytes"],
        "pair_alone_ram_bytes": alone["ram_bytes"],
        "pair_target_met": both["ram_bytes"] <= alone["ram_bytes"] + PAIR_MARGIN,
        "small_board": None
        if small is None
        else {k: small[k] for k in ("ram_bytes", "available_ram_bytes", "tvm_plan_refused")},
        "small_board_target_met": None
        if small is None
        else small["ram_bytes"] <= small["available_ram_bytes"],
    }
    result.summary = s
    ctx.log(
        f"  plans: worst {s['worst_archive']} +{s['worst_over_bound_percent']} % over the bound;"
        f" {stem} RAM {s['ram_bytes']:,} B (TVM's plan {s['tvm_ram_bytes']:,} B), "
        f"instructions {s['instructions_percent']:+} %; pair {s['pair_ram_bytes']:,} B vs "
        f"{s['pair_alone_ram_bytes']:,} B alone"
    )


PART = Part(
    "plan",
    "21. the liveness plan vs TVM's: arena per corpus archive, KWS RAM and instructions",
    run,
    columns=[
        "archive",
        "model",
        "executor",
        "tvm_plan_bytes",
        "planned_bytes",
        "lower_bound_bytes",
        "grid_bound_bytes",
        "over_bound_percent",
        "saved_percent",
        "figure",
        "board",
        "flash_bytes",
        "ram_bytes",
        "arena_bytes",
        "instructions",
        "available_ram_bytes",
    ],  # fmt: skip
    targets=[
        Target(
            "every corpus archive's arena within 3 % of the liveness lower bound",
            lambda p: (
                f"{p['within_margin']} of {p['models']} models within 3 %, worst "
                f"{p['worst_archive']} +{p['worst_over_bound_percent']} %; at the runtime's "
                f"64-byte grid (every tensor in whole 64-byte slots) worst "
                f"+{p['worst_over_grid_percent']} %"
            ),
            "bound_target_met",
        ),
        Target(
            "KWS host_driven firmware on qemu-mps2-an385: linked RAM <= 96,000 B",
            lambda p: (
                f"{p['model']}: {p['ram_bytes']:,} B (TVM's plan {p['tvm_ram_bytes']:,} B); flash "
                f"{p['flash_bytes']:,} B (TVM's plan {p['tvm_flash_bytes']:,} B)"
            ),
            "ram_target_met",
        ),
        Target(
            "KWS fits and builds on nucleo-f401re (96 KiB RAM)",
            lambda p: (
                "not built (smoke)"
                if p["small_board"] is None
                else (
                    f"{p['small_board']['ram_bytes']:,} of "
                    f"{p['small_board']['available_ram_bytes']:,} B; TVM's plan refused: "
                    f"{p['small_board']['tvm_plan_refused'] or 'no'}"
                )
            ),
            "small_board_target_met",
        ),
        Target(
            "two similar models in one firmware: RAM <= the larger alone + 1 KB",
            lambda p: f"{p['pair_ram_bytes']:,} B vs {p['pair_alone_ram_bytes']:,} B alone",
            "pair_target_met",
        ),
        Target(
            "instructions per KWS inference within +0.01 % of TVM's plan's",
            lambda p: (
                f"{p['instructions']:,} vs {p['tvm_instructions']:,} "
                f"({p['instructions_percent']:+.4f} %)"
            ),
            "instructions_target_met",
        ),
    ],
)
