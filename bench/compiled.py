"""Benchmark 23: compiled ``.tflite`` models on qemu-mps2-an385, plain C (issue 43).

Every shared ``.tflite`` (``../shared/models``) and any named in ``MLF_BENCH_TFLITE``
(paths separated by ``os.pathsep``) is compiled (``mlf-project compile``, graph executor),
built for qemu-mps2-an385 (Cortex-M3, no CMSIS-NN) and run once under ``-icount shift=0``
(``run --icount``: the guest's instructions of one inference, to within one tick of 40),
then ``footprint`` reads the linked firmware: flash (``.text`` + ``.rodata``: code,
constants, params bound in place) and RAM (``.data`` + ``.bss``: arena, executor state,
receive buffer; the 4 KiB stack is its own column). Where LiteRT is installed, the outputs
are checked against its reference kernels (``BUILTIN_REF``) on the same inputs (int8
equal, float32 within rtol 1e-5).

TVM 0.14's archive of the same model is measured beside it where the corpus holds one
(KWS: ``../shared/mlf/kws_int8.tar``, on its own reference inputs). ``--smoke``: KWS
compiled only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from bench.common import QEMU_BOARD, REPO_ROOT, Context, Part, PartResult, Target, require_qemu

SHARED = REPO_ROOT.parent / "shared"
MODELS = SHARED / "models"
TVM_ARCHIVES = {"kws_ref_model": SHARED / "mlf" / "kws_int8.tar"}
KWS = "kws_ref_model"
TARGET_KWS = 18_900_000  # issue 43: 0.45 × TFLM's reference kernels on an385
TIMEOUT = 600


def models(smoke: bool) -> List[Path]:
    """The ``.tflite`` files to measure: the shared ones (KWS only with ``smoke``) and
    those ``MLF_BENCH_TFLITE`` names."""
    found = sorted(MODELS.glob("*.tflite")) if MODELS.is_dir() else []
    if smoke:
        found = [p for p in found if p.stem == KWS]
    extra = [Path(p) for p in os.environ.get("MLF_BENCH_TFLITE", "").split(os.pathsep) if p]
    return found + extra


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


def _litert_inputs(model: Path, work: Path) -> Optional[Tuple[Path, List[np.ndarray]]]:
    """Random inputs (seed 3) and LiteRT's reference outputs for them, or None without LiteRT."""
    try:
        from ai_edge_litert import interpreter as litert
    except ImportError:
        return None
    kernels = litert.OpResolverType.BUILTIN_REF
    interpreter = litert.Interpreter(model_path=str(model), experimental_op_resolver_type=kernels)
    interpreter.allocate_tensors()
    rng = np.random.default_rng(3)
    inputs: Dict[str, np.ndarray] = {}
    for detail in interpreter.get_input_details():
        shape, dtype = tuple(detail["shape"]), detail["dtype"]
        if dtype == np.int8:
            value = rng.integers(-128, 128, shape).astype(np.int8)
        else:
            value = rng.uniform(-2, 2, shape).astype(dtype)
        inputs[detail["name"]] = value
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    want = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
    path = work / "inputs.npz"
    np.savez(path, **inputs)  # type: ignore[arg-type]
    return path, want


