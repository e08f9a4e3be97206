"""Part 22b: KWS compiled from its ``.tflite`` beside TVM 0.14's KWS archive (issue 42).

- ``compile`` of MLPerf Tiny's KWS int8 (``../shared/models/kws_ref_model.tflite``): the
  median of five compiles in the process (read, check, lower, render, tar) and of three
  ``mlf-project compile`` commands (the interpreter's start-up counted); target <= 2 s for
  the command;
- a ``run`` of a ``.tflite`` whose archive is cached: what it costs more than the run of
  that archive is finding the archive (``generate/model_source.archive_source``: a SHA-256
  of the file and a stat), median and worst of 20 against the same call on the archive;
  target <= 50 ms;
- instructions per inference (QEMU ``-icount``, the firmware's SysTick), the linked
  firmware's flash (``text`` + ``data`` of ``arm-none-eabi-size``) and RAM (``.data`` +
  ``.bss``, stack excluded; :mod:`bench.onboard`) and the model's arena, plain C (no
  CMSIS-NN), graph executor: our archive compiled from the ``.tflite`` and TVM 0.14's
  ``kws_int8.tar`` (the corpus), on qemu-mps2-an385 (Cortex-M3), qemu-mps2-an386
  (Cortex-M4F) and qemu-mps3-an547 (Cortex-M55); and the AOT pair (``--executor aot`` and
  ``aot/kws_int8_aot.tar``) on the an385. Each firmware runs its own archive's reference
  input; ours is checked equal to LiteRT's reference kernels where the test extra is
  installed.

``--smoke``: the compile and cache figures, and our graph archive on the an385 only.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import onboard
from .common import REPO_ROOT, Context, Part, PartResult, Skip, Target, corpus_dir, have

KWS_TFLITE = REPO_ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"
AN385, AN386, AN547 = "qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps3-an547"
BOARDS = (AN385, AN386, AN547)
COMPILE_TARGET_S = 2.0
CACHED_TARGET_MS = 50.0


def _median_seconds(action: Any, count: int) -> float:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def compile_figures(ctx: Context) -> Dict[str, Any]:
    from project_api.compile import compile_tflite

    work = ctx.scratch("compile_kws_compile")
    out = work / "kws.tar"
    in_process = _median_seconds(lambda: compile_tflite(KWS_TFLITE, out, force=True), 5)
    argv = [sys.executable, "-m", "project_api", "compile", str(KWS_TFLITE), str(out), "--force"]
    command = _median_seconds(lambda: subprocess.run(argv, check=True, capture_output=True), 3)
    return {"compile_in_process_s": in_process, "compile_command_s": command}


def cached_figures(ctx: Context, archive: Path) -> Dict[str, Any]:
    """Finding the cached archive of the ``.tflite`` against taking the archive as given."""
    import os

    from project_api.generate.model_source import archive_source

    cache = ctx.scratch("compile_kws_cache")
    old = os.environ.get("MLF_PROJECT_CACHE")
    os.environ["MLF_PROJECT_CACHE"] = str(cache)
    try:
        archive_source(KWS_TFLITE)  # the first run compiles into the cache
        tflite, tar = [], []
        for _ in range(20):
            for path, times in ((KWS_TFLITE, tflite), (archive, tar)):
                began = time.perf_counter()
                archive_source(path)
                times.append((time.perf_counter() - began) * 1000)
    finally:
        if old is None:
            os.environ.pop("MLF_PROJECT_CACHE", None)
        else:
            os.environ["MLF_PROJECT_CACHE"] = old
    extra = [a - b for a, b in zip(tflite, tar)]
    return {"cached_extra_ms_median": statistics.median(extra), "cached_extra_ms_worst": max(extra)}


def _litert_reference(x: np.ndarray) -> Optional[np.ndarray]:
    try:
        from ai_edge_litert import interpreter as litert
    except ImportError:
        return None
    interpreter = litert.Interpreter(
        model_path=str(KWS_TFLITE), experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return np.asarray(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))


def _inputs(archive: Path, ours: bool) -> Tuple[Dict[str, np.ndarray], Optional[np.ndarray]]:
    """The run's inputs and the output it must give (LiteRT's for ours, TVM's reference for
    the corpus archive)."""
    if not ours:
        inputs = dict(np.load(archive.with_suffix(".inputs.npz")))
        return inputs, np.load(archive.with_suffix(".outputs.npz"))["output0"]
    from project_api.read import open_archive

    with open_archive(archive) as opened:
        spec = opened.models[0].inputs[0]
    x = np.random.default_rng(0).integers(-128, 128, spec.shape).astype(np.int8)
    return {spec.name: x}, _litert_reference(x)


def measure(ctx: Context, archive: Path, label: str, board: str, ours: bool) -> Dict[str, Any]:
    inputs, want = _inputs(archive, ours)
    row = onboard.measure(
        ctx, archive, board, inputs, onboard.wanted(want), scratch=f"compile_kws_{label}_{board}"
    )
    return {
        "archive": label,
        "board": board,
        "instructions": row["instructions"],
        "flash_text_data_bytes": row["text"] + row["data"],
        "ram_bytes": row["ram_bytes"],
        "arena_bytes": row["arena_bytes"],
        "exact": row["exact"],
    }


def run(ctx: Context, result: PartResult) -> None:
    from project_api.compile import compile_tflite

    if not KWS_TFLITE.is_file():
        raise Skip(f"{KWS_TFLITE} is absent (the shared models live in ../shared/models)")
    figures = compile_figures(ctx)
    work = ctx.scratch("compile_kws_archives")
    ours = {
        "compiled graph": compile_tflite(KWS_TFLITE, work / "kws_graph.tar"),
        "compiled aot": compile_tflite(KWS_TFLITE, work / "kws_aot.tar", executor="aot"),
    }
    figures.update(cached_figures(ctx, ours["compiled graph"]))
    ctx.log(
        f"  compile {figures['compile_in_process_s']:.3f} s in the process, "
        f"{figures['compile_command_s']:.2f} s as a command; cached .tflite "
        f"+{figures['cached_extra_ms_median']:.2f} ms"
    )
    theirs = {
        "TVM 0.14 graph": corpus_dir() / "kws_int8.tar",
        "TVM 0.14 aot": corpus_dir() / "aot" / "kws_int8_aot.tar",
    }
    plan: List[Tuple[str, Path, str, bool]] = [
        ("compiled graph", ours["compiled graph"], AN385, True)
    ]
    if not ctx.smoke:
        plan = [
            (label, path, board, label.startswith("compiled"))
            for board in BOARDS
            for label, path in (
                ("compiled graph", ours["compiled graph"]),
                ("TVM 0.14 graph", theirs["TVM 0.14 graph"]),
            )
        ]
        plan += [
            ("compiled aot", ours["compiled aot"], AN385, True),
            ("TVM 0.14 aot", theirs["TVM 0.14 aot"], AN385, False),
        ]
    rows: List[Dict[str, Any]] = []
    if have("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm"):
        for label, path, board, mine in plan:
            if not path.is_file():
                result.skipped.append(f"{label}: {path} is absent")
                continue
            row = measure(ctx, path, label, board, mine)
            rows.append(row)
            ctx.log(f"  {label} on {board}: {row['instructions']:,} instructions")
    else:
        result.skipped.append("no Arm toolchain or QEMU: the per-board figures")
    result.rows = rows
    wrong = [r for r in rows if r["exact"] is False]
    result.summary = {
        **{k: round(v, 4) for k, v in figures.items()},
        "boards": {f"{r['archive']} {r['board']}": r["instructions"] for r in rows},
        "compile_target_met": figures["compile_command_s"] <= COMPILE_TARGET_S,
        "cached_target_met": figures["cached_extra_ms_worst"] <= CACHED_TARGET_MS,
        "wrong": len(wrong),
    }
    if wrong:
        raise RuntimeError(f"{len(wrong)} runs gave other outputs than their reference")


PART = Part(
    "compile_kws",
    "22b. compile: KWS from its .tflite beside TVM 0.14's archive (plain C, per board)",
    run,
    columns=[
        "archive",
        "board",
        "instructions",
        "flash_text_data_bytes",
        "ram_bytes",
        "arena_bytes",
        "exact",
    ],  # fmt: skip
    targets=[
        Target(
            "compile of KWS (kws_ref_model.tflite) <= 2 s",
            lambda f: (
                f"{f['compile_command_s']:.2f} s as a command "
                f"({f['compile_in_process_s']:.3f} s in the process)"
            ),
            "compile_target_met",
        ),
        Target(
            "run of a cached .tflite <= 50 ms more than its archive's",
            lambda f: (
                f"+{f['cached_extra_ms_median']:.2f} ms median, "
                f"+{f['cached_extra_ms_worst']:.2f} ms worst of 20"
            ),
            "cached_target_met",
        ),
    ],
)
