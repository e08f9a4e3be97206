"""Run the benchmark suite: ``python bench/run.py [--smoke] [--json OUT] [--only PART,...]``.

Prints a table per benchmark and the issue-9 targets, and writes everything as JSON
(default ``bench/results/latest.json``; ``bench/results/`` is not committed). ``--smoke``
runs the same code on the smallest inputs (seconds; CI runs it, with ``--jobs 2``: two parts
side by side). Exit status 1 when a benchmark failed (a skipped one — missing tool or
corpus — is not a failure).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

if __package__ in (None, ""):  # run as a script: make `bench` and `project_api` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import (  # noqa: E402
    aot,
    bare,
    buildtime,
    cmsis_nn,
    codesize,
    compile_cmsis,
    compile_fuzz,
    compile_kws,
    compiled,
    dispatch,
    export,
    fuzz,
    hostile,
    idle,
    machines,
    matrix,
    params,
    plan,
    project_types,
    ram,
    sandbox,
    soak,
    streaming,
    tflm,
    trial,
    tune,
    utvm,
)
from bench.common import REPO_ROOT, Context, Part, PartResult, Skip  # noqa: E402

# Every part registers itself in its module (``PART``: name, title, columns, targets); this
# list only orders them, as the tables and --only name them.
REGISTERED: List[Part] = [
    module.PART
    for module in (codesize, ram, dispatch, buildtime, streaming, params, aot, hostile, fuzz,
                   soak, matrix, bare, project_types, idle, machines, utvm, trial, sandbox,
                   export, cmsis_nn, plan, compile_fuzz, compile_cmsis, compile_kws, tune,
                   compiled, tflm)
]  # fmt: skip
PARTS: List[Tuple[str, str, Callable[[Context, PartResult], None]]] = [
    (part.name, part.title, part.run) for part in REGISTERED
]
COLUMNS: Dict[str, List[str]] = {part.name: list(part.columns) for part in REGISTERED}
DEFAULT_JSON = REPO_ROOT / "bench" / "results" / "latest.json"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return "+".join(str(v) for v in value) or "-"
    return str(value)


def table(rows: Sequence[Dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def _without_texts(c: Dict[str, Any]) -> str:
    """The lean figures (no error texts, as host_driven firmware builds), when measured."""
    tables = c.get("runtime_text_tables_without_error_texts")
    json = c.get("runtime_text_json_without_error_texts")
    if tables is None or json is None:
        return ""
    return f"; without error texts {tables:,} / {json:,} B"


def targets(results: Dict[str, PartResult]) -> List[Dict[str, Any]]:
    """The issue's targets and where each stands."""

    def summary(name: str) -> Dict[str, Any]:
        part = results.get(name)
        return part.summary if part is not None and part.status == "ok" else {}

    def verdict(value: Any, ok: Optional[bool], part: str = "") -> str:
        if value is None:
            found = results.get(part)
            if found is None:
                return "not run"
            return "not measured" if found.status == "ok" else found.status
        if ok is None:
            return "not measured"
        return "met" if ok else "NOT met"

    rows = []
    c = summary("codesize")
    rows.append(
        {
            "target": "runtime .text (+.rodata) <= 6 KB on Cortex-M3 -Os",
            "figure": None
            if not c
            else f"{c['runtime_text_tables']:,} B tables, {c['runtime_text_json']:,} B with JSON "
            f"parser (+libc: {c['runtime_plus_libc_delta_tables']:,} / "
            f"{c['runtime_plus_libc_delta_json']:,} B)" + _without_texts(c),
            # The issue counts the JSON parser in; firmware from const tables leaves it out.
            "status": verdict(c or None, c.get("target_met_json"), "codesize")
            + (
                " (met without the JSON parser)"
                if c.get("target_met_tables") and not c.get("target_met_json")
                else ""
            ),
        }
    )
    r = summary("ram")
    rows.append(
        {
            "target": f"runtime RAM beyond tensors <= 16 KB ({r.get('chain', 'chain_add_400')})",
            "figure": None
            if not r
            else f"{r.get('runtime_ram_tables')} B tables, {r.get('runtime_ram_json')} B JSON "
            f"({r.get('board')})",
            "status": verdict(r or None, r.get("target_met"), "ram"),
        }
    )
    d = summary("dispatch")
    rows.append(
        {
            "target": "dispatch overhead <= 1 % of instructions (kws_int8)",
            "figure": None
            if not d or d.get("kws_percent") is None
            else f"{d['kws_percent']:.3f} % ({d.get('kws_executor_instructions'):,.0f} "
            f"instructions per inference); worst {d['worst_model']} {d['worst_percent']:.3f} %",
            "status": verdict(d.get("kws_percent"), d.get("target_met"), "dispatch"),
        }
    )
    p = summary("params")
    rows.append(
        {
            "target": "params RAM = 0 (bound in place)",
            "figure": None
            if not p
            else f"{p['params_ram_in_place']} B in place vs {p['params_ram_copied']} B copied "
            f"({p['model']})",
            "status": verdict(p or None, p.get("target_met"), "params"),
        }
    )
    b = summary("buildtime")
    rows.append(
        {
            "target": "generate + build of kws_int8 on host <= 5 s",
            "figure": None
            if b.get("kws_seconds") is None
            else f"{b['kws_median_seconds']:.2f} s median ({b['kws_seconds']:.2f} s best); params "
            f"slope {b['slope_seconds_per_mib']:.3f} s/MiB wall, "
            f"{b['cpu_slope_seconds_per_mib']:.3f} s/MiB CPU (r² {b['cpu_r2']:.3f})",
            "status": verdict(b.get("kws_seconds"), b.get("target_met"), "buildtime"),
        }
    )
    s = summary("streaming")
    figure = None
    if s:
        figure = ", ".join(
            f"{k}: up {s[f'{k}_upload_mb_s']} / down {s[f'{k}_download_mb_s']} MB/s"
            for k in ("host", "qemu")
            if f"{k}_upload_mb_s" in s
        )
    rows.append(
        {
            "target": "streaming >= 1 MB/s over the pty",
            "figure": figure,
            "status": verdict(s or None, s.get("target_met"), "streaming"),
        }
    )
    a = summary("aot")
    rows.append(
        {
            "target": "AOT firmware vs a bare tvmgen_kws_run <= 0.01 % of instructions",
            "figure": None
            if a.get("kws_aot_percent") is None
            else f"{a['kws_aot_percent']:.5f} % ({a['kws_aot_overhead_instructions']:,.0f} of "
            f"{a['kws_aot_instructions']:,.0f} instructions, kws_int8_aot_usmp); worst "
            f"{a['worst_model']} {a['worst_percent']:.5f} %",
            "status": verdict(a.get("kws_aot_percent"), a.get("target_met"), "aot"),
        }
    )
    for part in REGISTERED:
        found = summary(part.name)
        for target in part.targets:
            rows.append(
                {
                    "target": target.text,
                    "figure": target.figure(found) if found else None,
                    "status": verdict(found or None, found.get(target.met), part.name),
                }
            )
    return rows


