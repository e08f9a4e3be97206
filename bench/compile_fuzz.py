"""Part 22: fuzzing compile's reader and checks with mutated ``.tflite`` files (issue 42).

Mutants of the shared models (``../shared/models``: KWS int8 and float32, ad01 int8) and of
the tests' small models (tests/compile_cases.py, mostly tables: mutations there reach the
schema rather than the weights), made by tests/tflite_fuzz.py: byte flips, interesting
32-bit words, nudged offsets, copied runs, truncations, 16-bit vtable entries. Each is read
(with ``MLF_BENCH_COMPILE_FUZZ_LOWER=1`` also checked and lowered to a Network).
A mutant must be refused with one line (CompileError) or accepted: any other exception is a
finding, and the slowest mutant shows there is no hang. ``MLF_BENCH_COMPILE_FUZZ_RUNS`` sets
the count (the issue's target: 1,000,000); ``--smoke`` runs 2,000. Two worker processes.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Dict, List

from bench.common import REPO_ROOT, Context, Part, PartResult, Skip, Target

TARGET_RUNS = 1_000_000
RUNS = int(os.environ.get("MLF_BENCH_COMPILE_FUZZ_RUNS", TARGET_RUNS))
SMOKE_RUNS = 2_000
WORKERS = 2
CHUNK = 25_000
SHARED_MODELS = ("kws_ref_model", "ad01_int8", "kws_ref_model_float32")
# MLF_BENCH_COMPILE_FUZZ_LOWER=1: also check and lower each mutant that reads (about three
# times the cost); by default the long run fuzzes the reader, as the issue asks, and the
# tests' 2,000 mutants go through checks, lowering and C rendering.
LOWER = os.environ.get("MLF_BENCH_COMPILE_FUZZ_LOWER", "0") == "1"


def _tests_path() -> None:
    tests = str(REPO_ROOT / "tests")
    if tests not in sys.path:
        sys.path.append(tests)


def seeds() -> List[bytes]:
    _tests_path()
    from compile_cases import tiny_model

    found = [tiny_model("int8"), tiny_model("float32", seed=1)]
    models = REPO_ROOT.parent / "shared" / "models"
    found += [
        (models / f"{m}.tflite").read_bytes()
        for m in SHARED_MODELS
        if (models / f"{m}.tflite").is_file()
    ]
    return found


def _worker(args: Any) -> Dict[str, Any]:
    count, seed = args
    _tests_path()
    from tflite_fuzz import FuzzReport, fuzz

    start = time.perf_counter()
    report = FuzzReport()
    seeded = seeds()
    done = 0
    while done < count:  # in chunks, each with its own seed, so progress can be reported
        chunk = fuzz(seeded, min(CHUNK, count - done), seed=seed * 1_000_003 + done, lower=LOWER)
        report.mutants += chunk.mutants
        report.refused += chunk.refused
        report.accepted += chunk.accepted
        report.findings += chunk.findings
        report.slowest = max(report.slowest, chunk.slowest)
        done += chunk.mutants
        print(f"[bench]   worker {seed}: {done:,} of {count:,} mutants, "
              f"{len(report.findings)} findings, {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    return {
        "worker": seed,
        "mutants": report.mutants,
        "refused": report.refused,
        "accepted": report.accepted,
        "findings": len(report.findings),
        "first_finding": report.findings[0][:160] if report.findings else "",
        "slowest_s": round(report.slowest, 3),
        "seconds": round(time.perf_counter() - start, 1),
    }


def run(ctx: Context, result: PartResult) -> None:
    try:
        import flatbuffers  # noqa: F401 - the tests' model writer needs it
    except ImportError:
        raise Skip(
            "flatbuffers (installed with the test extra's ai-edge-litert) is missing"
        ) from None
    total = SMOKE_RUNS if ctx.smoke else RUNS
    share = [total // WORKERS + (1 if i < total % WORKERS else 0) for i in range(WORKERS)]
    ctx.log(f"  {total:,} mutants of {len(seeds())} seeds in {WORKERS} workers")
    with ProcessPoolExecutor(WORKERS) as pool:
        rows = list(pool.map(_worker, [(n, 1000 + i) for i, n in enumerate(share)]))
    result.rows = rows
    mutants = sum(r["mutants"] for r in rows)
    findings = sum(r["findings"] for r in rows)
    slowest = max(r["slowest_s"] for r in rows)
    result.summary = {
        "mutants": mutants,
        "refused": sum(r["refused"] for r in rows),
        "accepted": sum(r["accepted"] for r in rows),
        "findings": findings,
        "slowest_s": slowest,
        "rate_per_s": round(mutants / max(max(r["seconds"] for r in rows), 1e-9)),
        "target_met": mutants >= TARGET_RUNS and findings == 0 and slowest <= 2.0,
    }


PART = Part(
    "compile_fuzz",
    "22. compile: mutated .tflite files refused in one line or compiled, never a traceback",
    run,
    columns=[
        "worker",
        "mutants",
        "refused",
        "accepted",
        "findings",
        "slowest_s",
        "seconds",
        "first_finding",
    ],  # fmt: skip
    targets=[
        Target(
            ">= 1 M mutated .tflite files: no traceback, no hang (each <= 2 s)",
            lambda f: (
                f"{f['mutants']:,} mutants, {f['findings']} findings, "
                f"slowest {f['slowest_s']:.3f} s"
            ),
            "target_met",
        ),
    ],
)


if __name__ == "__main__":  # pragma: no cover - run alone: python -m bench.compile_fuzz
    PART.run_alone(Path("/tmp"))
