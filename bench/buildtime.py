"""Benchmark 4: generate + build time on the host, and its growth with the params size.

Factory models ``params_sized(n)`` (an MLP whose params total about n bytes) for n = 1 KiB,
16 KiB, 256 KiB, 1 MiB and 4 MiB: ``Project.generate`` then ``Project.build`` into fresh
directories (CMake configure included), best of two, in wall-clock seconds and in CPU
seconds (this process and every tool it ran: robust to other load on the machine); a
least-squares line through seconds against params MiB gives the slope (the params blob is
assembled with ``.incbin``, so the cost per byte should be a copy). And the MLPerf Tiny KWS
archive of the corpus, best and median of three (not in smoke runs). Wall-clock figures:
reported, never asserted.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List

from .common import (
    KWS,
    Context,
    Part,
    PartResult,
    corpus_dir,
    fit_line,
    generate,
    host_compiler_available,
    stopwatch,
)

SIZES = (1024, 16 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024)
SMOKE_SIZES = (1024, 16 * 1024)
TARGET_KWS_SECONDS = 5.0


def _params_archive(ctx: Context, nbytes: int) -> Path:
    from project_api.modelgen import params_sized

    path = ctx.work / "archives" / f"params_{nbytes}.tar"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        params_sized(nbytes).write(path)
    return path


def cpu_seconds() -> float:
    """CPU time of this process and of every child it has waited for (the compiler, the
    assembler, CMake, ninja...): unlike wall-clock time, barely moved by other load."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def time_generate_build(ctx: Context, archive: Path, label: str) -> Dict[str, float]:
    """Seconds (wall clock and CPU) to generate and to build a fresh host project."""
    directory = ctx.work / "buildtime" / label
    if directory.exists():
        shutil.rmtree(directory)
    cpu_began = cpu_seconds()
    elapsed = stopwatch()
    project = generate(archive, directory, board="host")
    generated = elapsed()
    project.build()
    total = elapsed()
    cpu = cpu_seconds() - cpu_began
    params_bytes = sum(int(m["sizes"]["params_blob_bytes"]) for m in project.models)
    return {"generate": generated, "build": total - generated, "total": total, "cpu": cpu,
            "params_blob_bytes": params_bytes}  # fmt: skip


def run(ctx: Context, result: PartResult) -> None:
    if not host_compiler_available():
        from .common import Skip

        raise Skip("needs a host C compiler (cc/gcc/clang)")
    sizes = SMOKE_SIZES if ctx.smoke else SIZES
    repeats = 1 if ctx.smoke else 2
    points: List[Dict[str, Any]] = []
    if not ctx.smoke:
        # Untimed: the first build of a run also warms the compiler's and CMake's caches.
        time_generate_build(ctx, _params_archive(ctx, sizes[0]), "warm_up")
    for nbytes in sizes:
        archive = _params_archive(ctx, nbytes)
        runs = [time_generate_build(ctx, archive, f"params_{nbytes}") for _ in range(repeats)]
        best = min(runs, key=lambda r: r["total"])
        row = {
            "model": f"params_{nbytes}",
            "params_bytes": best["params_blob_bytes"],
            "generate_seconds": round(best["generate"], 3),
            "build_seconds": round(best["build"], 3),
            "total_seconds": round(best["total"], 3),
            "cpu_seconds": round(min(r["cpu"] for r in runs), 3),
        }
        points.append(row)
        result.rows.append(row)
        ctx.log(f"build time params_{nbytes}: {row['total_seconds']:.2f} s")
    mib = [p["params_bytes"] / (1024 * 1024) for p in points]
    line = fit_line(mib, [p["total_seconds"] for p in points])
    generate_line = fit_line(mib, [p["generate_seconds"] for p in points])
    cpu_line = fit_line(mib, [p["cpu_seconds"] for p in points])
    for point in points:
        predicted = line["intercept"] + line["slope"] * point["params_bytes"] / (1024 * 1024)
        point["fit_residual_seconds"] = round(point["total_seconds"] - predicted, 3)
    result.summary.update(
        {
            "slope_seconds_per_mib": round(line["slope"], 4),
            "intercept_seconds": round(line["intercept"], 3),
            "r2": round(line["r2"], 4),
            "generate_slope_seconds_per_mib": round(generate_line["slope"], 4),
            "cpu_slope_seconds_per_mib": round(cpu_line["slope"], 4),
            "cpu_intercept_seconds": round(cpu_line["intercept"], 3),
            "cpu_r2": round(cpu_line["r2"], 4),
            "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        }
    )
    kws = corpus_dir() / f"{KWS}.tar"
    if ctx.smoke:
        result.skipped.append(f"{KWS}: not in a smoke run")
    elif kws.is_file():
        runs = [time_generate_build(ctx, kws, KWS) for _ in range(3)]
        totals = sorted(r["total"] for r in runs)
        median = statistics.median(totals)
        kws_row: Dict[str, Any] = {
            "model": KWS,
            "params_bytes": int(runs[0]["params_blob_bytes"]),
            "generate_seconds": round(min(r["generate"] for r in runs), 3),
            "build_seconds": round(min(r["build"] for r in runs), 3),
            "total_seconds": round(totals[0], 3),
            "median_total_seconds": round(median, 3),
            "cpu_seconds": round(min(r["cpu"] for r in runs), 3),
        }
        result.rows.append(kws_row)
        result.summary["kws_seconds"] = kws_row["total_seconds"]
        result.summary["kws_median_seconds"] = kws_row["median_total_seconds"]
        result.summary["target_kws_seconds"] = TARGET_KWS_SECONDS
        result.summary["target_met"] = median <= TARGET_KWS_SECONDS
        ctx.log(f"build time {KWS}: {kws_row['total_seconds']:.2f} s")
    else:
        result.skipped.append(f"{KWS}: no corpus at {corpus_dir()}")


PART = Part(
    "buildtime",
    "4. generate + build time on the host",
    run,
    columns=[
        "model",
        "params_bytes",
        "generate_seconds",
        "build_seconds",
        "total_seconds",
        "cpu_seconds",
        "fit_residual_seconds",
    ],  # fmt: skip
    alone=True,
)
