"""Benchmark 5: host ↔ device streaming throughput over the pty, host and QEMU.

A model with one large float32 input and a same-sized output (relu), built for the host
(a native process on a pty) and for qemu-mps2-an385 (its UART on a pty). With the real
:class:`project_api.transport.session.Session`: SET_INPUT of the whole tensor (host → device)
and GET_OUTPUT (device → host) are timed separately, several times; the best and the median
are reported in MB/s (10^6 bytes per second), and the output is checked against numpy.
Wall-clock figures: reported, never asserted.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Dict, List

from .common import (
    QEMU_BOARD,
    Context,
    Part,
    PartResult,
    Skip,
    generate,
    have,
    host_compiler_available,
)

TARGET_MB_S = 1.0
# QEMU's UART models take bytes one at a time (about 16 KB/s host -> guest): 128 KiB there.
FULL_ELEMENTS = {"host": 1 << 20, QEMU_BOARD: 1 << 15}  # 4 MiB and 128 KiB of float32
SMOKE_ELEMENTS = {"host": 1 << 14, QEMU_BOARD: 1 << 10}  # 64 KiB, 4 KiB
REPEATS = {"host": 5, QEMU_BOARD: 3}
SMOKE_REPEATS = 2


def stream_archive(ctx: Context, elements: int) -> Path:
    from project_api.modelgen import Network

    path = ctx.work / "archives" / f"stream_{elements}.tar"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        net = Network(f"stream_{elements}")
        x = net.input("x", (1, elements))
        net.output(net.relu(x))
        net.build(description="streaming benchmark: one large input, relu").write(path)
    return path


def measure(ctx: Context, board: str, elements: int, repeats: int) -> Dict[str, Any]:
    import numpy as np

    archive = stream_archive(ctx, elements)
    project = generate(archive, ctx.work / f"stream_{board}", board=board)
    project.build()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, elements)).astype(np.float32)
    up: List[float] = []
    down: List[float] = []
    timeout = 120.0 if board == "host" else 600.0
    with project.session(timeout=timeout) as session:
        for _ in range(repeats):
            began = time.perf_counter()
            session.set_input(0, x)
            up.append(time.perf_counter() - began)
            session.invoke()
            began = time.perf_counter()
            y = session.get_output(0)
            down.append(time.perf_counter() - began)
            if not np.array_equal(y, np.maximum(x, 0)):
                raise RuntimeError(f"{board}: the streamed output is not relu(input)")
        max_payload = session.info.max_payload
    nbytes = x.nbytes
    mb = nbytes / 1e6
    return {
        "board": board,
        "tensor_bytes": nbytes,
        "max_payload": max_payload,
        "repeats": repeats,
        "upload_mb_s": round(mb / min(up), 3),
        "upload_median_mb_s": round(mb / statistics.median(up), 3),
        "download_mb_s": round(mb / min(down), 3),
        "download_median_mb_s": round(mb / statistics.median(down), 3),
    }


def run(ctx: Context, result: PartResult) -> None:
    boards: List[str] = []
    if host_compiler_available():
        boards.append("host")
    else:
        result.skipped.append("host: needs a host C compiler")
    if have("arm-none-eabi-gcc", "qemu-system-arm"):
        boards.append(QEMU_BOARD)
    else:
        result.skipped.append(f"{QEMU_BOARD}: needs arm-none-eabi-gcc and qemu-system-arm")
    if not boards:
        raise Skip("no board to stream to")
    for board in boards:
        elements = (SMOKE_ELEMENTS if ctx.smoke else FULL_ELEMENTS)[board]
        row = measure(ctx, board, elements, SMOKE_REPEATS if ctx.smoke else REPEATS[board])
        result.rows.append(row)
        ctx.log(
            f"streaming {board}: up {row['upload_median_mb_s']} MB/s, "
            f"down {row['download_median_mb_s']} MB/s (median)"
        )
        key = "host" if board == "host" else "qemu"
        result.summary[f"{key}_upload_mb_s"] = row["upload_median_mb_s"]
        result.summary[f"{key}_download_mb_s"] = row["download_median_mb_s"]
    result.summary["target_mb_s"] = TARGET_MB_S
    result.summary["target_met"] = all(
        min(r["upload_median_mb_s"], r["download_median_mb_s"]) >= TARGET_MB_S for r in result.rows
    )


PART = Part(
    "streaming",
    "5. streaming throughput over the pty",
    run,
    columns=[
        "board",
        "tensor_bytes",
        "upload_mb_s",
        "upload_median_mb_s",
        "download_mb_s",
        "download_median_mb_s",
    ],  # fmt: skip
)