def measure(ctx: Context, label: str, archive: Path, inputs: Optional[Path],
            want: Optional[List[np.ndarray]]) -> Dict[str, Any]:  # fmt: skip
    """One archive built and run on the board: instructions, flash, RAM, exactness."""
    work = ctx.work / "compiled" / label
    work.mkdir(parents=True, exist_ok=True)
    project, outputs = work / "project", work / "outputs.npz"
    args = ["run", str(archive), "--board", QEMU_BOARD, "--icount", "--json"]
    args += ["--project-dir", str(project), "--output", str(outputs), "--timeout", "300"]
    args += ["--input", str(inputs)] if inputs else []
    code, out, err = _cli(*args)
    if code != 0:
        raise RuntimeError(f"{label}: run failed: {err.strip().splitlines()[-1:]}")
    ran = json.loads(out)
    code, out, err = _cli("footprint", str(project), "--json")
    if code not in (0, 1):
        raise RuntimeError(f"{label}: footprint failed: {err.strip().splitlines()[-1:]}")
    sections = json.loads(out)["linked"]["sections"]

    def total(name: str) -> int:
        return int(sections.get(name, {}).get("total", 0))

    row: Dict[str, Any] = {
        "model": label,
        "instructions": int(ran["instructions"]),
        "flash_bytes": total(".text") + total(".rodata") + total(".data"),
        "ram_bytes": total(".data") + total(".bss"),
        "stack_bytes": total(".stack"),
        "arena_bytes": int(sections.get(".bss", {}).get("arena", 0)),
        "equal_to_litert": None,
    }
    if want is not None:
        got = np.load(outputs)
        row["equal_to_litert"] = all(
            np.allclose(got[f"output{i}"].reshape(-1), w.reshape(-1), rtol=1e-5, atol=0)
            if w.dtype.kind == "f"
            else np.array_equal(got[f"output{i}"].reshape(-1), w.reshape(-1))
            for i, w in enumerate(want)
        )
    return row


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    for model in models(ctx.smoke):
        work = ctx.scratch(f"compiled_{model.stem}")
        archive = work / f"{model.stem}.tar"
        code, _, err = _cli("compile", str(model), str(archive), "--force")
        if code != 0:
            result.skipped.append(f"{model.name}: {err.strip()}")
            continue
        reference = _litert_inputs(model, work)
        inputs, want = reference if reference else (None, None)
        ctx.log(f"  {model.stem}: compiled, running on {QEMU_BOARD}")
        result.rows.append({"source": "compile", **measure(ctx, model.stem, archive, inputs, want)})
        tvm = TVM_ARCHIVES.get(model.stem)
        if tvm is not None and tvm.exists() and not ctx.smoke:
            tvm_inputs = tvm.with_suffix(".inputs.npz")
            row = measure(ctx, f"{model.stem} (TVM 0.14)", tvm,
                          tvm_inputs if tvm_inputs.exists() else None, None)  # fmt: skip
            result.rows.append({"source": tvm.name, **row})
    ours = {r["model"]: r for r in result.rows if r["source"] == "compile"}
    kws = ours.get(KWS)
    result.summary = {
        "models": len(ours),
        "all_equal_to_litert": all(r["equal_to_litert"] is not False for r in ours.values()),
        "kws_instructions": kws["instructions"] if kws else None,
        "kws_ram_bytes": kws["ram_bytes"] if kws else None,
        "kws_flash_bytes": kws["flash_bytes"] if kws else None,
        "kws_target_met": bool(kws and kws["instructions"] <= TARGET_KWS),
    }


PART = Part(
    "compiled",
    "24. compiled .tflite on qemu-mps2-an385, plain C: instructions, flash, RAM",
    run,
    columns=[
        "model",
        "source",
        "instructions",
        "flash_bytes",
        "ram_bytes",
        "stack_bytes",
        "arena_bytes",
        "equal_to_litert",
    ],  # fmt: skip
    targets=[
        Target(
            "KWS an385 plain C <= 18,900,000 instructions (issue 43)",
            lambda f: (
                f"{f['kws_instructions']:,} instructions" if f.get("kws_instructions") else "-"
            ),
            "kws_target_met",
        ),
    ],
)


if __name__ == "__main__":  # pragma: no cover - run alone: python -m bench.compiled
    from bench.common import Context as _Context

    context = _Context(smoke="--smoke" in sys.argv, work=Path("/tmp/bench_compiled"), log=print)
    outcome = PartResult(PART.name, PART.title)
    run(context, outcome)
    print(outcome.summary)
    for line in outcome.rows:
        print(line)
