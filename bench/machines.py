"""Part 14: KWS on each QEMU machine (issue 29), measured in one run.

For every board of :data:`BOARDS` whose cross compiler and QEMU are installed:

- instructions per inference of ``kws_int8`` (graph executor) and ``kws_int8_aot`` (AOT) under
  ``-icount shift=0``, through ``mlf-project run --icount`` on the corpus sample (outputs
  checked against the reference);
- the ``host_driven`` KWS firmware against the bare direct-call program of part 12, both built
  in this run for that machine: flash and RAM, and whether the firmware stays within 3 KB of
  flash and 2 KB of RAM of it.

``--smoke`` measures ``mlp_default`` (graph only) on the last board of :data:`BOARDS` present
(part 12 measures the first already).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from . import bare
from .common import QEMU_BOARD, Context, PartResult, Skip, corpus_dir, have

# The Cortex-M3 reference first; boards of other architectures beside it.
BOARDS = [QEMU_BOARD, "qemu-riscv32"]
GRAPH, AOT, SMOKE = "kws_int8", "kws_int8_aot", "mlp_default"


def _available(name: str) -> bool:
    from project_api.board import load_board

    board = load_board(name)
    return have(board.architecture.compiler, board.qemu_binary or "")


def _instructions(target: Path, board: str, archive: Path, out: Path) -> int:
    """Instructions of one inference of the corpus sample; the outputs must match."""
    from project_api.modelgen import compare_outputs

    argv = [sys.executable, "-m", "project_api", "run", str(target), "--icount", "--json",
            "--input", str(archive.with_suffix(".inputs.npz")), "--output", str(out)]  # fmt: skip
    if target.suffix == ".tar":
        argv += ["--board", board]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{archive.stem} on {board}: {done.stderr.strip()[-500:]}")
    problems = compare_outputs(
        dict(np.load(out)), dict(np.load(archive.with_suffix(".outputs.npz")))
    )
    if problems:
        raise RuntimeError(f"{archive.stem} on {board}: outputs differ: {problems}")
    return int(json.loads(done.stdout)["instructions"])


def run(ctx: Context, result: PartResult) -> None:
    boards = [name for name in BOARDS if _available(name)]
    if not boards:
        raise Skip("needs a cross compiler and QEMU for one of " + ", ".join(BOARDS))
    if ctx.smoke:
        boards = boards[-1:]
    graph = corpus_dir() / f"{SMOKE if ctx.smoke else GRAPH}.tar"
    aot: Optional[Path] = None if ctx.smoke else corpus_dir() / "aot" / f"{AOT}.tar"
    for needed in [graph] + ([aot] if aot is not None else []):
        if not needed.with_suffix(".outputs.npz").is_file():
            raise Skip(f"{needed.name} and its reference outputs are not in the corpus")
    rows: List[Dict[str, Any]] = []
    for board in boards:
        label = f"machines_{board}"
        compared = bare.compare(ctx, graph, board, label)
        project = ctx.work / f"{label}_firmware"
        row: Dict[str, Any] = {
            "board": board,
            "graph_instructions": _instructions(project, board, graph, project / "out.npz"),
            "aot_instructions": None,
            "firmware_flash_bytes": compared["firmware"]["flash_bytes"],
            "firmware_ram_bytes": compared["firmware"]["ram_bytes"],
            "bare_flash_bytes": compared["bare"]["flash_bytes"],
            "bare_ram_bytes": compared["bare"]["ram_bytes"],
            "flash_delta_bytes": compared["flash_delta_bytes"],
            "ram_delta_bytes": compared["ram_delta_bytes"],
        }
        if aot is not None:
            row["aot_instructions"] = _instructions(aot, board, aot, ctx.work / f"{label}.npz")
        row["within_margins"] = (
            row["flash_delta_bytes"] <= bare.FLASH_MARGIN
            and row["ram_delta_bytes"] <= bare.RAM_MARGIN
        )
        rows.append(row)
        ctx.log(
            f"  {board}: {graph.stem} {row['graph_instructions']:,} instructions"
            + (f", {aot.stem} {row['aot_instructions']:,}" if aot is not None else "")
            + f"; firmware - bare +{row['flash_delta_bytes']:,} / +{row['ram_delta_bytes']:,} B"
        )
    first = rows[0]["graph_instructions"]
    for row in rows:
        row["vs_first_graph"] = round(row["graph_instructions"] / first, 4)
    result.rows = rows
    result.summary = {
        "model": graph.stem,
        "boards": [row["board"] for row in rows],
        "target_met": all(row["within_margins"] for row in rows),
    }
