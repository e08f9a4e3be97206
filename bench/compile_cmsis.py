"""Part 22, CMSIS-NN: KWS compiled with ``compile --cmsis-nn`` beside TVM 0.14's CMSIS-NN archive.

MLPerf Tiny's KWS (``../shared/models/kws_ref_model.tflite``) compiled with ``--cmsis-nn``
(CMSIS-NN v7.0.0, the archive's own dependency, from ``../shared/deps/CMSIS-NN.git`` or
``$MLF_PROJECT_CMSIS_NN``), and TVM 0.14's ``kws_int8_cmsisnn.tar`` of the corpus with the same
CMSIS-NN, each generated, built and run once on qemu-mps2-an386 (Cortex-M4, CMSIS-NN's DSP code)
and qemu-mps3-an547 (Cortex-M55, its MVE code), and on qemu-mps2-an385 (Cortex-M3, its
portable C), as ``mlf-project run --icount`` does:

- instructions per inference (QEMU ``-icount``, the firmware's SysTick);
- flash (``text``: code and read-only data, the weights included) and RAM (``.data`` + ``.bss``,
  stack excluded) of the ``host_driven`` firmware (``arm-none-eabi-size``; :mod:`bench.onboard`),
  and the model's arena;
- ours: whether the outputs equal LiteRT's reference kernels (``BUILTIN_REF``, when
  ``ai-edge-litert`` is installed) on a random input; TVM's: whether they equal TVM's reference.

Issue 43's targets for ours (``--cmsis-nn`` takes the ``direct`` form for KWS's first layer,
docs/compile.md) are printed beside TFLM's figures on the same cores, as the issue measured
them (:data:`TFLM`, :data:`TARGETS`).

``--smoke``: ours on the an547 only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from . import onboard
from .common import REPO_ROOT, Context, Part, PartResult, Skip, Target, corpus_dir, require_qemu

AN385, AN386, AN547 = "qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps3-an547"
BOARDS = (AN385, AN386, AN547)
KWS = REPO_ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"
TVM_ARCHIVE = "kws_int8_cmsisnn"
# Issue 43's table: TFLM 90b983c with its pinned CMSIS-NN, the same KWS and QEMU cores, and the
# targets set against it (0.95x on the Cortex-M4, 0.9x on the Cortex-M55).
TFLM = {AN386: 7_700_862, AN547: 1_816_838}
TARGETS = {AN386: 7_320_000, AN547: 1_640_000}
# Issue 43's RAM target: .data + .bss of the an386's host_driven firmware (TFLM: 23,560 B).
RAM_TARGET = 17_000


def litert(model: bytes, inputs: Dict[str, np.ndarray]) -> Optional[np.ndarray]:
    try:
        from ai_edge_litert import interpreter as lite
    except ImportError:
        return None
    it = lite.Interpreter(
        model_content=model, experimental_op_resolver_type=lite.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    for detail in it.get_input_details():
        it.set_tensor(detail["index"], inputs[detail["name"]])
    it.invoke()
    return np.asarray(it.get_tensor(it.get_output_details()[0]["index"]))


def measure(
    ctx: Context,
    what: str,
    archive: Path,
    board: str,
    tree: Path,
    inputs: Dict[str, np.ndarray],
    want: Optional[np.ndarray],
) -> Dict[str, Any]:
    row = onboard.measure(
        ctx, archive, board, inputs, onboard.wanted(want),
        scratch=f"compile_cmsis_{what}_{board}", options={"cmsis_path": str(tree)},
    )  # fmt: skip
    return {
        "archive": what,
        "board": board,
        "instructions": row["instructions"],
        "flash_text_bytes": row["text"],
        "ram_bytes": row["ram_bytes"],
        "arena_bytes": row["arena_bytes"],
        "exact": row["exact"],
    }


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    if not KWS.is_file():
        raise Skip(f"needs {KWS}")
    from project_api.board import load_board
    from project_api.compile import CmsisNnSource, compile_tflite, read_tflite
    from project_api.compile.choose import cpu_class
    from project_api.compile.forms import CMSIS_NN_DEPENDENCY

    tree = onboard.checkout_cmsis_nn(ctx, CMSIS_NN_DEPENDENCY["version_spec"])

    def ours(board: str) -> Path:
        """``compile --cmsis-nn --board board``: the forms the rules choose for its CPU."""
        return compile_tflite(
            KWS,
            ctx.scratch("compile_cmsis") / f"kws_cmsis_{board}.tar",
            cmsis_nn=True,
            force=True,
            source=CmsisNnSource(cmsis_path=str(tree)),
            cpu=cpu_class(load_board(board)),
        )

    data = KWS.read_bytes()
    rng = np.random.default_rng(0)
    model = read_tflite(KWS)
    ours_inputs = {
        model.tensors[i].name: rng.integers(-128, 128, model.tensors[i].shape).astype(np.int8)
        for i in model.inputs
    }
    ours_want = litert(data, ours_inputs)
    tvm = corpus_dir() / f"{TVM_ARCHIVE}.tar"
    rows: List[Dict[str, Any]] = []
    for board in (AN547,) if ctx.smoke else BOARDS:
        archive = ours(board)
        rows.append(
            measure(ctx, "compile --cmsis-nn", archive, board, tree, ours_inputs, ours_want)
        )
        if not ctx.smoke and tvm.is_file():
            inputs = dict(np.load(tvm.with_suffix(".inputs.npz")))
            want = np.load(tvm.with_suffix(".outputs.npz"))["output0"]
            rows.append(measure(ctx, "TVM 0.14 " + TVM_ARCHIVE, tvm, board, tree, inputs, want))
        for row in rows[-2:]:
            ctx.log(f"  {row['archive']} on {board}: {row['instructions']:,} instructions")
    result.rows = rows

    def figure(board: str, what: str) -> Optional[Dict[str, Any]]:
        found = [r for r in rows if r["board"] == board and r["archive"].startswith(what)]
        return found[0] if found else None

    result.summary = {
        board: {
            "ours": figure(board, "compile"),
            "tvm": figure(board, "TVM"),
        }
        for board in BOARDS
    }
    result.summary["exact"] = all(r["exact"] is not False for r in rows)
    for board, target in TARGETS.items():
        ours_row = figure(board, "compile")
        result.summary[f"target_{board}"] = bool(
            ours_row and ours_row["exact"] is not False and ours_row["instructions"] <= target
        )
    an386 = figure(AN386, "compile")
    result.summary[f"target_ram_{AN386}"] = bool(
        an386 and an386["exact"] is not False and an386["ram_bytes"] <= RAM_TARGET
    )


def _figures(c: Dict[str, Any], board: str) -> str:
    ours, tvm = c.get(board, {}).get("ours"), c.get(board, {}).get("tvm")
    if not ours:
        return "not measured"
    text = (
        f"{ours['instructions']:,} instructions, flash {ours['flash_text_bytes']:,} B, RAM "
        f"{ours['ram_bytes']:,} B"
    )
    if tvm:
        text += (
            f" (TVM 0.14: {tvm['instructions']:,}, {tvm['flash_text_bytes']:,} B, "
            f"{tvm['ram_bytes']:,} B)"
        )
    if board in TFLM:
        text += (
            f"; TFLM {TFLM[board]:,} instructions, target <= {TARGETS[board]:,} "
            f"({ours['instructions'] / TFLM[board]:.3f}x TFLM)"
        )
    return text


def _ram(c: Dict[str, Any]) -> str:
    parts = []
    for board in (AN386, AN547):
        ours = c.get(board, {}).get("ours")
        if ours:
            parts.append(f"{board} {ours['ram_bytes']:,} B (arena {ours['arena_bytes']:,} B)")
    return "; ".join(parts) or "not measured"


PART = Part(
    "compile_cmsis",
    "22. compile --cmsis-nn: KWS on the Cortex-M3, -M4 and -M55 beside TVM 0.14's and TFLM",
    run,
    columns=[
        "archive",
        "board",
        "instructions",
        "flash_text_bytes",
        "ram_bytes",
        "arena_bytes",
        "exact",
    ],  # fmt: skip
    targets=[
        Target("KWS --cmsis-nn on qemu-mps2-an386", lambda c: _figures(c, AN386), "exact"),
        Target("KWS --cmsis-nn on qemu-mps3-an547", lambda c: _figures(c, AN547), "exact"),
        Target(
            "issue 43: KWS --cmsis-nn on qemu-mps2-an386 <= 0.95x TFLM (7,320,000), exact",
            lambda c: _figures(c, AN386),
            f"target_{AN386}",
        ),
        Target(
            "issue 43: KWS --cmsis-nn on qemu-mps3-an547 <= 0.9x TFLM (1,640,000), exact",
            lambda c: _figures(c, AN547),
            f"target_{AN547}",
        ),
        Target(
            "issue 43: KWS --cmsis-nn RAM (.data + .bss) on qemu-mps2-an386 <= 17,000 B, exact",
            _ram,
            f"target_ram_{AN386}",
        ),
    ],
)