def environment() -> Dict[str, Any]:
    def version(argv: List[str]) -> Optional[str]:
        if shutil.which(argv[0]) is None:
            return None
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        return out.splitlines()[0].strip() if out else None

    commit = version(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"])
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cc": version(["cc", "--version"]),
        "arm_gcc": version(["arm-none-eabi-gcc", "--version"]),
        "qemu": version(["qemu-system-arm", "--version"]),
    }


def _run_part(ctx: Context, name: str, title: str, func: Callable, log: Callable) -> PartResult:
    result = PartResult(name=name, title=title)
    started = time.perf_counter()
    log(f"{title} ...")
    try:
        func(ctx, result)
    except Skip as why:
        result.status, result.reason = "skipped", str(why)
    except Exception as err:  # a benchmark's failure is reported, the others go on
        result.status, result.reason = "failed", f"{type(err).__name__}: {err}"
        log(traceback.format_exc())
    result.seconds = time.perf_counter() - started
    return result


def _run_parts(
    ctx: Context,
    chosen: Sequence[Tuple[str, str, Callable]],
    jobs: int,
    log: Callable,
    quiet: bool = False,
) -> Dict[str, PartResult]:
    """Every chosen part, one after another; with ``jobs`` > 1 that many side by side (in
    threads: a part mostly waits for its compilers, QEMU or TVM's servers), and meanwhile
    the parts marked ``alone`` one after another in a process of their own, whose
    descriptors, children and children's CPU time are theirs only."""
    if jobs <= 1:
        return {name: _run_part(ctx, name, title, func, log) for name, title, func in chosen}
    alone = {part.name for part in REGISTERED if part.alone}
    apart = [name for name, _, _ in chosen if name in alone]
    process = _start_apart(ctx, apart, quiet) if apart else None
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run_part, ctx, *p, log) for p in chosen if p[0] not in alone]
            done = {future.result().name: future.result() for future in futures}
    except BaseException:
        if process is not None:
            process.kill()
            process.wait()
        raise
    if process is not None:
        done.update(_finish_apart(ctx, process, [p for p in chosen if p[0] in alone]))
    return done


