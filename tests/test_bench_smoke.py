"""The benchmark suite's smoke run (bench/run.py --smoke): every benchmark function on the
smallest inputs, so the suite never rots. Figures are checked for sense, never for speed."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Dict, Optional

import pytest
from conftest import REPO_ROOT, have_tool

# bench/ is a tool of the checkout, not part of the package: found at the end of the path,
# so that project_api still comes from where the rest of the suite takes it (an install).
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))
from bench.common import PartResult, fit_line  # noqa: E402
from bench.compiled import TVM_ARCHIVES_ENV, against_tvm, tvm_archive  # noqa: E402
from bench.fuzz import log_figures  # noqa: E402
from bench.run import PARTS, table, targets  # noqa: E402

ARM_QEMU = have_tool("arm-none-eabi-gcc") and have_tool("qemu-system-arm")
HOST_CC = any(have_tool(cc) for cc in ("cc", "gcc", "clang"))


def test_fit_line_is_exact_on_a_line() -> None:
    fit = fit_line([0.0, 1.0, 4.0], [2.0, 2.5, 4.0])
    assert fit["slope"] == pytest.approx(0.5)
    assert fit["intercept"] == pytest.approx(2.0)
    assert fit["r2"] == pytest.approx(1.0)


def test_compiled_takes_tvm_archives_by_stem(tmp_path: Any, monkeypatch: Any) -> None:
    """Part 24 finds TVM's archive of a model by its .tflite's stem in MLF_BENCH_TVM_ARCHIVES
    (none there: none, not the corpus's), and sets the four figures side by side."""
    (tmp_path / "vww_96_int8.tar").write_bytes(b"")
    monkeypatch.setenv(TVM_ARCHIVES_ENV, str(tmp_path))
    assert tvm_archive("vww_96_int8") == tmp_path / "vww_96_int8.tar"
    assert tvm_archive("kws_ref_model") is None
    monkeypatch.delenv(TVM_ARCHIVES_ENV)
    assert tvm_archive("vww_96_int8") is None
    figures = {"instructions": 50, "flash_text_data_bytes": 30, "ram_bytes": 8, "arena_bytes": 4}
    rows = [
        {"source": "compile", "model": "m", "board": "qemu-mps2-an385", **figures},
        {"source": "compile", "model": "m", "board": "qemu-mps2-an386", **figures},
        {"source": "m.tar", "model": "m (TVM 0.14)", "board": "qemu-mps2-an385", "exact": True,
         "instructions": 40, "flash_text_data_bytes": 60, "ram_bytes": 16, "arena_bytes": 8},
    ]  # fmt: skip
    side = against_tvm(rows)["m"]
    assert side["instructions"] == [50, 40, 1.25] and side["ram_bytes"] == [8, 16, 0.5]
    assert side["faster"] is False and side["tvm_exact"] is True


def test_fuzz_figures_in_process_and_in_fork_mode() -> None:
    in_process = "#9000\tDONE   cov: 12 ft: 30 corp: 5/80b exec/s: 3000 rss: 40Mb\n"
    in_process += "stat::number_of_executed_units: 9000\nstat::average_exec_per_sec:     3000\n"
    in_process += "stat::peak_rss_mb:              40\n"
    assert log_figures(in_process) == {
        "coverage": 12, "features": 30, "corpus": 5, "executions": 9000,
        "exec_per_second": 3000, "seconds": 3, "peak_rss_mb": 40,
    }  # fmt: skip
    fork = "#48200: cov: 987 ft: 3284 corp: 189 exec/s 9634 oom/timeout/crash: 0/0/0 time: 3s"
    fork += " job: 2 dft_time: 0\nINFO: fuzzed for 48200 iterations, wrapping up soon\n"
    assert log_figures(fork) == {
        "coverage": 987, "features": 3284, "corpus": 189, "executions": 48200,
        "exec_per_second": 9634, "seconds": 3,
    }  # fmt: skip


def test_table_and_targets_without_results() -> None:
    text = table([{"a": 1234, "b": 0.5, "c": None, "d": True}], ["a", "b", "c", "d"])
    assert text.splitlines()[1].split() == ["1,234", "0.500", "-", "yes"]
    rows = targets({})
    assert len(rows) == 48 and {r["status"] for r in rows} == {"not run"}
    skipped = PartResult("dispatch", "t", status="skipped", reason="needs qemu-system-arm")
    assert targets({"dispatch": skipped})[2]["status"] == "skipped"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("bench")
    out = root / "smoke.json"
    # Its scratch directory is kept with the test's (as pytest keeps every tmp_path): removing
    # its ~10,000 files at the end took as long as a third of the run on an ext4 mounted with
    # discard.
    # Two parts at a time: most of a part waits for one compiler, QEMU or Python server.
    argv = ["--smoke", "--jobs", "2", "--json", str(out), "--work", str(root / "work")]
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "run.py"), *argv],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=str(REPO_ROOT),
        check=False,
    )
    print(done.stdout[-6000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    document: Dict[str, Any] = json.loads(out.read_text())
    return document


def test_every_part_ran_or_says_why(smoke: Dict[str, Any]) -> None:
    assert smoke["smoke"] is True
    assert list(smoke["parts"]) == [name for name, _, _ in PARTS]
    for name, part in smoke["parts"].items():
        assert part["status"] in ("ok", "skipped"), (name, part["reason"])
        if part["status"] == "skipped":
            assert part["reason"], name
    assert len(smoke["targets"]) == len(targets({}))


@pytest.mark.skipif(not ARM_QEMU, reason="needs arm-none-eabi-gcc and qemu-system-arm")
def test_device_parts(smoke: Dict[str, Any]) -> None:
    parts = smoke["parts"]
    for name in ("codesize", "ram", "dispatch", "params"):
        assert parts[name]["status"] == "ok", (name, parts[name]["reason"])
    code = parts["codesize"]["summary"]
    # The JSON parser only adds code; the empty firmware holds none of the runtime.
    assert 0 < code["runtime_text_tables"] < code["runtime_text_json"]
    assert parts["codesize"]["rows"][0]["runtime_code"] == 0
    ram_rows = {r["graph_format"]: r for r in parts["ram"]["rows"]}
    assert ram_rows["tables"]["graph_ram_bytes"] == 0
    assert ram_rows["json"]["graph_ram_bytes"] >= ram_rows["json"]["graph_measure_bytes"] > 0
    assert ram_rows["tables"]["pointer_bytes"] == 4
    (dispatch,) = parts["dispatch"]["rows"]
    assert dispatch["outputs_match"] and dispatch["quantum_instructions"] < 1.0
    assert dispatch["executor_instructions"] > dispatch["direct_instructions"] > 0
    (params,) = parts["params"]["rows"]
    assert params["params_ram_in_place"] == 0 < params["params_ram_copied"]
    assert params["copy_path_matches"]


@pytest.mark.skipif(not ARM_QEMU, reason="needs arm-none-eabi-gcc and qemu-system-arm")
def test_aot_part(smoke: Dict[str, Any]) -> None:
    """The AOT part measures the firmware against a bare call of tvmgen_<m>_run (where the
    corpus is here): both compute the same outputs, and ours costs a few instructions more."""
    part = smoke["parts"]["aot"]
    if part["status"] == "skipped":
        assert "corpus" in part["reason"]
        return
    assert part["status"] == "ok", part["reason"]
    for row in part["rows"]:
        assert row["outputs_match"] and row["executor"] == "aot"
        assert 0 <= row["overhead_instructions"] < 1000
        assert row["flash_bytes"] > 0 and row["ram_bytes"] > 0


@pytest.mark.skipif(not HOST_CC, reason="needs a host C compiler")
def test_host_parts(smoke: Dict[str, Any]) -> None:
    parts = smoke["parts"]
    assert parts["buildtime"]["status"] == "ok"
    sizes = [r["params_bytes"] for r in parts["buildtime"]["rows"]]
    assert sizes == sorted(sizes) and len(sizes) >= 2
    assert "slope_seconds_per_mib" in parts["buildtime"]["summary"]
    boards = [r["board"] for r in parts["streaming"]["rows"]]
    assert "host" in boards
    for row in parts["streaming"]["rows"]:
        assert row["upload_mb_s"] > 0 and row["download_mb_s"] > 0


def test_hostile_part(smoke: Dict[str, Any]) -> None:
    """Every hostile archive gets an answer: a one-line refusal (status 2) or a description,
    never a traceback (figures are the benchmark's business, not a test's)."""
    part = smoke["parts"]["hostile"]
    if part["status"] == "skipped" and part["reason"].endswith("is not here"):
        pytest.skip(f"the corpus is absent: {part['reason']}")
    assert part["status"] == "ok", part["reason"]
    archives = [row for row in part["rows"] if row["kind"] == "archive"]
    assert len(archives) >= 9
    for row in archives:
        assert row["status"] in (0, 2) and not row["traceback"], row
    texts = [row for row in part["rows"] if row["kind"] == "text"]
    assert len(texts) >= 10 and all(row["seconds"] >= 0 for row in texts)


def test_fuzz_and_soak_parts(smoke: Dict[str, Any]) -> None:
    """The smoke of the long runs: every fuzzer builds and runs without a crash; a short
    soak gets every reply right, keeps descriptors flat and leaves no child."""
    fuzz = smoke["parts"]["fuzz"]
    if fuzz["status"] == "skipped":
        assert "clang" in fuzz["reason"] or "libFuzzer" in fuzz["reason"]
    else:
        assert fuzz["status"] == "ok", fuzz["reason"]
        assert len(fuzz["rows"]) == 5 and fuzz["summary"]["crashes"] == 0
    soak = smoke["parts"]["soak"]
    if soak["status"] == "skipped":
        assert "corpus" in soak["reason"] or "is not here" in soak["reason"]
        return
    assert soak["status"] == "ok", soak["reason"]
    summary = soak["summary"]
    assert summary["all_correct"] and summary["children_left"] == 0
    assert summary["max_fd_growth"] <= 0


def _qemu_part(smoke: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    """A part that needs QEMU and the corpus: None when it was skipped for want of them."""
    part = smoke["parts"][name]
    if part["status"] == "skipped":
        assert "qemu" in part["reason"] or "corpus" in part["reason"]
        return None
    assert part["status"] == "ok", part["reason"]
    return part


def test_matrix_part(smoke: Dict[str, Any]) -> None:
    part = _qemu_part(smoke, "matrix")
    if part is None:
        return
    assert part["summary"]["same_table"]
    assert all(row["passed"] == row["cells"] for row in part["rows"])


def test_bare_part(smoke: Dict[str, Any]) -> None:
    """The bare program is a working program (its outputs equal the reference) and the
    firmware's excess over it is what the part reports."""
    part = _qemu_part(smoke, "bare")
    if part is None:
        return
    summary = part["summary"]
    assert summary["bare_outputs_match"]
    assert 0 < summary["bare_flash_bytes"] < summary["firmware_flash_bytes"]
    assert summary["flash_delta_bytes"] == (
        summary["firmware_flash_bytes"] - summary["bare_flash_bytes"]
    )


def test_export_part(smoke: Dict[str, Any]) -> None:
    """The exported library in a user firmware of bench's own: its outputs through the C API
    and through direct operator calls equal the reference (the CPU-specific and the portable
    export alike), and its figures add up (the targets are the benchmark's business)."""
    part = smoke["parts"]["export"]
    if part["status"] == "skipped":
        assert any(tool in part["reason"] for tool in ("arm-none-eabi", "qemu", "cmake"))
        return
    assert part["status"] == "ok", part["reason"]
    s = part["summary"]
    assert s["model"] == "mlp" and s["outputs_match"]
    assert s["library_ram_bytes"] >= s["arena_macro_bytes"] > 0
    assert s["ram_beyond_arena_bytes"] == s["library_ram_bytes"] - s["arena_macro_bytes"]
    assert s["flash_delta_bytes"] == s["library_flash_bytes"] - s["generated_flash_bytes"]
    assert 0 < s["direct_instructions"] <= s["run_instructions"]
    # the portable export in the same firmware (issue 44)
    assert s["portable_flash_delta_bytes"] == s["portable_flash_bytes"] - s["library_flash_bytes"]
    assert s["portable_ram_delta_bytes"] == s["portable_ram_bytes"] - s["library_ram_bytes"]
    assert s["portable_run_instructions"] > 0


def test_machines_part(smoke: Dict[str, Any]) -> None:
    """The smoke run measures mlp_default on every new machine whose tools are installed, each
    count exact (> 0) and bit-exact outputs (else the part fails)."""
    part = _qemu_part(smoke, "machines")
    if part is None:
        return
    rows = [row for row in part["rows"] if row["figure"] == "instructions"]
    assert rows and rows[0]["archive"] == "mlp_default"
    measured = [board for board in rows[0] if board.startswith("qemu-")]
    assert "qemu-mps3-an547" in measured and "qemu-netduinoplus2" in measured
    assert all(rows[0][board] > 0 for board in measured)


def test_trial_part(smoke: Dict[str, Any]) -> None:
    """AutoTVM trials through TVM's own client on the host, with and without the runtime
    cache (the figures are reported, not judged here)."""
    part = smoke["parts"]["trial"]
    if part["status"] == "skipped":
        assert "TVM" in part["reason"] or "board" in part["reason"]
        return
    assert part["status"] == "ok", part["reason"]
    (row,) = part["rows"]
    assert row["board"] == "host" and row["trials"] == 2
    assert row["cached_build_s"] > 0 and row["uncached_total_s"] > 0


def test_cmsis_nn_part(smoke: Dict[str, Any]) -> None:
    """The smoke of part 20: KWS with CMSIS-NN v7.0.0 on the M55, bit-exact, its count and the
    adapter's RAM reported (its kept kernel sums; its scratch in the windows of the arena)."""
    part = smoke["parts"]["cmsis_nn"]
    if part["status"] == "skipped":
        assert (
            "CMSIS-NN" in part["reason"] or "corpus" in part["reason"] or "qemu" in part["reason"]
        )
        return
    assert part["status"] == "ok", part["reason"]
    (row,) = part["rows"]
    assert (row["board"], row["cmsis_nn"], row["outcome"]) == ("qemu-mps3-an547", "v7.0.0", "exact")
    assert row["instructions"] > 0 and row["adapter_ram_bytes"] > 0
    assert row["window_scratch_bytes"] >= row["scratch_bytes"] > 0
    assert part["summary"]["exact_target_met"] and part["summary"]["wrong"] == []


def test_compile_cmsis_part(smoke: Dict[str, Any]) -> None:
    """The smoke of part 22's CMSIS-NN figures: KWS compiled with --cmsis-nn on the M55, equal
    to LiteRT's reference kernels, its instructions, flash and RAM measured."""
    part = smoke["parts"]["compile_cmsis"]
    if part["status"] == "skipped":
        assert any(word in part["reason"] for word in ("CMSIS-NN", "qemu", "needs"))
        return
    assert part["status"] == "ok", part["reason"]
    (row,) = part["rows"]
    assert (row["archive"], row["board"], row["exact"]) == (
        "compile --cmsis-nn",
        "qemu-mps3-an547",
        True,
    )
    assert row["instructions"] > 0 and row["flash_text_bytes"] > 0 and row["ram_bytes"] > 0
    # issue 43: at most 0.9x TFLM's instructions on the M55 (the direct form), exact
    assert part["summary"]["target_qemu-mps3-an547"], row["instructions"]


def test_compile_kws_part(smoke: Dict[str, Any]) -> None:
    """The smoke of part 22b: KWS compiled from its .tflite (timed as a command and in the
    process), the cached archive found, and that archive run on the an385 equal to LiteRT."""
    part = smoke["parts"]["compile_kws"]
    if part["status"] == "skipped":
        assert "shared" in part["reason"]
        return
    assert part["status"] == "ok", part["reason"]
    summary = part["summary"]
    assert 0 < summary["compile_in_process_s"] < summary["compile_command_s"]
    assert summary["cached_extra_ms_worst"] >= summary["cached_extra_ms_median"]
    if ARM_QEMU:
        (row,) = part["rows"]
        assert (row["archive"], row["board"]) == ("compiled graph", "qemu-mps2-an385")
        assert row["instructions"] > 0 and row["flash_text_data_bytes"] > row["ram_bytes"] > 0
        assert row["exact"] in (True, None)  # None: LiteRT (the test extra) is absent


def test_compiled_part(smoke: Dict[str, Any]) -> None:
    """The smoke of part 24: KWS compiled, on the an385 in plain C only (the CMSIS-NN cores are
    the full run's), equal to LiteRT, its RAM without the stack, which is its own column."""
    part = _qemu_part(smoke, "compiled")
    if part is None:
        return
    (row,) = part["rows"]
    assert (row["model"], row["board"], row["kernels"]) == (
        "kws_ref_model",
        "qemu-mps2-an385",
        "plain C",
    )
    assert row["exact"] in (True, None)  # None: LiteRT (the test extra) is absent
    assert row["instructions"] > 0 and row["flash_text_data_bytes"] > row["ram_bytes"] > 0
    assert row["ram_bytes"] >= row["arena_bytes"] > 0 and row["stack_bytes"] == 4096
    assert list(part["summary"]["kws_per_core"]) == ["qemu-mps2-an385"]


def test_tflm_names() -> None:
    """Part 25 names TFLM's resolver methods and kernel sources from the schema's names."""
    from bench.tflm import kernel_file, resolver_method

    assert [resolver_method(op) for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")] == [
        "AddConv2D",
        "AddDepthwiseConv2D",
        "AddFullyConnected",
    ]
    assert resolver_method("AVERAGE_POOL_2D") == "AddAveragePool2D"
    assert [kernel_file(op) for op in ("CONV_2D", "AVERAGE_POOL_2D", "SOFTMAX")] == [
        "conv",
        "pooling",
        "softmax",
    ]


def test_tflm_part(smoke: Dict[str, Any]) -> None:
    """The smoke of part 25: skipped with its one-line reason without a TFLM tree (CI has
    none); with one, KWS on the an385 under TFLM beside ours, both equal to LiteRT."""
    part = smoke["parts"]["tflm"]
    if part["status"] == "skipped":
        assert "TFLM" in part["reason"] or "needs" in part["reason"], part["reason"]
        assert "\n" not in part["reason"]
        return
    assert part["status"] == "ok", part["reason"]
    rows = {row["source"]: row for row in part["rows"]}
    assert set(rows) == {"ours", "tflm", "ours / TFLM"}
    tflm = rows["tflm"]
    assert (tflm["model"], tflm["board"]) == ("kws_ref_model", "qemu-mps2-an385")
    assert tflm["exact"] in (True, None) and tflm["ram_bytes"] >= tflm["arena_bytes"] > 0
    assert rows["ours / TFLM"]["instructions"] > 0


def test_tune_part(smoke: Dict[str, Any]) -> None:
    """The smoke of part 23: KWS tuned on the an386 (five firmwares: ref, cmsis-nn, direct,
    simd, dot), then again from the cache with nothing built and the same choice."""
    part = smoke["parts"]["tune"]
    if part["status"] == "skipped":
        assert "needs" in part["reason"]
        return
    assert part["status"] == "ok", part["reason"]
    (row,) = part["rows"]
    assert (row["board"], row["cpu"], row["builds"]) == ("qemu-mps2-an386", "cortex-m-dsp", 5)
    assert row["cached_builds"] == 0 and row["same_choice"] is True
    assert 0 < row["tuned_sum"] <= min(row["rules_sum"], row["untuned_sum"])
