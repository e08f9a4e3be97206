"""Part 11: ``matrix`` over the shared corpus on three QEMU boards, ``--jobs 2`` against
``--jobs 1`` in the same run: the wall-clock ratio, and whether both give the same table
(every cell's status and exact ``-icount`` instruction count). ``--smoke``: two archives.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List

from bench.common import Context, Part, PartResult, Skip, Target, corpus_archives, have

BOARDS = ("qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps2-an500")


def _table(cells: List[Any]) -> List[tuple]:
    return [(c.archive, c.target, c.status, c.instructions) for c in cells]


def run(ctx: Context, result: PartResult) -> None:
    from project_api.report.matrix import MatrixOptions, Target, run_matrix

    if not have("qemu-system-arm", "arm-none-eabi-gcc"):
        raise Skip("needs qemu-system-arm and arm-none-eabi-gcc")
    archives = [a for a in corpus_archives() if "_cmsisnn" not in a.stem]
    if not archives:
        raise Skip("no corpus archives")
    if ctx.smoke:
        archives = sorted(archives, key=lambda a: a.stat().st_size)[:2]
    targets = [Target(board) for board in BOARDS]
    tables: Dict[int, List[tuple]] = {}
    for jobs in (1, 2):
        settings = MatrixOptions(work=ctx.scratch(f"matrix{jobs}"), jobs=jobs, icount=True)
        start = time.perf_counter()
        cells = run_matrix(archives, targets, settings)
        seconds = time.perf_counter() - start
        tables[jobs] = _table(cells)
        passed = sum(c.status == "pass" for c in cells)
        ctx.log(f"  --jobs {jobs}: {len(cells)} cells, {passed} pass, {seconds:.1f} s")
        result.rows.append(
            {"jobs": jobs, "cells": len(cells), "passed": passed, "seconds": round(seconds, 1)}
        )
    one, two = result.rows[0]["seconds"], result.rows[1]["seconds"]
    result.summary = {
        "archives": len(archives),
        "boards": len(BOARDS),
        "jobs1_seconds": one,
        "jobs2_seconds": two,
        "speedup": round(one / two, 2) if two else None,
        "same_table": tables[1] == tables[2],
        "differences": [f"{a} vs {b}" for a, b in zip(tables[1], tables[2]) if a != b][:5],
        "target_met": bool(two < one and tables[1] == tables[2]),
    }


PART = Part(
    "matrix",
    "11. matrix over the corpus on three QEMU boards: --jobs 2 vs --jobs 1",
    run,
    columns=["jobs", "cells", "passed", "seconds"],
    targets=[
        Target(
            "matrix --jobs 2 faster than --jobs 1, same table",
            lambda m: (
                f"{m['archives']} archives x {m['boards']} boards: {m['jobs1_seconds']} s vs "
                f"{m['jobs2_seconds']} s (x{m['speedup']}), same table: {m['same_table']}"
            ),
            "target_met",
        ),
    ],
)
