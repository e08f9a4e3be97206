"""One archive built and run once on a QEMU board: instructions, flash, RAM, exactness.

The measuring code of parts 22 (``compile_cmsis.py``), 22b (``compile_kws.py``) and 24
(``compiled.py``): the ``host_driven`` firmware generated with ``qemu_icount``, one inference
(instructions: the firmware's SysTick ticks under ``-icount shift=0``, to within one tick),
``arm-none-eabi-size`` of the linked firmware and the model's arena. Each part words flash
its own way from ``text`` (code and read-only data, weights included) and ``data``; RAM is
``.data`` + ``.bss`` with the stack (``.stack``, which ``size``'s Berkeley ``bss`` counts)
apart in ``stack_bytes``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from .common import Context, generate, size_berkeley


def checkout_cmsis_nn(ctx: Context, tag: str) -> Path:
    """CMSIS-NN at ``tag`` from the shared repository (``../shared/deps/CMSIS-NN.git`` or
    ``$MLF_PROJECT_CMSIS_NN``), checked out once per bench run."""
    from .cmsis_nn import repository

    tree = ctx.work / "cmsis_nn_trees" / tag
    if not (tree / "Include" / "arm_nnfunctions.h").is_file():
        # cloned under another name first: parts running side by side may both ask
        staged = tree.parent / f".{tag}.{os.getpid()}.{threading.get_ident()}"
        shutil.rmtree(staged, ignore_errors=True)
        subprocess.run(
            ["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1",
             "--branch", tag, repository().resolve().as_uri(), str(staged)],
            check=True, capture_output=True,
        )  # fmt: skip
        try:
            os.rename(staged, tree)
        except OSError:  # another part's clone got there first
            shutil.rmtree(staged, ignore_errors=True)
    return tree


def section_sizes(elf: Path, tool: str = "arm-none-eabi-size") -> Dict[str, int]:
    """``size -A``: every section's size by name."""
    out = subprocess.run([tool, "-A", str(elf)], capture_output=True, text=True, check=True)
    sizes: Dict[str, int] = {}
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0].startswith(".") and fields[1].isdigit():
            sizes[fields[0]] = int(fields[1])
    return sizes


def outputs_equal(got: Mapping[str, np.ndarray], want: Sequence[np.ndarray]) -> bool:
    """``output0..N-1`` against the reference's outputs: int equal, float within rtol 1e-5."""
    for index, expected in enumerate(want):
        value = np.asarray(got[f"output{index}"]).reshape(-1)
        if expected.dtype.kind == "f":
            if not np.allclose(value, expected.reshape(-1), rtol=1e-5, atol=0):
                return False
        elif not np.array_equal(value, expected.reshape(-1)):
            return False
    return True


def measure(
    ctx: Context,
    archive: Path,
    board: str,
    inputs: Mapping[str, np.ndarray],
    want: Optional[Sequence[np.ndarray]],
    *,
    scratch: str,
    options: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """``archive`` built for ``board`` in ``ctx.scratch(scratch)`` and run once on ``inputs``.

    Returns ``board``, ``instructions``, ``text``, ``data``, ``ram_bytes`` (``.data`` +
    ``.bss``, stack excluded), ``stack_bytes``, ``arena_bytes`` and ``exact`` (None without
    ``want``)."""
    project = generate(
        archive,
        ctx.scratch(scratch),
        board=board,
        options={**dict(options or {}), "qemu_icount": True},
    )
    project.build()
    with project.session(timeout=30, run_timeout=300) as session:
        got = session.run(dict(inputs))
        stats = session.last_stats
    assert stats is not None and stats.ticks is not None
    firmware = Path(project.firmware)
    berkeley, sections = size_berkeley(firmware), section_sizes(firmware)
    stack = sections.get(".stack", 0)
    (model,) = project.info["models"]
    return {
        "board": board,
        "instructions": int(round(stats.ticks * project.board.instructions_per_tick())),
        "text": berkeley["text"],
        "data": berkeley["data"],
        "ram_bytes": berkeley["data"] + berkeley["bss"] - stack,
        "stack_bytes": stack,
        "arena_bytes": int(model["sizes"]["arena_bytes"]),
        "exact": None if want is None else outputs_equal(got, want),
    }


def wanted(want: Optional[np.ndarray]) -> Optional[List[np.ndarray]]:
    """A single reference output as the list :func:`measure` takes."""
    return None if want is None else [want]