def _start_apart(ctx: Context, names: List[str], quiet: bool) -> subprocess.Popen:
    argv = [sys.executable, str(Path(__file__).resolve()), "--only", ",".join(names)]
    argv += ["--json", str(ctx.work / "apart.json"), "--work", str(ctx.work / "apart")]
    argv += ["--smoke"] * ctx.smoke + ["--quiet"] * quiet
    # Its tables are printed here, with the others'; its progress lines go to stderr.
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def _finish_apart(
    ctx: Context, process: subprocess.Popen, parts: Sequence[Tuple[str, str, Callable]]
) -> Dict[str, PartResult]:
    status = process.wait()
    try:
        found = json.loads((ctx.work / "apart.json").read_text())["parts"]
    except (OSError, ValueError, KeyError):
        found = {}
    done = {}
    for name, title, _ in parts:
        if name in found:
            done[name] = PartResult(**found[name])
        else:
            reason = f"its process (bench/run.py --only {name}) ended with status {status}"
            done[name] = PartResult(name, title, status="failed", reason=reason)
    return done


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="smallest inputs, seconds")
    parser.add_argument("--json", type=Path, help=f"write results here (default {DEFAULT_JSON})")
    parser.add_argument("--only", help="comma-separated parts: " + ",".join(p[0] for p in PARTS))
    parser.add_argument("--work", type=Path, help="scratch directory (kept; default: a temp dir)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="parts run side by side (figures then share the machine: for --smoke; parts "
        "that read the whole process run in a process of their own)",
    )
    args = parser.parse_args(argv)
    chosen = [p for p in PARTS if not args.only or p[0] in args.only.split(",")]
    if args.only and len(chosen) != len(set(args.only.split(","))):
        parser.error(f"unknown part in --only {args.only}")
    # Every project compiles its own runtime (sizes come from its objects, build times are
    # comparable across runs); part 17 measures the shared runtime cache on purpose.
    os.environ["MLF_PROJECT_RUNTIME_CACHE"] = "off"

    def log(message: str) -> None:
        if not args.quiet:
            print(f"[bench] {message}", file=sys.stderr, flush=True)

    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        work = args.work.resolve()
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="mlf-bench-")
        work = Path(cleanup.name)
    ctx = Context(smoke=args.smoke, work=work, log=log)
    began = time.perf_counter()
    try:
        done = _run_parts(ctx, chosen, args.jobs, log, args.quiet)
    finally:
        if cleanup is not None:
            cleanup.cleanup()
    results = {name: done[name] for name, _, _ in chosen}
    document = {
        "smoke": args.smoke,
        "seconds": round(time.perf_counter() - began, 2),
        "environment": environment(),
        "parts": {name: r.to_json() for name, r in results.items()},
        "targets": targets(results),
    }
    for name, result in results.items():
        print(f"\n== {result.title} [{result.status}, {result.seconds:.1f} s]")
        if result.reason:
            print(f"   {result.reason}")
        if result.rows:
            print(table(result.rows, COLUMNS[name]))
        for skipped in result.skipped:
            print(f"   skipped: {skipped}")
        shown = {k: v for k, v in result.summary.items() if not isinstance(v, (dict, list))}
        if shown:
            print("   " + ", ".join(f"{k}={_cell(v)}" for k, v in shown.items()))
    print("\n== targets")
    print(table(document["targets"], ["target", "figure", "status"]))
    out = args.json or DEFAULT_JSON
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {out} ({document['seconds']:.1f} s)")
    return 1 if any(r.status == "failed" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
