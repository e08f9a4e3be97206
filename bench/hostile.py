"""Part 8: hostile archives, each accepted or refused within 2 s and 256 MB of RSS; hostile
text, each pattern and reader through it within 2 s.

Every archive case is a file of at most 10 MB, built here, and read by ``mlf-project info``
in a child process; the time is wall-clock and the RSS is the child's peak (``wait4``).
The text cases are tests/text_bounds.py's (every regular expression that reads an archive's,
a dependency's or a tool's text, and the readers built on them, against 1 MiB lines, 10 M
braces, comment runs and each pattern's near miss), run in this process: wall-clock and CPU
seconds each (``--smoke``: one in 50).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from bench.common import REPO_ROOT, Context, Part, PartResult, Skip, Target, corpus_dir

SECONDS_BOUND = 2.0
RSS_BOUND_MB = 256.0
FILE_BOUND = 10 << 20
TIMEOUT = 60.0
_ZEROS = bytes(1 << 20)
_PARAMS_MAGIC = 0xF7E58D4F05049CB7
_TENSOR_MAGIC = 0xDD5E40F096B4A13F

Builder = Callable[[Path], None]


def _tar_bytes(members: List[Tuple[str, bytes]], version: int = 5) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _write_tar(path: Path, members: List[Tuple[str, bytes]], gz: bool = False) -> None:
    data = _tar_bytes(members)
    path.write_bytes(gzip.compress(data, 6) if gz else data)


def _metadata(**extra: object) -> bytes:
    """A metadata.json good enough to get past its own checks."""
    meta: Dict[str, object] = {
        "version": 5,
        "model_name": "m",
        "export_datetime": "2020-01-01 00:00:00Z",
        "memory": {"functions": {"main": []}},
        "target": {"1": "c"},
        "runtimes": ["crt"],
        "executors": ["graph"],
        "style": "full-model",
    }
    meta.update(extra)
    return json.dumps(meta).encode()


def _gzip_of_zeros(count_mib: int) -> bytes:
    """``count_mib`` MiB of zeros as concatenated gzip members (a gzip reader inflates all)."""
    one = gzip.compress(_ZEROS, 9)
    return one * count_mib


def gzip_bomb(path: Path) -> None:
    """metadata.json declared and inflating to 2 GiB (a 2 MB file)."""
    size = 2 << 30
    info = tarfile.TarInfo("metadata.json")
    info.size = size
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    path.write_bytes(gzip.compress(header) + _gzip_of_zeros(size >> 20))


def content_bomb(path: Path) -> None:
    """300 sources of 1 MiB of zeros: each under its cap, together past the archive's."""
    members = [("metadata.json", _metadata())]
    members += [(f"codegen/host/src/lib{i}.c", _ZEROS) for i in range(300)]
    _write_tar(path, members, gz=True)


def big_aot_sources(path: Path) -> None:
    """kws_int8_aot with 60 MiB of comment in its sources: under every cap, so it is read."""
    members = _corpus("aot/kws_int8_aot.tar")
    filler = b"/*" + b" " * (15 << 20) + b"*/\n"
    members += [(f"codegen/host/src/kws_lib{i}.c", filler) for i in range(2, 6)]
    _write_tar(path, members, gz=True)


def many_members(path: Path) -> None:
    """100,000 empty members."""
    members = [("metadata.json", _metadata())]
    members += [(f"codegen/host/src/f{i}.c", b"") for i in range(100_000)]
    _write_tar(path, members, gz=True)


