"""Benchmark 24: compiled ``.tflite`` models per core: instructions, flash, RAM (issue 43).

Every shared ``.tflite`` (``../shared/models``) and any named in ``MLF_BENCH_TFLITE``
(paths separated by ``os.pathsep``) is compiled (``mlf-project compile``, graph executor)
and measured on three cores (:data:`CORES`):

- qemu-mps2-an385 (Cortex-M3), plain C (no CMSIS-NN), every model;
- qemu-mps2-an386 (Cortex-M4F) and qemu-mps3-an547 (Cortex-M55 + MVE), int8 models only,
  ``compile --cmsis-nn --board B`` (the forms the rules choose for that board's CPU class),
  CMSIS-NN v7.0.0 from the shared repository, as part 22 builds it;
- qemu-mps2-an386 for float32 models too, in plain C (the same archive as the an385's, its
  float arithmetic on the M4F's FPU).

Each archive is built (``host_driven``) and run once (:mod:`bench.onboard`: instructions of
one inference under ``-icount shift=0``, to within one tick of 40; ``arm-none-eabi-size`` of
the linked firmware): flash (text + data: code, constants, params bound in place, initial
values) and RAM (``.data`` + ``.bss``: arena, executor state, receive buffer; the 4 KiB stack
is its own column). The inputs are random (seed 3); where LiteRT is installed, the outputs
are checked against its reference kernels (``BUILTIN_REF``) on the same inputs (int8 equal,
float32 within rtol 1e-5).

Where ``compile`` tiles a model (its default ``--tile auto``: compile/tiling.py), it is
measured again with ``--tile off`` on the same core (source ``compile --tile off``): both
figures, peak RAM and instructions, side by side (the summary's ``tiling``).

TVM 0.14's archive of the same model (its plain C) is measured beside it on the an385: from
the directory ``MLF_BENCH_TVM_ARCHIVES`` names when set (``STEM.tar`` with
``STEM.inputs.npz`` and ``STEM.outputs.npz``, named after the ``.tflite``'s stem, as
``bench/tvm_archives.py`` makes them with TVM 0.14), else where the corpus holds one (KWS:
``../shared/mlf/kws_int8.tar``). Its ``exact`` is against the archive's own reference outputs
on its reference inputs, ours against LiteRT's; its row's ``ours_per_tvm`` is our an385
instructions over TVM's, and the summary's ``against_tvm`` puts the four figures side by side.
KWS's figures are put beside TFLM's on the same cores, as issue 43 measured them.
``--smoke``: KWS compiled, on the an385 only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from bench import onboard
from bench.common import REPO_ROOT, Context, Part, PartResult, Skip, Target, require_qemu
from bench.compile_cmsis import TFLM

SHARED = REPO_ROOT.parent / "shared"
MODELS = SHARED / "models"
TVM_ARCHIVES = {"kws_ref_model": SHARED / "mlf" / "kws_int8.tar"}
TVM_ARCHIVES_ENV = "MLF_BENCH_TVM_ARCHIVES"
KWS = "kws_ref_model"
TARGET_KWS = 18_900_000  # issue 43: 0.45 × TFLM's reference kernels on an385
AN385, AN386, AN547 = "qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps3-an547"
# (kernels, board, compiled with --cmsis-nn --board): the first is the smoke's only core
CORES = (("plain C", AN385, False), ("CMSIS-NN", AN386, True), ("CMSIS-NN", AN547, True))
# Issue 43's table: TFLM's instructions for KWS on each core (its reference kernels on the an385)
TFLM_KWS = {AN385: 42_023_047, **TFLM}
TIMEOUT = 600


def models(smoke: bool) -> List[Path]:
    """The ``.tflite`` files to measure: the shared ones (KWS only with ``smoke``) and
    those ``MLF_BENCH_TFLITE`` names."""
    found = sorted(MODELS.glob("*.tflite")) if MODELS.is_dir() else []
    if smoke:
        found = [p for p in found if p.stem == KWS]
    extra = [Path(p) for p in os.environ.get("MLF_BENCH_TFLITE", "").split(os.pathsep) if p]
    return found + extra


def tvm_archive(stem: str) -> Optional[Path]:
    """TVM 0.14's archive of the model ``stem``: ``$MLF_BENCH_TVM_ARCHIVES/STEM.tar`` when
    that variable is set, else the corpus's (KWS only); None where there is none."""
    directory = os.environ.get(TVM_ARCHIVES_ENV)
    found = Path(directory) / f"{stem}.tar" if directory else TVM_ARCHIVES.get(stem)
    return found if found is not None and found.is_file() else None


