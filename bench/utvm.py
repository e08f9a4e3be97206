"""Benchmark 14: TVM's microTVM RPC (``device_protocol=microtvm``) driven by TVM 0.14's own
host (``tvm.micro.Session`` through TVM's Project API client, run by tests/tvm_driver.py in
the TVM venv of tests/tvm_host.py).

- Session start (``Session.__enter__``: ``open_transport`` starts the firmware, then the
  handshake) and a 64 KiB ``CopyToRemote`` (``tvm.nd.empty(..., session.device).copyfrom``),
  and the copy back, over the Project API transport: host pty and QEMU's UART pty. Seconds,
  wall clock: reported, never asserted.
- KWS instructions per inference on qemu-mps2-an385 under ``-icount shift=0`` (the device's
  timer runs on virtual time, one instruction per ns): AOT (``kws_int8_aot_packed``):
  ``time_evaluator("run")`` over RPC against RUN of our own ``host_driven`` firmware of the same
  archive; graph (``kws_int8``): the sum over its operators of ``time_evaluator(op)`` on the
  real tensors (TVM's host runs the graph, the device only the operators) against RUN of our
  firmware, whose executor adds its dispatch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

from .common import (
    KWS,
    QEMU_BOARD,
    REPO_ROOT,
    Context,
    Part,
    PartResult,
    Skip,
    corpus_dir,
    generate,
    have,
    host_compiler_available,
)

COPY_BYTES = 64 * 1024
SMOKE_COPY_BYTES = 4 * 1024
AOT_KWS = "kws_int8_aot_packed"


def tvm_host_module() -> Any:
    """tests/tvm_host.py: the cached TVM venv (the tests' own harness, shared, not copied)."""
    tests = str(REPO_ROOT / "tests")
    if tests not in sys.path:
        sys.path.append(tests)
    import tvm_host

    return tvm_host


def drive(ctx: Context, name: str, board: str, archive: Path, actions: List[Dict[str, Any]],
          **options: Any) -> Dict[str, Any]:  # fmt: skip
    """Generates, builds and flashes through TVM's client, then one Session doing
    ``actions``; the driver's session step (start_s, actions)."""
    from project_api.resources import template_dir

    host = tvm_host_module()
    work = ctx.scratch(f"utvm_{name}")
    spec = {
        "template_dir": str(template_dir()),
        "project_dir": str(work / "project"),
        "options": {"board": board, "project_type": "host_driven", **options},
        "steps": [
            {"do": "generate", "archive": str(archive)},
            {"do": "session", "actions": actions},
        ],
    }
    result = host.prepare().run(spec, work / "driver", timeout=900)
    if result["error"] is not None:
        raise RuntimeError(f"{name}: {result['error']['type']}: {result['error']['message']}")
    session: Dict[str, Any] = result["steps"][-1]
    for action in session["actions"]:
        if "error" in action:
            raise RuntimeError(f"{name}: {action['do']}: {action['error']}")
    session["arrays"] = result["arrays"]
    return session


def transport_row(ctx: Context, board: str, summary: Dict[str, Any]) -> Dict[str, Any]:
    """One board's session start and copy times (logged, and put in ``summary``)."""
    nbytes = SMOKE_COPY_BYTES if ctx.smoke else COPY_BYTES
    archive = corpus_dir() / ("mlp_default.tar" if ctx.smoke else f"{KWS}.tar")
    if not archive.is_file():
        raise Skip(f"{archive} is not here")
    session = drive(ctx, f"copy_{board}", board, archive, [{"do": "copy", "nbytes": nbytes}])
    copy = session["actions"][0]
    start, to_remote = round(session["start_s"], 3), round(copy["to_remote_s"], 3)
    ctx.log(f"utvm {board}: session start {start} s, {nbytes} B CopyToRemote {to_remote} s")
    kind = "host" if board == "host" else "qemu"
    summary.update({f"{kind}_session_start_s": start, f"{kind}_copy_s": to_remote})
    return {
        "board": board,
        "session_start_s": start,
        "copy_bytes": nbytes,
        "copy_to_remote_s": to_remote,
        "copy_from_remote_s": round(copy["from_remote_s"], 3),
        "to_remote_kb_s": round(nbytes / 1e3 / copy["to_remote_s"], 1),
    }


def ours_instructions(ctx: Context, archive: Path, name: str) -> int:
    """RUN of our own host_driven firmware (device protocol mlf) under -icount."""
    import numpy as np

    project = generate(archive, ctx.work / f"utvm_ours_{name}", board=QEMU_BOARD,
                       options={"qemu_icount": True})  # fmt: skip
    project.build()
    inputs = dict(np.load(str(archive.with_suffix("")) + ".inputs.npz"))
    with project.session(timeout=120.0) as session:
        session.run(inputs)  # the first run pays nothing extra, but keep both alike
        session.run(inputs)
        instructions = session.last_stats.instructions
    if instructions is None:
        raise RuntimeError(f"{name}: no instruction count (is -icount on?)")
    return int(instructions)


def outputs_match(archive: Path, arrays: Dict[str, Any], key: str) -> bool:
    import numpy as np

    with np.load(str(archive.with_suffix("")) + ".outputs.npz") as reference:
        return all(
            f"{key}.{name}" in arrays
            and arrays[f"{key}.{name}"].tobytes() == reference[name].tobytes()
            for name in reference.files
        )


def icount_rows(ctx: Context) -> Iterator[Dict[str, Any]]:
    kws = corpus_dir() / f"{KWS}.tar"
    aot = corpus_dir() / "aot" / f"{AOT_KWS}.tar"
    for archive, kind in ((aot, "aot"), (kws, "graph")):
        if not archive.is_file():
            raise Skip(f"{archive} is not here")
        inputs = str(archive.with_suffix("")) + ".inputs.npz"
        if kind == "aot":
            action = {"do": "aot", "inputs": inputs, "number": 1, "repeat": 3}
        else:
            action = {"do": "operators", "archive": str(archive), "inputs": inputs,
                      "time_ops": True}  # fmt: skip
        # Op by op, every tensor of the graph has memory of its own (no storage sharing):
        # more than the pools the firmware reserves by default.
        extra = {"device_memory_bytes": 1 << 20} if kind == "graph" else {}
        session = drive(
            ctx, f"icount_{kind}", QEMU_BOARD, archive, [action], qemu_icount=True, **extra
        )
        done = session["actions"][0]
        seconds = min(done["results"]) if kind == "aot" else sum(done["op_seconds"])
        rpc = round(seconds * 1e9)  # -icount shift=0: one instruction per virtual ns
        ours = ours_instructions(ctx, archive, kind)
        yield {
            "outputs_match": outputs_match(archive, session["arrays"], done["do"]),
            "archive": archive.stem,
            "executor": kind,
            "rpc_instructions": rpc,
            "ours_instructions": ours,
            "difference_percent": round(100.0 * (rpc - ours) / ours, 4),
            "measured_by": "time_evaluator(run)" if kind == "aot" else
                           f"sum of time_evaluator(op) over {done['calls']} operators",
        }  # fmt: skip


def run(ctx: Context, result: PartResult) -> None:
    host = tvm_host_module()
    reason = host.missing_reason()
    if reason:
        raise Skip(reason)
    boards = []
    if host_compiler_available():
        boards.append("host")
    arm = have("arm-none-eabi-gcc", "qemu-system-arm")
    if arm and not ctx.smoke:
        boards.append(QEMU_BOARD)
    elif ctx.smoke:
        result.skipped.append(f"{QEMU_BOARD}: the smoke run keeps to the host board")
    if not boards:
        raise Skip("no board: needs a host C compiler or arm-none-eabi-gcc and qemu-system-arm")
    for board in boards:
        result.rows.append(transport_row(ctx, board, result.summary))
    if ctx.smoke or not arm:
        result.skipped.append("-icount instructions: full run on qemu-mps2-an385 only")
        return
    for row in icount_rows(ctx):
        result.rows.append(row)
        ctx.log(
            f"utvm icount {row['executor']}: RPC {row['rpc_instructions']:,} vs ours "
            f"{row['ours_instructions']:,} instructions ({row['difference_percent']} %)"
        )
        result.summary[f"kws_{row['executor']}_difference_percent"] = row["difference_percent"]


PART = Part(
    "utvm",
    "16. TVM's microTVM RPC with TVM's own host: session start, 64 KiB copy, KWS -icount",
    run,
    columns=[
        "board",
        "session_start_s",
        "copy_bytes",
        "copy_to_remote_s",
        "copy_from_remote_s",
        "to_remote_kb_s",
        "archive",
        "executor",
        "rpc_instructions",
        "ours_instructions",
        "difference_percent",
        "outputs_match",
        "measured_by",
    ],  # fmt: skip
)