def pax_bomb(path: Path) -> None:
    """A pax header record that declares 1 GiB (tarfile would read it whole)."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = tarfile.XHDTYPE
    info.size = 1 << 30
    header = info.tobuf(format=tarfile.USTAR_FORMAT)
    path.write_bytes(gzip.compress(header) + _gzip_of_zeros(1024))


def _corpus(name: str) -> List[Tuple[str, bytes]]:
    """The regular-file members of a corpus archive, names without "./"."""
    path = corpus_dir() / name
    if not path.is_file():
        raise Skip(f"{path} is not here")
    members = []
    with tarfile.open(path) as tar:
        for info in tar:
            stream = tar.extractfile(info) if info.isreg() else None
            if stream is not None:
                members.append((info.name.removeprefix("./"), stream.read()))
    return members


def _replaced(members: List[Tuple[str, bytes]], suffix: str, data: bytes) -> list:
    return [(n, data if n.endswith(suffix) else d) for n, d in members]


def deep_metadata(path: Path) -> None:
    depth = 400_000  # 800 KB: under the metadata cap, so the decoder meets it
    _write_tar(path, [("metadata.json", b"[" * depth + b"]" * depth)], gz=True)


def deep_graph(path: Path) -> None:
    graph = b'{"nodes": ' + b"[" * 1_500_000 + b"]" * 1_500_000 + b"}"
    _write_tar(path, _replaced(_corpus("kws_int8.tar"), ".graph", graph), gz=True)


def huge_shapes(path: Path) -> None:
    """kws_int8 whose graph gives its input 2^62 elements."""
    members = _corpus("kws_int8.tar")
    graph = json.loads(dict(members)["executor-config/graph/kws.graph"])
    graph["attrs"]["shape"][1][0] = [1 << 31, 1 << 31]
    _write_tar(path, _replaced(members, ".graph", json.dumps(graph).encode()), gz=True)


def huge_params(path: Path) -> None:
    """kws_int8 whose params declare a tensor of 2^40 x 2^40 elements in 100 bytes."""
    params = struct.pack("<QQQ", _PARAMS_MAGIC, 0, 1) + struct.pack("<Q", 1) + b"w"
    params += struct.pack("<QQQ", 1, _TENSOR_MAGIC, 0) + struct.pack("<iii", 1, 0, 2)
    params += struct.pack("<BBH", 2, 32, 1) + struct.pack("<qqq", 1 << 40, 1 << 40, 1 << 62)
    _write_tar(path, _replaced(_corpus("kws_int8.tar"), ".params", params), gz=True)


def many_nodes(path: Path) -> None:
    """kws_int8 with a graph.json of 1.4 M empty nodes (4 MB, just under its cap)."""
    nodes = b'{"nodes": [' + b",".join([b"{}"] * 1_398_000) + b"]}"
    _write_tar(path, _replaced(_corpus("kws_int8.tar"), ".graph", nodes), gz=True)


def many_names(path: Path) -> None:
    """kws_int8 whose params declare 2^63 names."""
    params = struct.pack("<QQQ", _PARAMS_MAGIC, 0, 1 << 63) + bytes(64)
    _write_tar(path, _replaced(_corpus("kws_int8.tar"), ".params", params), gz=True)


def aot_header(path: Path) -> None:
    """kws_int8_aot whose header and sources repeat the entry point's name a million times."""
    run = b"tvmgen_kws_run(" * 1_000_000
    members = _replaced(_corpus("aot/kws_int8_aot.tar"), "tvmgen_kws.h", run)
    members = _replaced(members, "kws_lib1.c", run + b")" * 1_000_000)
    _write_tar(path, members, gz=True)


CASES: List[Tuple[str, Builder]] = [
    ("gzip bomb: metadata.json of 2 GiB", gzip_bomb),
    ("300 MiB of sources", content_bomb),
    ("100,000 members", many_members),
    ("AOT sources of 60 MiB (under the caps)", big_aot_sources),
    ("pax header of 1 GiB", pax_bomb),
    ("metadata.json nested 400,000 deep", deep_metadata),
    ("graph.json nested 1.5 M deep", deep_graph),
    ("graph input of 2^62 elements", huge_shapes),
    ("params tensor of 2^142 elements", huge_params),
    ("graph.json of 1.4 M nodes", many_nodes),
    ("params declaring 2^63 names", many_names),
    ("AOT header/source of repeated entry points", aot_header),
]


# A small process that runs the reader and reports its peak RSS: forked from us directly, the
# reader would inherit (and report) our own high-water mark.
_LAUNCHER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[2]] + sys.argv[3:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"status": os.waitstatus_to_exitcode(status), "rss_kb": usage.ru_maxrss}, out)
"""
_ENTRY = "import sys; from project_api.cli import main; sys.exit(main())"


def _child_env() -> Dict[str, str]:
    """The benchmark's environment, but letting Python cache our modules' bytecode: with
    ``PYTHONDONTWRITEBYTECODE`` set (some CI images do) every case would also time compiling
    the package, ~0.4 s, which an installed package never pays."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(archive: Path, work: Path) -> Dict[str, object]:
    """``mlf-project info archive`` in a child: status, last line of stderr, seconds, RSS."""
    report, out_path, err_path = work / "report.json", work / "stdout", work / "stderr"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        start = time.perf_counter()
        try:
            subprocess.run(
                [sys.executable, "-c", _LAUNCHER, str(report), _ENTRY, "info", str(archive)],
                stdout=out,
                stderr=err,
                check=True,
                timeout=TIMEOUT,
                start_new_session=True,
                env=_child_env(),
            )
        except subprocess.TimeoutExpired:
            return {
                "status": None,
                "answer": f"no answer within {TIMEOUT} s",
                "traceback": False,
                "seconds": TIMEOUT,
                "rss_mb": 0.0,
            }
        seconds = time.perf_counter() - start
    child = json.loads(report.read_text())
    errors = err_path.read_text("utf-8", "replace")
    lines = errors.strip().splitlines() or out_path.read_text().strip().splitlines()[:1]
    return {
        "status": child["status"],
        "answer": (lines[-1] if lines else "")[:160],
        "traceback": "Traceback" in errors,
        "seconds": round(seconds, 3),
        "rss_mb": round(child["rss_kb"] / 1024, 1),
    }