def _references(archive: Path) -> Tuple[Dict[str, np.ndarray], Optional[List[Any]]]:
    """An archive's reference inputs and outputs (``output0..N-1``; None where absent)."""
    inputs = dict(np.load(archive.with_suffix(".inputs.npz")))
    outputs = archive.with_suffix(".outputs.npz")
    if not outputs.exists():
        return inputs, None
    with np.load(outputs) as saved:
        return inputs, [saved[f"output{i}"] for i in range(len(saved.files))]


def _cli(*args: str) -> Tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "project_api", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=str(REPO_ROOT),
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def inputs_for(model: Path, archive: Path) -> Tuple[Dict[str, np.ndarray], Optional[List[Any]]]:
    """Random inputs (seed 3) by the archive's input specs, and LiteRT's reference outputs for
    them (None without LiteRT)."""
    from project_api.read import open_archive

    with open_archive(archive) as opened:
        specs = list(opened.models[0].inputs)
    rng = np.random.default_rng(3)
    inputs: Dict[str, np.ndarray] = {}
    for spec in specs:
        dtype = np.dtype(str(spec.dtype))
        if dtype == np.int8:
            inputs[spec.name] = rng.integers(-128, 128, spec.shape).astype(np.int8)
        else:
            inputs[spec.name] = rng.uniform(-2, 2, spec.shape).astype(dtype)
    try:
        from ai_edge_litert import interpreter as litert
    except ImportError:
        return inputs, None
    kernels = litert.OpResolverType.BUILTIN_REF
    interpreter = litert.Interpreter(model_path=str(model), experimental_op_resolver_type=kernels)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], inputs[detail["name"]])
    interpreter.invoke()
    return inputs, [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _row(ctx: Context, label: str, archive: Path, core: Tuple[str, str, bool],
         inputs: Dict[str, np.ndarray], want: Optional[List[Any]],
         options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:  # fmt: skip
    kernels, board, _ = core
    scratch = f"compiled_{label}_{board}".replace(" ", "_").replace("(", "").replace(")", "")
    got = onboard.measure(ctx, archive, board, inputs, want, scratch=scratch, options=options)
    return {
        "model": label,
        "board": board,
        "kernels": kernels,
        "instructions": got["instructions"],
        "flash_text_data_bytes": got["text"] + got["data"],
        "ram_bytes": got["ram_bytes"],
        "stack_bytes": got["stack_bytes"],
        "arena_bytes": got["arena_bytes"],
        "exact": got["exact"],
    }


def measure_model(
    ctx: Context, result: PartResult, model: Path, cmsis: Optional[Path]
) -> Tuple[Dict[str, np.ndarray], Optional[List[Any]]]:
    """``model`` compiled and measured on every core of :data:`CORES` (rows appended to
    ``result``); returns the inputs it ran on and LiteRT's outputs for them (part 25 runs
    TFLM on the same)."""
    work = ctx.scratch(f"compiled_{model.stem}")
    archive = work / f"{model.stem}.tar"
    code, _, err = _cli("compile", str(model), str(archive), "--force")
    if code != 0:
        result.skipped.append(f"{model.name}: {err.strip()}")
        return {}, None
    inputs, want = inputs_for(model, archive)
    int8 = all(value.dtype == np.int8 for value in inputs.values())
    for core in CORES[:1] if ctx.smoke else CORES:
        kernels, board, cmsis_nn = core
        if cmsis_nn and not int8:
            if board != AN386:
                continue
            core = kernels, board, cmsis_nn = ("plain C, FPU", board, False)
        if cmsis_nn and cmsis is None:
            result.skipped.append(f"{model.name} on {board}: no CMSIS-NN checkout")
            continue
        built, options = archive, None
        if cmsis_nn:
            built, options = work / f"{model.stem}_cmsis_{board}.tar", {"cmsis_path": str(cmsis)}
            code, _, err = _cli("compile", str(model), str(built), "--cmsis-nn", "--board", board,
                                "--cmsis-path", str(cmsis), "--force")  # fmt: skip
            if code != 0:
                result.skipped.append(f"{model.name} --cmsis-nn --board {board}: {err.strip()}")
                continue
        ctx.log(f"  {model.stem}: {kernels} on {board}")
        try:
            row = _row(ctx, model.stem, built, core, inputs, want, options)
        except Exception as err:  # one model's failure on one core is reported, the rest go on
            result.skipped.append(f"{model.name} on {board}: failed: {type(err).__name__}: {err}")
            continue
        result.rows.append({"source": "compile", **row})
        if not ctx.smoke and _tiled(built):
            extra = ["--cmsis-nn", "--board", board, "--cmsis-path", str(cmsis)] if cmsis_nn else []
            _untiled(ctx, result, model, work, core, inputs, want, extra, options)
    tvm = tvm_archive(model.stem)
    if tvm is not None and not ctx.smoke:
        _measure_tvm(ctx, result, model, tvm)
    return inputs, want


def cmsis_checkout(ctx: Context, result: PartResult) -> Optional[Path]:
    """The CMSIS-NN release ``compile --cmsis-nn`` takes (None, with the reason in
    ``result.skipped``, where there is none)."""
    from project_api.compile.forms import CMSIS_NN_DEPENDENCY

    try:
        return onboard.checkout_cmsis_nn(ctx, CMSIS_NN_DEPENDENCY["version_spec"])
    except Skip as why:
        result.skipped.append(f"the CMSIS-NN columns: {why}")
        return None


def _measure_tvm(ctx: Context, result: PartResult, model: Path, tvm: Path) -> None:
    """TVM 0.14's archive of ``model`` on the an385, beside our row there."""
    ctx.log(f"  {model.stem}: TVM 0.14's {tvm.name} on {AN385}")
    tvm_inputs, tvm_want = _references(tvm)
    label = f"{model.stem} (TVM 0.14)"
    try:
        row = _row(ctx, label, tvm, CORES[0], tvm_inputs, tvm_want)
    except Exception as err:  # reported, the rest go on
        result.skipped.append(f"{tvm}: failed: {type(err).__name__}: {err}")
        return
    ours = [r for r in result.rows if _ours_an385(r) and r["model"] == model.stem]
    if ours:
        row["ours_per_tvm"] = round(ours[0]["instructions"] / row["instructions"], 3)
    result.rows.append({"source": tvm.name, **row})


def _ours_an385(row: Dict[str, Any]) -> bool:
    return bool(row["source"] == "compile" and row["board"] == AN385)


FIGURES = ("instructions", "flash_text_data_bytes", "ram_bytes", "arena_bytes")


def against_tvm(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """{model: {figure: [ours, TVM's, ours / TVM's]}, and whether ours runs fewer
    instructions} for each model measured both ways on the an385."""
    ours = {r["model"]: r for r in rows if _ours_an385(r)}
    side: Dict[str, Any] = {}
    for row in rows:
        name = str(row["model"])
        if not name.endswith(" (TVM 0.14)") or name[: -len(" (TVM 0.14)")] not in ours:
            continue
        mine = ours[name[: -len(" (TVM 0.14)")]]
        figures: Dict[str, Any] = {
            key: [mine[key], row[key], round(mine[key] / row[key], 3) if row[key] else None]
            for key in FIGURES
        }
        figures["faster"] = mine["instructions"] < row["instructions"]
        figures["tvm_exact"] = row["exact"]
        side[mine["model"]] = figures
    return side


def _tiled(archive: Path) -> bool:
    """Whether ``compile`` ran some of the archive's operators as a tiled stage."""
    from project_api.read import open_archive
    from project_api.read.kernel_forms import model_kernel_forms

    with open_archive(archive) as opened:
        forms = model_kernel_forms(opened.models[0])
    return forms is not None and any(op.tiled for op in forms.operators)


def _untiled(ctx: Context, result: PartResult, model: Path, work: Path,
             core: Tuple[str, str, bool], inputs: Dict[str, np.ndarray],
             want: Optional[List[Any]], extra: List[str],
             options: Optional[Dict[str, Any]]) -> None:  # fmt: skip
    """The same model compiled with ``--tile off`` (and ``extra``), measured on the same core."""
    off = work / f"{model.stem}_untiled_{core[1]}.tar"
    code, _, err = _cli("compile", str(model), str(off), "--tile", "off", "--force", *extra)
    if code != 0:
        result.skipped.append(f"{model.name} --tile off: {err.strip()}")
        return
    ctx.log(f"  {model.stem}: {core[0]} on {core[1]}, --tile off")
    try:
        row = _row(ctx, f"{model.stem} untiled", off, core, inputs, want, options)
    except Exception as err:  # reported, the rest go on
        result.skipped.append(f"{model.name} --tile off: failed: {type(err).__name__}: {err}")
        return
    result.rows.append({"source": "compile --tile off", **row, "model": model.stem})


def _tiling(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """{"model on board": both figures} for the models measured tiled and untiled."""
    on = {(r["model"], r["board"]): r for r in rows if r["source"] == "compile"}
    off = {(r["model"], r["board"]): r for r in rows if r["source"] == "compile --tile off"}
    return {
        f"{name} on {board}": {
            key: [on[name, board][key], off[name, board][key]]
            for key in ("instructions", "arena_bytes", "ram_bytes", "flash_text_data_bytes")
        }
        for name, board in off
        if (name, board) in on
    }


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    cmsis = None if ctx.smoke else cmsis_checkout(ctx, result)
    for model in models(ctx.smoke):
        measure_model(ctx, result, model, cmsis)
    ours = [r for r in result.rows if r["source"] == "compile"]
    kws = {r["board"]: r for r in ours if r["model"] == KWS}
    plain = kws.get(AN385)
    side = against_tvm(result.rows)
    result.summary = {
        "models": len({r["model"] for r in ours}),
        "tvm_models": len(side),
        # None (not measured) where no TVM archive was measured: the smoke's, without one
        "faster_than_tvm": all(v["faster"] for v in side.values()) if side else None,
        "measured": len(ours),
        "all_equal_to_litert": all(
            r["exact"] is not False for r in result.rows if r["source"].startswith("compile")
        ),
        "tiling": _tiling(result.rows),  # model: {figure: [tiled, --tile off]}
        "against_tvm": side,  # model: {figure: [ours, TVM's, ratio]}
        "kws_instructions": plain["instructions"] if plain else None,
        "kws_ram_bytes": plain["ram_bytes"] if plain else None,
        "kws_flash_bytes": plain["flash_text_data_bytes"] if plain else None,
        "kws_target_met": bool(plain and plain["instructions"] <= TARGET_KWS),
        "kws_per_core": {
            board: {
                "instructions": row["instructions"],
                "tflm_instructions": TFLM_KWS.get(board),
                "flash_text_data_bytes": row["flash_text_data_bytes"],
                "ram_bytes": row["ram_bytes"],
                "equal_to_litert": row["exact"],
            }
            for board, row in kws.items()
        },
    }


# The figures of one measured firmware (``_row``), as parts 24 and 25 print them.
ROW_COLUMNS = (
    "model",
    "source",
    "board",
    "kernels",
    "instructions",
    "flash_text_data_bytes",
    "ram_bytes",
    "stack_bytes",
    "arena_bytes",
    "exact",
)


PART = Part(
    "compiled",
    "24. compiled .tflite per core (an385 plain C, an386/an547 CMSIS-NN): instructions, flash, RAM",
    run,
    columns=[*ROW_COLUMNS, "ours_per_tvm"],
    targets=[
        Target(
            "KWS an385 plain C <= 18,900,000 instructions (issue 43)",
            lambda f: (
                f"{f['kws_instructions']:,} instructions" if f.get("kws_instructions") else "-"
            ),
            "kws_target_met",
        ),
        Target(
            "an385 plain C: fewer instructions than TVM 0.14's C on every model (issue 43)",
            lambda f: f"{f['tvm_models']} models beside TVM's" if f.get("tvm_models") else "-",
            "faster_than_tvm",
        ),
    ],
)


if __name__ == "__main__":  # pragma: no cover - run alone: python -m bench.compiled
    PART.run_alone(Path("/tmp/bench_compiled"))
