"""A short libFuzzer smoke run of the runtime's two parsers (graph.json and params blobs),
seeded with the hand-written test graphs and, when present, the real corpus archives, and of
the firmware's MLPerf Tiny command interpreter (seeded with benchmark sessions).

Long runs are done by hand: build crt/tests with CC=clang -DMLF_CRT_FUZZ=ON, then
``fuzz_graph_json -max_total_time=600 CORPUS SEEDS`` (see the crt report for results).
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator

import pytest
from conftest import REPO_ROOT, corpus_archives

CRT_TESTS = REPO_ROOT / "crt" / "tests"
SECONDS = 5
# fuzz_mlperftiny inputs: a setting byte (model, dequantize, energy mode, ...), then the bytes
# of a benchmark session.
MLPERFTINY_SEEDS = {
    "session": b"\x00name%profile%db load 5%db 0102030405%infer 2 1%results%db print%help%"
    b"mlf-ticks on%timestamp%",
    "float": b"\x05db load 16%db 0000803f00000040%db 0000404000008040%infer%results%",
    "two_inputs": b"\x06db load 6%db 010203 040506%infer 3 0%",
    "energy_fail": b"\x1bdb load 2%db ff%db 00%infer 1 1%timestamp%",
    "hostile": b"\x40db load 99999999999%db zz%" + b"x" * 200 + b"%infer 0%results%db 0%",
}


def _libfuzzer_works(work: Path) -> bool:
    probe = work / "probe.c"
    probe.write_text(
        "#include <stddef.h>\n#include <stdint.h>\n"
        "int LLVMFuzzerTestOneInput(const uint8_t* d, size_t n) { (void)d; (void)n; return 0; }\n"
    )
    result = subprocess.run(
        ["clang", "-fsanitize=fuzzer,address,undefined", str(probe), "-o", str(work / "probe")],
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


@pytest.fixture(scope="session")
def fuzz_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("clang") is None or shutil.which("cmake") is None:
        pytest.skip("needs clang (with libFuzzer) and cmake: apt-get install clang")
    work = tmp_path_factory.mktemp("fuzz")
    if not _libfuzzer_works(work):
        pytest.skip("clang cannot link -fsanitize=fuzzer (libFuzzer missing)")
    build = work / "build"
    configure = [
        "cmake",
        "-S",
        str(CRT_TESTS),
        "-B",
        str(build),
        "-DCMAKE_C_COMPILER=clang",
        "-DMLF_CRT_FUZZ=ON",
        "-DMLF_CRT_TESTS=OFF",
    ]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    for command in (configure, ["cmake", "--build", str(build), "--parallel"]):
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
    return build


@pytest.fixture(scope="session")
def seeds(fuzz_build: Path) -> Path:
    """Seed corpora made now (never committed): the test graphs and blobs, plus the real
    archives' graph.json and params files when the corpus is around."""
    root = fuzz_build.parent / "seeds"
    (root / "graph").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "mlperftiny").mkdir()
    for name, session in MLPERFTINY_SEEDS.items():
        (root / "mlperftiny" / name).write_bytes(session)
    subprocess.run([str(fuzz_build / "make_seeds"), str(root)], check=True)
    for archive in corpus_archives():
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                kind = (
                    "graph"
                    if member.name.endswith((".graph", "graph.json"))
                    else "params"
                    if member.name.endswith(".params")
                    else None
                )
                data = tar.extractfile(member) if kind and member.isfile() else None
                if kind and data is not None:
                    name = f"{archive.stem}_{Path(member.name).name}"
                    (root / kind / name).write_bytes(data.read())
    return root


FUZZERS = {
    "fuzz_graph_json": "graph",
    "fuzz_params": "params",
    "fuzz_mlperftiny": "mlperftiny",
    "fuzz_utvm": "utvm",
}


@dataclass(frozen=True)
class FuzzRun:
    result: subprocess.CompletedProcess
    artifacts: Path


def _fuzz(fuzzer: Path, seeds: Path, work: Path) -> FuzzRun:
    corpus = work / "corpus"
    corpus.mkdir()
    kind = FUZZERS[fuzzer.name]
    dictionary = CRT_TESTS / f"{kind}.dict"
    result = subprocess.run(
        [
            str(fuzzer),
            f"-max_total_time={SECONDS}",
            "-max_len=65536",
            "-print_final_stats=1",
            f"-artifact_prefix={work}/",
            *([f"-dict={dictionary}"] if dictionary.is_file() else []),
            str(corpus),
            str(seeds / kind),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=SECONDS + 120,
    )
    return FuzzRun(result, work)


@pytest.fixture(scope="module")
def fuzz_runs(
    request: pytest.FixtureRequest,
    fuzz_build: Path,
    seeds: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Dict[str, Future[FuzzRun]]]:
    """The selected targets' runs, all started when the first test asks, two at a time: a
    fuzzer is single-threaded, so each still has a core for its SECONDS, as when run alone,
    while the suite's wall time pays for two runs at once."""
    selected = [
        item.callspec.params["target"]
        for item in request.session.items
        if item.module is request.module and getattr(item, "originalname", "") == "test_fuzz_smoke"
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {
            target: pool.submit(_fuzz, fuzz_build / target, seeds, tmp_path_factory.mktemp(target))
            for target in FUZZERS
            if target in selected
        }


@pytest.mark.parametrize("target", list(FUZZERS))
def test_fuzz_smoke(fuzz_runs: Dict[str, Future[FuzzRun]], target: str) -> None:
    run = fuzz_runs[target].result()
    assert run.result.returncode == 0, run.result.stderr[-4000:]
    assert not list(run.artifacts.glob("crash-*")), run.result.stderr[-4000:]
    assert "stat::number_of_executed_units" in run.result.stderr
