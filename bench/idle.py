"""Part 14: host CPU of an idle attached QEMU firmware, sleeping against polling (issue 29).

For ``kws_int8`` of the corpus on every QEMU board (``mlp_default`` where KWS does not fit,
the lm3s6965evb's 64 KiB; ``--smoke``: ``mlp_default`` on qemu-mps2-an385 only): the
``host_driven`` firmware is built twice in the same run, as shipped (the console wait sleeps
in WFI on the UART's receive interrupt) and with ``MLF_CONSOLE_POLL=1`` (the wait spins on
the UART status, as every firmware did before); the sleeping one runs a second time under
``-icount`` as ``attach --icount`` starts it. Each is started the way ``attach`` and
``run`` start it, connected (HELLO answered: the firmware waits for a command), then left
alone for 10 s (``--smoke``: 1 s) while the QEMU process's CPU time is read from
``/proc/<pid>/stat`` (utime + stime) at both ends: percent of one host core. After the idle
span the firmware must still answer: one inference on the corpus sample, outputs equal to
the reference. Wall-clock figures: reported, never asserted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from .common import (
    QEMU_BOARD,
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    corpus_dir,
    generate,
    require_qemu,
)

CASE, SMOKE_CASE = "kws_int8", "mlp_default"
IDLE_SECONDS, SMOKE_IDLE_SECONDS = 10.0, 1.0
SMOKE_BOARDS = (QEMU_BOARD,)
TARGET_PERCENT = 5.0
VARIANTS: Dict[str, List[str]] = {"sleeping": [], "polling": ["MLF_CONSOLE_POLL=1"]}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces: count fields after its closing ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def qemu_boards() -> List[str]:
    from project_api.board import board_names, load_board

    return [name for name in board_names() if load_board(name).is_qemu]


def idle_percent(project: Any, archive: Path, seconds: float) -> Dict[str, Any]:
    """Connects to the firmware, leaves it idle for ``seconds`` and returns its QEMU
    process's CPU use meanwhile, and whether it then still computes the reference outputs."""
    inputs = dict(np.load(archive.with_suffix(".inputs.npz")))
    expected = np.load(archive.with_suffix(".outputs.npz"))
    with project.session(timeout=120.0) as session:
        pid = session.runner.pid
        began_cpu, began = cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        used, wall = cpu_seconds(pid) - began_cpu, time.monotonic() - began
        outputs = session.run(inputs)
    answers = all(np.array_equal(outputs[name], expected[name]) for name in outputs)
    return {"cpu_seconds": round(used, 3), "wall_seconds": round(wall, 3),
            "percent": round(100.0 * used / wall, 2), "answers_after_idle": answers}  # fmt: skip


def _build(ctx: Context, archive: Path, board: str, variant: str) -> Any:
    project = generate(
        archive,
        ctx.scratch(f"idle_{board}_{variant}"),
        board=board,
        options={"compile_definitions": VARIANTS[variant]},
    )
    project.build()
    return project


def measure_board(ctx: Context, board: str, archives: List[Path], seconds: float) -> Dict[str, Any]:
    """Both variants on one board, with the first archive that fits it."""
    from project_api.errors import FitError

    for archive in archives:
        try:
            projects = {variant: _build(ctx, archive, board, variant) for variant in VARIANTS}
        except FitError:
            continue
        row: Dict[str, Any] = {"board": board, "model": archive.stem, "idle_seconds": seconds}
        # The sleeping firmware again as `attach --icount` runs it (QEMU -icount sleep=on).
        runs = [(name, project, False) for name, project in projects.items()]
        runs.append(("icount", projects["sleeping"], True))
        for name, project, icount in runs:
            project.options["qemu_icount"] = icount
            measured = idle_percent(project, archive, seconds)
            if not measured["answers_after_idle"]:
                raise RuntimeError(f"{board} ({name}): wrong outputs after {seconds} s idle")
            row[f"{name}_percent"] = measured["percent"]
            row[f"{name}_cpu_seconds"] = measured["cpu_seconds"]
        return row
    raise RuntimeError(f"none of {[a.name for a in archives]} fits {board}")


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    archives = [corpus_dir() / f"{stem}.tar" for stem in (CASE, SMOKE_CASE)][ctx.smoke :]
    for archive in archives:
        if not archive.with_suffix(".outputs.npz").is_file():
            raise Skip(f"{archive.name} and its reference outputs are not in the corpus")
    seconds = SMOKE_IDLE_SECONDS if ctx.smoke else IDLE_SECONDS
    for board in SMOKE_BOARDS if ctx.smoke else qemu_boards():
        row = measure_board(ctx, board, archives, seconds)
        result.rows.append(row)
        ctx.log(
            f"  {board} ({row['model']}): idle QEMU {row['polling_percent']} % of a core "
            f"polling, {row['sleeping_percent']} % sleeping"
        )
    worst = max(max(row["sleeping_percent"], row["icount_percent"]) for row in result.rows)
    (main,) = [row for row in result.rows if row["board"] == QEMU_BOARD]
    result.summary = {
        "model": main["model"],
        "idle_seconds": seconds,
        "boards": len(result.rows),
        "an385_polling_percent": main["polling_percent"],
        "an385_sleeping_percent": main["sleeping_percent"],
        "an385_icount_percent": main["icount_percent"],
        "max_sleeping_percent": worst,
        "target_percent": TARGET_PERCENT,
        "target_met": worst < TARGET_PERCENT,
    }


PART = Part(
    "idle",
    "14. host CPU of an idle attached QEMU firmware: sleeping vs polling",
    run,
    columns=[
        "board",
        "model",
        "idle_seconds",
        "polling_percent",
        "sleeping_percent",
        "icount_percent",
        "polling_cpu_seconds",
        "sleeping_cpu_seconds",
        "icount_cpu_seconds",
    ],  # fmt: skip
    targets=[
        Target(
            "an idle attached QEMU firmware < 5 % of a host core (every QEMU board)",
            lambda i: (
                f"{i['model']}, {i['idle_seconds']:g} s idle: an385 {i['an385_polling_percent']} % "
                f"polling -> {i['an385_sleeping_percent']} % sleeping "
                f"({i['an385_icount_percent']} % with -icount); worst of {i['boards']} boards "
                f"{i['max_sleeping_percent']} %"
            ),
            "target_met",
        ),
    ],
)
