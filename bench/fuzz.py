"""Part 9: long fuzzing of every parser of untrusted bytes, reported.

Builds the libFuzzer targets (clang, ASan + UBSan): graph.json, params and the MLPerf Tiny
command parser from ``crt/tests``, and the device protocol's frame decoder and dispatcher
from ``tests/device_c``. Each runs for ``RUNS`` executions (``--smoke``: a few thousand),
two at a time on two cores; the table gives executions, rate, coverage (libFuzzer's ``cov``
and ``ft``), corpus size and crashes. ``python bench/run.py --only fuzz`` gives the figures
the README quotes; CI runs only the smoke.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

from bench.common import REPO_ROOT, Context, PartResult, Skip, corpus_archives

TARGET_RUNS = 10_000_000
# MLF_BENCH_FUZZ_RUNS sets a shorter (or longer) run; the target stays 10 M.
RUNS = int(os.environ.get("MLF_BENCH_FUZZ_RUNS", TARGET_RUNS))
SMOKE_RUNS = 3_000
CRT_TESTS = REPO_ROOT / "crt" / "tests"
DEVICE_C = REPO_ROOT / "tests" / "device_c"
FIRMWARE = REPO_ROOT / "template_project" / "firmware"
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.MULTILINE)
_COVERAGE = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)")


def _build_crt(work: Path) -> Path:
    build = work / "crt"
    configure = ["cmake", "-S", str(CRT_TESTS), "-B", str(build), "-DCMAKE_C_COMPILER=clang"]
    configure += ["-DMLF_CRT_FUZZ=ON", "-DMLF_CRT_TESTS=OFF", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    for command in (configure, ["cmake", "--build", str(build), "--parallel"]):
        subprocess.run(command, capture_output=True, text=True, check=True)
    return build


def _build_device(work: Path) -> Path:
    out = work / "fuzz_device"
    sources = [DEVICE_C / "fuzz_device.c", DEVICE_C / "fake_runtime.c"]
    sources += [FIRMWARE / "mlf_device.c", FIRMWARE / "mlf_frame.c", FIRMWARE / "mlf_text.c"]
    command = ["clang", "-g", "-O1", "-fsanitize=fuzzer,address,undefined"]
    command += [f"-I{FIRMWARE}", f"-I{REPO_ROOT / 'crt' / 'include'}", f"-I{DEVICE_C}"]
    subprocess.run(command + [str(s) for s in sources] + ["-o", str(out)], check=True)
    return out


def _seeds(build: Path, work: Path) -> Path:
    root = work / "seeds"
    for kind in ("graph", "params", "mlperftiny", "device"):
        (root / kind).mkdir(parents=True, exist_ok=True)
    subprocess.run([str(build / "make_seeds"), str(root)], check=True, capture_output=True)
    for archive in corpus_archives():
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                kind = "graph" if member.name.endswith((".graph", "graph.json")) else None
                kind = "params" if member.name.endswith(".params") else kind
                data = tar.extractfile(member) if kind and member.isfile() else None
                if kind and data is not None:
                    (root / kind / f"{archive.stem}_{Path(member.name).name}").write_bytes(
                        data.read()
                    )
    (root / "mlperftiny" / "session").write_bytes(b"name%\nprofile%\ndb load 4%\ndb 0a0b0c0d%\n")
    return root


def _run(fuzzer: Path, kind: str, seeds: Path, work: Path, runs: int) -> Dict[str, object]:
    corpus = work / f"corpus_{kind}"
    corpus.mkdir(exist_ok=True)
    dictionary = CRT_TESTS / f"{kind}.dict"
    command = [str(fuzzer), f"-runs={runs}", "-print_final_stats=1", "-timeout=10"]
    command += ["-max_len=4096", f"-artifact_prefix={work}/{kind}-"]
    command += [f"-dict={dictionary}"] if dictionary.is_file() else []
    done = subprocess.run(command + [str(corpus), str(seeds / kind)], capture_output=True)
    log = done.stderr.decode("utf-8", "replace")
    stats = {key: int(value) for key, value in _STAT.findall(log)}
    coverage = _COVERAGE.findall(log)
    cov, features, corp = (int(x) for x in coverage[-1]) if coverage else (0, 0, 0)
    crashes = sorted(p.name for p in work.glob(f"{kind}-*"))
    seconds = max(stats.get("slowest_unit_time_sec", 0), 0)
    return {
        "target": fuzzer.name,
        "executions": stats.get("number_of_executed_units", 0),
        "exec_per_second": stats.get("average_exec_per_sec", 0),
        "seconds": round(
            stats.get("number_of_executed_units", 0) / max(stats.get("average_exec_per_sec", 1), 1),
            1,
        ),
        "coverage": cov,
        "features": features,
        "corpus": corp,
        "peak_rss_mb": stats.get("peak_rss_mb", 0),
        "crashes": len(crashes) if done.returncode == 0 else max(len(crashes), 1),
        "slowest_unit_seconds": seconds,
        "crash_files": crashes,
    }


def run(ctx: Context, result: PartResult) -> None:
    if shutil.which("clang") is None or shutil.which("cmake") is None:
        raise Skip("needs clang (with libFuzzer) and cmake")
    work = ctx.scratch("fuzz")
    try:
        build = _build_crt(work)
        device = _build_device(work)
    except subprocess.CalledProcessError as err:
        raise Skip(f"the fuzzers did not build (libFuzzer missing?): {err}") from None
    seeds = _seeds(build, work)
    runs = SMOKE_RUNS if ctx.smoke else RUNS
    targets: List[Tuple[Path, str]] = [
        (build / "fuzz_graph_json", "graph"),
        (build / "fuzz_params", "params"),
        (build / "fuzz_mlperftiny", "mlperftiny"),
        (device, "device"),
    ]
    ctx.log(f"  {len(targets)} targets, {runs:,} executions each, two at a time")
    with ThreadPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(lambda t: _run(t[0], t[1], seeds, work, runs), targets))
    for row in rows:
        ctx.log(f"  {row['target']}: {row['executions']:,} runs, {row['crashes']} crashes")
    result.rows = rows
    result.summary = {
        "runs_per_target": runs,
        "min_executions": min(int(r["executions"]) for r in rows),  # type: ignore[call-overload]
        "crashes": sum(int(r["crashes"]) for r in rows),  # type: ignore[call-overload]
        "target_met": all(r["crashes"] == 0 for r in rows)
        and all(int(r["executions"]) >= TARGET_RUNS for r in rows),  # type: ignore[call-overload]
    }