def _text_bounds() -> Any:
    """tests/text_bounds.py: the text cases, shared with tests/test_text_bounds.py."""
    tests = str(REPO_ROOT / "tests")
    if tests not in sys.path:
        sys.path.append(tests)
    import text_bounds

    return text_bounds


def run_text_cases(ctx: Context, result: PartResult) -> None:
    """Each text case's wall-clock and CPU seconds, one row and one log line each."""
    bounds = _text_bounds()
    cases = bounds.cases()
    for case in cases[:: 50 if ctx.smoke else 1]:
        text = case.make()
        wall, cpu = time.perf_counter(), time.process_time()
        case.apply(text)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        row: Dict[str, object] = {
            "kind": "text",
            "case": case.name,
            "file_bytes": len(text),
            "seconds": round(wall, 3),
            "cpu_seconds": round(cpu, 3),
            "within_bounds": wall <= bounds.SECONDS,
        }
        ctx.log(f"  {case.name}: {wall:.3f} s (CPU {cpu:.3f} s)")
        result.rows.append(row)


def run(ctx: Context, result: PartResult) -> None:
    work = ctx.scratch("hostile")
    cases = list(CASES)
    reference = corpus_dir() / "kws_int8.tar"

    def copy_reference(path: Path) -> None:
        path.write_bytes(reference.read_bytes())

    if reference.is_file():
        cases.insert(0, ("a real archive (kws_int8)", copy_reference))
        if not ctx.smoke:
            measure(reference, work)  # unmeasured: Python caches the package's bytecode first
    for name, build in cases:
        path = work / f"case{len(result.rows)}.tar"
        build(path)
        size = path.stat().st_size
        row: Dict[str, object] = {
            "kind": "archive",
            "case": name,
            "file_bytes": size,
            **measure(path, work),
        }
        row["within_bounds"] = bool(
            size <= FILE_BOUND
            and float(row["seconds"]) <= SECONDS_BOUND  # type: ignore[arg-type]
            and float(row["rss_mb"]) <= RSS_BOUND_MB  # type: ignore[arg-type]
            and not row["traceback"]
            and row["status"] in (0, 2)
        )
        ctx.log(f"  {name}: {row['answer']} ({row['seconds']} s, {row['rss_mb']} MB)")
        result.rows.append(row)
        path.unlink()
    archives = list(result.rows)
    run_text_cases(ctx, result)
    texts = result.rows[len(archives) :]
    seconds = [float(r["seconds"]) for r in texts]  # type: ignore[arg-type]
    slowest = texts[seconds.index(max(seconds))]
    result.summary = {
        "cases": len(archives),
        "max_seconds": max(r["seconds"] for r in archives),
        "max_rss_mb": max(r["rss_mb"] for r in archives),
        "target_met": all(r["within_bounds"] for r in archives),
        "text_cases": len(texts),
        "text_max_seconds": slowest["seconds"],
        "text_slowest": slowest["case"],
        "text_seconds_total": round(sum(seconds), 1),
        "text_target_met": all(r["within_bounds"] for r in texts),
    }


PART = Part(
    "hostile",
    "8. hostile archives and text: answered within 2 s and 256 MB; every pattern within 2 s",
    run,
    columns=[
        "case",
        "file_bytes",
        "status",
        "seconds",
        "cpu_seconds",
        "rss_mb",
        "within_bounds",
        "answer",
    ],
    targets=[
        Target(
            "every hostile archive <= 10 MB answered in <= 2 s and <= 256 MB RSS",
            lambda h: (
                f"{h['cases']} cases, slowest {h['max_seconds']:.2f} s, "
                f"peak {h['max_rss_mb']:.0f} MB"
            ),
            "target_met",
        ),
        Target(
            "every pattern and reader over hostile text (1 MiB lines, 10 M braces, comment "
            "runs, near misses) in <= 2 s",
            lambda h: (
                f"{h['text_cases']} cases, slowest {h['text_max_seconds']:.2f} s "
                f"({h['text_slowest']})"
            ),
            "text_target_met",
        ),
    ],
)
