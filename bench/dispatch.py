"""Benchmark 3: dispatch overhead of the graph executor against the straight-line limit.

On qemu-mps2-an385 (Cortex-M3) under ``-icount shift=0`` (one instruction per virtual ns; one
SysTick tick = 40 instructions), the probe firmware times ``reps`` inferences through
``mlf_executor_run`` and ``reps`` through a generated straight-line sequence of direct calls
of every operator's function with pre-built DLTensor/TVMValue arrays (what an AOT executor
does at best), each in one timed region, on the same inputs, after checking that both
compute the same outputs. ``reps`` makes each region at least 10 ms of device time (250,000
ticks), so one tick of quantisation is below 0.0004 % of it; the quantum is reported.

overhead % = (executor - direct) / direct * 100, per inference, over every factory model and
every archive of the corpus (CMSIS-NN ones only with a CMSIS-NN checkout: bench/common.py).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .common import (
    KWS,
    QEMU_BOARD,
    Context,
    Part,
    PartResult,
    Skip,
    archive_model_names,
    corpus_archives,
    corpus_options,
    factory_archive,
    require_qemu,
)
from .probe import cached_probe

TARGET_PERCENT = 1.0
SMOKE_MODELS = ("chain_add_10",)


Case = Tuple[str, str, Any, Optional[str], Dict[str, Any]]


def _cases(ctx: Context) -> List[Case]:
    """(label, source, archive, model, options) of every model to measure."""
    from project_api.modelgen import catalog

    cases: List[Case] = []
    names = SMOKE_MODELS if ctx.smoke else tuple(catalog())
    for name in names:
        archive = factory_archive(name, ctx.work / "archives")
        models = archive_model_names(archive)
        for model in models:
            label = name if len(models) == 1 else f"{name}/{model}"
            cases.append((label, "factory", archive, model if len(models) > 1 else None, {}))
    if not ctx.smoke:
        for archive in corpus_archives():
            models = archive_model_names(archive)
            for model in models:
                label = archive.stem if len(models) == 1 else f"{archive.stem}/{model}"
                chosen = model if len(models) > 1 else None
                cases.append((label, "corpus", archive, chosen, corpus_options(archive)))
    return cases


def measure(ctx: Context, case: Case) -> Dict[str, Any]:
    label, source, archive, model, options = case
    probe = cached_probe(ctx, archive, board=QEMU_BOARD, model=model, options=options)
    v = probe.values
    if "direct_ticks" not in v:
        raise Skip(f"{label}: no straight-line variant (function names are not C identifiers)")
    executor = probe.per_inference("executor_ticks")
    direct = probe.per_inference("direct_ticks")
    assert executor is not None and direct is not None
    ops = int(v["num_ops"])
    return {
        "model": label,
        "source": source,
        "ops": ops,
        "executor_instructions": round(executor, 1),
        "direct_instructions": round(direct, 1),
        "overhead_instructions": round(executor - direct, 1),
        "overhead_percent": round(100.0 * (executor - direct) / direct, 4) if direct else None,
        "overhead_per_op": round((executor - direct) / ops, 1) if ops else None,
        "reps": int(v["reps"]),
        "quantum_instructions": probe.quantum,
        "outputs_match": bool(v.get("direct_match")),
    }


def run(ctx: Context, result: PartResult) -> None:
    from project_api.errors import MlfProjectError

    require_qemu()
    result.summary["board"] = f"{QEMU_BOARD} (-icount shift=0)"
    errors: List[str] = []
    for case in _cases(ctx):
        label = case[0]
        try:
            row = measure(ctx, case)
        except Skip as why:
            result.skipped.append(str(why))
            continue
        except (RuntimeError, MlfProjectError) as err:
            errors.append(f"{label}: {err}")
            ctx.log(f"dispatch {label}: FAILED {err}")
            continue
        if not row["outputs_match"]:
            raise RuntimeError(f"{label}: the straight-line calls computed other outputs")
        result.rows.append(row)
        ctx.log(
            f"dispatch {label}: {row['executor_instructions']:.0f} vs "
            f"{row['direct_instructions']:.0f} instructions ({row['overhead_percent']:.3f} %)"
        )
    if errors:
        result.status = "failed"
        result.reason = "; ".join(errors)
    if not result.rows:
        if errors:
            return
        raise Skip("no model could be measured")
    worst = max(result.rows, key=lambda r: r["overhead_percent"] or 0.0)
    result.summary.update(
        {
            "models": len(result.rows),
            "worst_model": worst["model"],
            "worst_percent": worst["overhead_percent"],
            "median_per_op_instructions": sorted(r["overhead_per_op"] for r in result.rows)[
                len(result.rows) // 2
            ],
            "target_percent": TARGET_PERCENT,
        }
    )
    kws = [r for r in result.rows if r["model"] == KWS]
    if kws:
        result.summary["kws_percent"] = kws[0]["overhead_percent"]
        result.summary["kws_executor_instructions"] = kws[0]["executor_instructions"]
        result.summary["target_met"] = kws[0]["overhead_percent"] <= TARGET_PERCENT
    else:
        result.summary["kws_percent"] = None
        result.summary["note"] = f"{KWS} not in the corpus here (or smoke run): target not checked"


PART = Part(
    "dispatch",
    "3. dispatch overhead vs straight-line calls (QEMU -icount)",
    run,
    columns=[
        "model",
        "source",
        "ops",
        "executor_instructions",
        "direct_instructions",
        "overhead_instructions",
        "overhead_percent",
        "overhead_per_op",
        "reps",
    ],  # fmt: skip
)
