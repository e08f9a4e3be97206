"""Part 9: long fuzzing of every parser of untrusted bytes, reported.

Builds the libFuzzer targets (clang, ASan + UBSan): graph.json, params, the MLPerf Tiny
command parser and the microTVM RPC server from ``crt/tests``, and the device protocol's
frame decoder and dispatcher from ``tests/device_c``. Each runs for ``RUNS`` executions
(``--smoke``: a few thousand), two at a time on two cores; the table gives executions, rate,
coverage (libFuzzer's ``cov`` and ``ft``), corpus size and crashes. ``python bench/run.py
--only fuzz`` gives the figures the README quotes; CI runs only the smoke.

``MLF_BENCH_FUZZ_TARGETS`` picks targets (``graph,params,mlperftiny,device,utvm``) and
``MLF_BENCH_FUZZ_FORK=N`` runs each as one libFuzzer run in fork mode with N workers, one
target at a time: the slow device and utvm targets reach 10 M executions in one run that way.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from bench.common import REPO_ROOT, Context, Part, PartResult, Skip, Target, corpus_archives

TARGET_RUNS = 10_000_000
# MLF_BENCH_FUZZ_RUNS sets a shorter (or longer) run; the target stays 10 M.
RUNS = int(os.environ.get("MLF_BENCH_FUZZ_RUNS", TARGET_RUNS))
SMOKE_RUNS = 3_000
KINDS = ("graph", "params", "mlperftiny", "device", "utvm")
TARGETS = [k for k in os.environ.get("MLF_BENCH_FUZZ_TARGETS", ",".join(KINDS)).split(",") if k]
FORK_WORKERS = int(os.environ.get("MLF_BENCH_FUZZ_FORK", "0"))
CRT_TESTS = REPO_ROOT / "crt" / "tests"
DEVICE_C = REPO_ROOT / "tests" / "device_c"
FIRMWARE = REPO_ROOT / "template_project" / "firmware"
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.MULTILINE)
_COVERAGE = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)")
# Fork mode's parent prints no stat:: lines, only progress such as
# "#1672010: cov: 1036 ft: 5349 corp: 539 exec/s 5962 oom/timeout/crash: 0/0/0 time: 144s".
_FORK_PROGRESS = re.compile(r"^#(\d+): cov: \d+ .*?exec/s (\d+) .*?time: (\d+)s", re.MULTILINE)


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
    for kind in KINDS:
        (root / kind).mkdir(parents=True, exist_ok=True)
    subprocess.run([str(build / "make_seeds"), str(root)], check=True, capture_output=True)
    for archive in corpus_archives():
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                found: Optional[str] = None
                if member.name.endswith((".graph", "graph.json")):
                    found = "graph"
                elif member.name.endswith(".params"):
                    found = "params"
                data = tar.extractfile(member) if found and member.isfile() else None
                if found and data is not None:
                    (root / found / f"{archive.stem}_{Path(member.name).name}").write_bytes(
                        data.read()
                    )
    (root / "mlperftiny" / "session").write_bytes(b"name%\nprofile%\ndb load 4%\ndb 0a0b0c0d%\n")
    return root


def log_figures(log: str) -> Dict[str, int]:
    """Executions, rate, seconds, coverage, features and corpus from a libFuzzer log, in
    process or in fork mode."""
    stats = {key: int(value) for key, value in _STAT.findall(log)}
    coverage = _COVERAGE.findall(log)
    cov, features, corp = (int(x) for x in coverage[-1]) if coverage else (0, 0, 0)
    figures = {"coverage": cov, "features": features, "corpus": corp}
    progress = _FORK_PROGRESS.findall(log)
    if "number_of_executed_units" not in stats and progress:
        executions, rate, seconds = (int(x) for x in progress[-1])
        return {**figures, "executions": executions, "exec_per_second": rate, "seconds": seconds}
    executions = stats.get("number_of_executed_units", 0)
    rate = stats.get("average_exec_per_sec", 0)
    seconds = round(executions / max(rate, 1))
    return {
        **figures,
        "executions": executions,
        "exec_per_second": rate,
        "seconds": seconds,
        "peak_rss_mb": stats.get("peak_rss_mb", 0),
    }


def _run(fuzzer: Path, kind: str, seeds: Path, work: Path, runs: int) -> Dict[str, object]:
    corpus = work / f"corpus_{kind}"
    corpus.mkdir(exist_ok=True)
    dictionary = CRT_TESTS / f"{kind}.dict"
    command = [str(fuzzer), f"-runs={runs}", "-print_final_stats=1", "-timeout=10"]
    command += ["-max_len=4096", f"-artifact_prefix={work}/{kind}-"]
    command += [f"-dict={dictionary}"] if dictionary.is_file() else []
    command += [f"-fork={FORK_WORKERS}"] if FORK_WORKERS > 0 else []
    done = subprocess.run(command + [str(corpus), str(seeds / kind)], capture_output=True)
    figures = log_figures(done.stderr.decode("utf-8", "replace"))
    if "peak_rss_mb" not in figures:  # fork mode: the largest child waited for so far (the
        # workers, when the fuzz part runs alone: targets run one at a time in fork mode)
        figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    crashes = sorted(p.name for p in work.glob(f"{kind}-*"))
    return {
        "target": fuzzer.name,
        **figures,
        "crashes": len(crashes) if done.returncode == 0 else max(len(crashes), 1),
        "crash_files": crashes,
        "fork_workers": FORK_WORKERS,
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
    fuzzers = {"graph": build / "fuzz_graph_json", "params": build / "fuzz_params"}
    fuzzers.update(mlperftiny=build / "fuzz_mlperftiny", device=device, utvm=build / "fuzz_utvm")
    unknown = sorted(set(TARGETS) - set(fuzzers))
    if unknown:
        raise Skip(f"MLF_BENCH_FUZZ_TARGETS names no target {unknown}: choose from {KINDS}")
    targets: List[Tuple[Path, str]] = [(fuzzers[kind], kind) for kind in TARGETS]
    at_once = 1 if FORK_WORKERS > 0 else 2
    how = f"one at a time, {FORK_WORKERS} fork workers" if at_once == 1 else "two at a time"
    ctx.log(f"  {len(targets)} targets, {runs:,} executions each, {how}")
    with ThreadPoolExecutor(max_workers=at_once) as pool:
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


PART = Part(
    "fuzz",
    "9. libFuzzer on every parser of untrusted bytes (executions, coverage)",
    run,
    columns=[
        "target",
        "executions",
        "exec_per_second",
        "seconds",
        "coverage",
        "features",
        "corpus",
        "peak_rss_mb",
        "crashes",
    ],  # fmt: skip
    targets=[
        Target(
            "every libFuzzer target >= 10 M executions without a crash",
            lambda f: (
                f"{f['runs_per_target']:,} runs per target asked, fewest done "
                f"{f['min_executions']:,}, {f['crashes']} crashes"
            ),
            "target_met",
        ),
    ],
)
