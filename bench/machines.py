"""Part 15: the machines of issue 29 (qemu-mps3-an547, qemu-netduinoplus2, qemu-riscv32) beside
the MPS2 ones.

In one run, for the corpus KWS archives:

- instructions per inference (QEMU ``-icount shift=0``, the firmware's own tick counter times
  the board's instructions per tick: ±40 on the 25 MHz MPS2 boards, ±31 on the an547's 32 MHz
  SysTick, exact on the netduinoplus2's TIM2 and riscv32's ``mcycle``) of ``kws_int8`` (graph),
  ``kws_int8_aot`` and ``kws_int8_aot_usmp`` on an385 (M3), an386 (M4F), an547 (M55),
  netduinoplus2 (F405) and riscv32 (rv32imac), each where its compiler and QEMU are installed;
  every output compared with the archive's reference;
- the CMSIS-NN archives on an386 (CMSIS-NN's DSP kernels) and an547 (its MVE kernels): the
  ratio MVE / DSP, target at most 0.5 (needs a CMSIS-NN checkout, bench/common.py);
- the ``host_driven`` firmware against the bare direct-call program of part 12, built in the
  same run for each of an385, an547, netduinoplus2 and riscv32 (:func:`bench.bare.measure`): target
  within 3 KB of flash and 2 KB of RAM on each new machine.

``--smoke``: ``mlp_default``'s instructions on an547 and netduinoplus2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import bare
from .common import (
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    cmsis_nn_path,
    corpus_dir,
    generate,
    have,
    require_qemu,
)

AN385, AN386 = "qemu-mps2-an385", "qemu-mps2-an386"
AN547, NETDUINO, RISCV32 = "qemu-mps3-an547", "qemu-netduinoplus2", "qemu-riscv32"
KWS_BOARDS = (AN385, AN386, AN547, NETDUINO, RISCV32)
KWS_CASES = ("kws_int8", "aot/kws_int8_aot", "aot/kws_int8_aot_usmp")
CMSIS_CASES = ("kws_int8_cmsisnn", "aot/kws_int8_aot_cmsisnn_usmp")
BARE_BOARDS = (AN385, AN547, NETDUINO, RISCV32)
NEW_BOARDS = (AN547, NETDUINO, RISCV32)
SMOKE_CASE = "mlp_default"
MVE_TARGET = 0.5


def _installed(boards: Tuple[str, ...], skipped: List[str]) -> List[str]:
    """The boards whose cross compiler and QEMU are installed; the others noted in
    ``skipped``."""
    from project_api.board import load_board

    found = []
    for name in boards:
        board = load_board(name)
        if have(board.architecture.compiler, board.qemu_binary or ""):
            found.append(name)
        else:
            skipped.append(f"{name}: needs {board.architecture.compiler} and {board.qemu_binary}")
    return found


def _archive(stem: str) -> Optional[Path]:
    path = corpus_dir() / f"{stem}.tar"
    return path if path.is_file() and path.with_suffix(".outputs.npz").is_file() else None


def instructions(ctx: Context, archive: Path, board: str, options: Dict[str, Any]) -> int:
    """Builds ``archive`` for ``board`` as ``mlf-project run`` does, infers once on its
    reference inputs under -icount and returns the instructions of that inference; raises
    when the outputs differ from the reference."""
    return measured(ctx, archive, board, options, f"machines_{archive.stem}_{board}")[0]


def measured(
    ctx: Context, archive: Path, board: str, options: Dict[str, Any], scratch: str
) -> Tuple[int, Any]:
    """:func:`instructions`, built in ``ctx.scratch(scratch)``; also returns the project."""
    from project_api.modelgen import compare_outputs

    project = generate(
        archive,
        ctx.scratch(scratch),
        board=board,
        options={**options, "qemu_icount": True},
    )
    project.build()
    inputs = dict(np.load(archive.with_suffix(".inputs.npz")))
    expected = dict(np.load(archive.with_suffix(".outputs.npz")))
    with project.session(timeout=30, run_timeout=300) as session:
        outputs = session.run(inputs)
        stats = session.last_stats
    problems = compare_outputs(outputs, expected, rtol=1e-5)
    if problems:
        raise RuntimeError(f"{archive.stem} on {board} differs from its reference: {problems}")
    assert stats is not None and stats.ticks is not None
    return int(round(stats.ticks * project.board.instructions_per_tick())), project


def _kws_rows(ctx: Context, cases: List[str], boards: List[str]) -> List[Dict[str, Any]]:
    rows = []
    for stem in cases:
        archive = _archive(stem)
        if archive is None:
            raise Skip(f"{stem}.tar and its reference are not in the corpus")
        row: Dict[str, Any] = {"archive": archive.stem}
        for board in boards:
            row[board] = instructions(ctx, archive, board, {})
            ctx.log(f"  {archive.stem} on {board}: {row[board]:,} instructions")
        rows.append(row)
    return rows


def _cmsis_rows(ctx: Context, skipped: List[str]) -> List[Dict[str, Any]]:
    cmsis = cmsis_nn_path()
    if cmsis is None:
        skipped.append("CMSIS-NN rows: no CMSIS-NN checkout ($MLF_PROJECT_CMSIS_NN)")
        return []
    rows = []
    for stem in CMSIS_CASES:
        archive = _archive(stem)
        if archive is None:
            skipped.append(f"{stem}: not in the corpus")
            continue
        dsp = instructions(ctx, archive, AN386, {"cmsis_path": str(cmsis)})
        mve = instructions(ctx, archive, AN547, {"cmsis_path": str(cmsis)})
        rows.append({"archive": archive.stem, AN386: dsp, AN547: mve, "mve_over_dsp": mve / dsp})
        ctx.log(f"  {archive.stem}: DSP {dsp:,}, MVE {mve:,} instructions ({mve / dsp:.3f})")
    return rows


def _bare_rows(ctx: Context, stem: str, boards: List[str]) -> List[Dict[str, Any]]:
    archive = _archive(stem)
    if archive is None:
        raise Skip(f"{stem}.tar and its reference are not in the corpus")
    rows = []
    for board in boards:
        m = bare.measure(ctx, archive, board)
        rows.append({"archive": archive.stem, **m})
        ctx.log(
            f"  {archive.stem} on {board}: firmware − bare {m['flash_delta_bytes']:+,} B flash, "
            f"{m['ram_delta_bytes']:+,} B RAM"
        )
    return rows


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    if ctx.smoke:
        kws = _kws_rows(ctx, [SMOKE_CASE], _installed(NEW_BOARDS, result.skipped))
        cmsis: List[Dict[str, Any]] = []
        # The bare program compares float outputs byte for byte, which hard-float builds
        # of mlp_default miss by an ulp: part 12's smoke runs bare.measure on an385.
        bares: List[Dict[str, Any]] = []
    else:
        kws = _kws_rows(ctx, list(KWS_CASES), _installed(KWS_BOARDS, result.skipped))
        cmsis = _cmsis_rows(ctx, result.skipped)
        bares = _bare_rows(ctx, bare.CASE, _installed(BARE_BOARDS, []))
    result.rows = (
        [{"figure": "instructions", **row} for row in kws]
        + [{"figure": "cmsis-nn instructions", **row} for row in cmsis]
        + [{"figure": "firmware vs bare", **row} for row in bares]
    )
    new_bares = [r for r in bares if r["board"] in NEW_BOARDS]
    worst_ratio = max((r["mve_over_dsp"] for r in cmsis), default=None)
    result.summary = {
        "instructions": {r["archive"]: {b: r[b] for b in r if b != "archive"} for r in kws},
        "mve_over_dsp": {r["archive"]: round(r["mve_over_dsp"], 4) for r in cmsis},
        "mve_target_met": None if worst_ratio is None else worst_ratio <= MVE_TARGET,
        "bare": {r["board"]: {k: v for k, v in r.items() if k != "board"} for r in bares},
        "bare_target_met": None
        if not new_bares
        else all(
            r["flash_delta_bytes"] <= bare.FLASH_MARGIN and r["ram_delta_bytes"] <= bare.RAM_MARGIN
            for r in new_bares
        ),
    }


PART = Part(
    "machines",
    "15. KWS on every QEMU machine: instructions, CMSIS-NN MVE vs DSP, firmware vs bare",
    run,
    columns=[
        "figure",
        "archive",
        "qemu-mps2-an385",
        "qemu-mps2-an386",
        "qemu-mps3-an547",
        "qemu-netduinoplus2",
        "qemu-riscv32",
        "mve_over_dsp",
        "board",
        "firmware_flash_bytes",
        "firmware_ram_bytes",
        "bare_flash_bytes",
        "bare_ram_bytes",
        "flash_delta_bytes",
        "ram_delta_bytes",
    ],  # fmt: skip
    targets=[
        Target(
            "KWS with CMSIS-NN: MVE kernels (an547) <= half the DSP kernels' instructions (an386)",
            lambda m: (
                ", ".join(f"{k}: MVE/DSP {v:.3f}" for k, v in m["mve_over_dsp"].items())
                or "no CMSIS-NN archive measured"
            ),
            "mve_target_met",
        ),
        Target(
            "KWS firmware within 3 KB flash / 2 KB RAM of a bare program on every new QEMU machine",
            lambda m: "; ".join(
                f"{board}: +{b['flash_delta_bytes']:,} / +{b['ram_delta_bytes']:,} B"
                for board, b in m["bare"].items()
            ),
            "bare_target_met",
        ),
    ],
)
