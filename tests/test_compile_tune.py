"""How ``compile`` chooses each operator's kernel form: rules, ``--tune`` and force.

The rules table (compile/rules/forms.json) decides without measuring, and a table that says
otherwise changes the recorded choice (the control). ``--tune`` measures on one QEMU board
(qemu-mps2-an386, CMSIS-NN v7.0.0 beside our C) a tiny chain whose operators go different
ways, picks the fewer instructions for each, and a second run builds nothing, hits the cache
and writes the same choice. FULLY_CONNECTED on CMSIS-NN rounds otherwise than LiteRT: it is
never a candidate, only forced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest
from compile_cases import tiny_model
from conftest import CMSIS_NN_SKIP, REPO_ROOT, cmsis_nn, cmsis_nn_given, requires_arm

from project_api.compile import CmsisNnSource, compile_tflite, read_tflite
from project_api.compile.choose import (
    candidates,
    choose_forms,
    cpu_class,
    load_rules,
    signature,
)
from project_api.compile.forms import CMSIS_NN_DEPENDENCY
from project_api.compile.tune import Tuning, tune_forms
from project_api.errors import CompileError
from project_api.read.kernel_forms import describe_why

BOARD = "qemu-mps2-an386"
TAG = CMSIS_NN_DEPENDENCY["version_spec"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tune") / "tiny.tflite"
    path.write_bytes(tiny_model())
    return path


def _kernels(archive: Path) -> Dict[str, Any]:
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("kernels.json"))
        handle = tar.extractfile(member)
        assert handle is not None
        return json.loads(handle.read())  # type: ignore[no-any-return]


# --- rules, without measuring ---------------------------------------------------------------


def test_rules_decide_and_a_table_that_says_otherwise_changes_the_choice(tiny: Path) -> None:
    model = read_tflite(tiny)
    conv = model.operators[0]
    assert conv.name == "CONV_2D"
    plan = choose_forms(model, cmsis_nn=True, cpu="cortex-m-dsp")
    assert plan.wanted[0] == "cmsis-nn"
    assert plan.why[0] == {"by": "rule", "rule": "default/CONV_2D", "cpu": "cortex-m-dsp"}
    # the control: a table whose class rule says ref, then one whose shape rule does
    by_kind = {"classes": {"cortex-m-dsp": {"operators": {"CONV_2D": {"form": "ref"}}}}}
    plan = choose_forms(model, cmsis_nn=True, cpu="cortex-m-dsp", rules=by_kind)
    assert plan.wanted[0] == "ref" and plan.why[0]["rule"] == "cortex-m-dsp/CONV_2D"
    sig = signature(model, conv)
    rule = {"form": "ref", "instructions": {"ref": 1}}
    conv_rules = {"CONV_2D": {"form": "cmsis-nn", "signatures": {sig: rule}}}
    shaped = {"classes": {"cortex-m-dsp": {"operators": conv_rules}}}
    plan = choose_forms(model, cmsis_nn=True, cpu="cortex-m-dsp", rules=shaped)
    assert plan.wanted[0] == "ref" and plan.why[0]["rule"] == f"cortex-m-dsp/CONV_2D/{sig}"
    # another class is not touched by that table's rules
    assert choose_forms(model, cmsis_nn=True, cpu="cortex-m3", rules=by_kind).wanted[0] == "ref"
    assert choose_forms(model, cmsis_nn=True, cpu="cortex-m3").wanted[0] == "cmsis-nn"
    # without --cmsis-nn, ref is the one candidate
    assert choose_forms(model, cpu="cortex-m-dsp").why[0]["by"] == "only"


def test_the_measured_rules_of_kws_follow_the_cpu() -> None:
    """The package's table holds KWS's layers as measured per CPU class: its AVERAGE_POOL_2D
    is faster in our C on the Cortex-M3 and M4, in CMSIS-NN on the M55 (bench/README.md)."""
    kws = REPO_ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"
    if not kws.is_file():
        pytest.skip(f"needs {kws}")
    model = read_tflite(kws)
    pool = next(op.index for op in model.operators if op.name == "AVERAGE_POOL_2D")
    forms = {}
    for cpu in ("default", "cortex-m3", "cortex-m-dsp", "cortex-m-mve"):
        plan = choose_forms(model, cmsis_nn=True, cpu=cpu)
        forms[cpu] = plan.wanted[pool]
        assert plan.why[pool]["by"] == "rule"
        if cpu != "default":
            assert plan.why[pool]["rule"].startswith(f"{cpu}/AVERAGE_POOL_2D/AVERAGE_POOL_2D:")
            counts = plan.why[pool]["instructions"]
            assert forms[cpu] == min(counts, key=counts.__getitem__)
    assert forms == {"default": "cmsis-nn", "cortex-m3": "ref", "cortex-m-dsp": "ref",
                     "cortex-m-mve": "cmsis-nn"}  # fmt: skip


def test_the_package_table_and_cpu_classes() -> None:
    from project_api.board import load_board

    assert load_rules()["format"] == 1
    assert cpu_class() == "default"
    assert cpu_class(load_board("host")) == "plain"
    assert cpu_class(load_board("qemu-mps2-an385")) == "cortex-m3"
    assert cpu_class(load_board(BOARD)) == "cortex-m-dsp"
    assert cpu_class(load_board("qemu-mps3-an547")) == "cortex-m-mve"
    assert cpu_class(load_board("qemu-riscv32")) == "riscv"
    assert cpu_class(cpu="cortex-m0plus") == "cortex-m0"


def test_only_exact_forms_are_candidates(tiny: Path) -> None:
    model = read_tflite(tiny)
    fc = next(op for op in model.operators if op.name == "FULLY_CONNECTED")
    # CMSIS-NN rounds it twice: never a candidate; our exact dot products are
    assert candidates(model, fc, cmsis_nn=True) == ["ref", "dot"]
    plan = choose_forms(model, cmsis_nn=True, forced={"FULLY_CONNECTED": "cmsis-nn"},
                        measured={fc.index: {"ref": 1, "dot": 2}})  # fmt: skip
    assert plan.wanted[fc.index] == "cmsis-nn" and plan.why[fc.index]["by"] == "forced"


def test_tune_on_a_board_qemu_cannot_count_is_one_line(tiny: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "project_api", "compile", str(tiny), str(tmp_path / "t.tar"),
         "--tune", "host"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "QEMU" in done.stderr
    assert not (tmp_path / "t.tar").exists()


# --- --tune under QEMU -icount --------------------------------------------------------------


@pytest.fixture(scope="module")
def cmsis_v7(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not cmsis_nn_given():
        pytest.skip(CMSIS_NN_SKIP)
    source = cmsis_nn()
    if source.tree is not None:
        return source.tree
    assert source.git_url is not None
    tree = tmp_path_factory.mktemp("cmsis-v7") / "CMSIS-NN"
    subprocess.run(
        ["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1",
         "--branch", TAG, source.git_url, str(tree)],
        check=True, capture_output=True,
    )  # fmt: skip
    return tree


@pytest.fixture(scope="module")
def tuned(
    tiny: Path, cmsis_v7: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Tuning, Path, Path, CmsisNnSource]]:
    work = tmp_path_factory.mktemp("tuned")
    source = CmsisNnSource(cmsis_path=str(cmsis_v7))
    # the cache where the CLI looks with $MLF_PROJECT_CACHE=work/mlf-cache
    tuning = tune_forms(tiny, BOARD, cmsis_nn=True, source=source,
                        cache_dir=work / "mlf-cache" / "tune")  # fmt: skip
    archive = compile_tflite(tiny, work / "tuned.tar", cmsis_nn=True, source=source,
                             cpu="cortex-m-dsp", measured=tuning.measured,
                             measured_on=BOARD)  # fmt: skip
    yield tuning, archive, work, source


@pytest.mark.qemu
@requires_arm
def test_tune_picks_the_form_measured_faster(
    tuned: Tuple[Tuning, Path, Path, CmsisNnSource], tiny: Path
) -> None:
    tuning, archive, _, _ = tuned
    assert tuning.builds == ["ref", "cmsis-nn", "dot"] and tuning.cached == 0
    model = read_tflite(tiny)
    between = {op.index for op in model.operators if len(candidates(model, op, cmsis_nn=True)) > 1}
    assert set(tuning.measured) == between and len(between) >= 2
    recorded = {op["index"]: op for op in _kernels(archive)["operators"]}
    for index, counts in tuning.measured.items():
        op = next(op for op in model.operators if op.index == index)
        assert set(counts) == set(candidates(model, op, cmsis_nn=True))
        assert all(n > 0 for n in counts.values())
        faster = min(counts, key=lambda f: (counts[f], f != "ref"))
        assert recorded[index]["form"] == faster, (index, counts)
        assert recorded[index]["why"]["by"] == "tuned"
        assert recorded[index]["why"]["instructions"] == counts
        assert recorded[index]["why"]["board"] == BOARD
        assert "instructions" in describe_why(recorded[index]["why"])
    # the measurement decides: here the rule (CMSIS-NN for every kind it takes) is not what
    # every operator measured fastest, so the tuned choice differs from the untuned one
    ruled = choose_forms(model, cmsis_nn=True, cpu="cortex-m-dsp").wanted
    assert any(recorded[i]["form"] != ruled[i] for i in between), tuning.measured


@pytest.mark.qemu
@requires_arm
def test_second_tune_hits_the_cache_and_chooses_the_same(
    tuned: Tuple[Tuning, Path, Path, CmsisNnSource], tiny: Path
) -> None:
    first, archive, work, source = tuned
    start = time.perf_counter()
    again = tune_forms(tiny, BOARD, cmsis_nn=True, source=source,
                       cache_dir=work / "mlf-cache" / "tune")  # fmt: skip
    assert time.perf_counter() - start < 5.0
    assert again.builds == [] and again.fresh == 0
    assert again.cached == sum(len(c) for c in first.measured.values())
    assert again.measured == first.measured
    second = compile_tflite(tiny, work / "again.tar", cmsis_nn=True, source=source,
                            cpu="cortex-m-dsp", measured=again.measured,
                            measured_on=BOARD)  # fmt: skip
    assert _kernels(second) == _kernels(archive)


@pytest.mark.qemu
@requires_arm
def test_the_command_tunes_from_the_same_cache_and_info_says_why(
    tuned: Tuple[Tuning, Path, Path, CmsisNnSource], tiny: Path, cmsis_v7: Path
) -> None:
    first, archive, work, _ = tuned
    out = work / "cli.tar"
    done = subprocess.run(
        [sys.executable, "-m", "project_api", "compile", str(tiny), str(out), "--cmsis-nn",
         "--cmsis-path", str(cmsis_v7), "--tune", BOARD, "--json"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "MLF_PROJECT_CACHE": str(work / "mlf-cache")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["cpu"] == "cortex-m-dsp" and report["tune"]["builds"] == []
    assert report["tune"]["instructions"] == {str(i): c for i, c in first.measured.items()}
    assert _kernels(out) == _kernels(archive)
    shown = subprocess.run([sys.executable, "-m", "project_api", "info", str(out)],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"instructions on {BOARD}]" in shown.stdout and "[the only candidate" in shown.stdout


def test_tune_refuses_a_forced_form_before_it_builds(tmp_path: Path) -> None:
    """``--tune`` with ``--form`` that cannot take an operator is refused in compile's own
    line before anything is resolved or built: no progress line, no cache entry; the same
    model with a form it can take (the control) gets as far as its first progress line."""
    path = tmp_path / "tiny.tflite"
    path.write_bytes(tiny_model("int8"))
    said: list = []
    with pytest.raises(CompileError, match=r"operator \d+ \(SOFTMAX\): form loops takes"):
        tune_forms(path, "qemu-mps2-an386", cmsis_nn=True, forced={"SOFTMAX": "loops"},
                   source=CmsisNnSource(offline=True), progress=said.append,
                   cache_dir=tmp_path / "cache")  # fmt: skip
    assert said == [] and not (tmp_path / "cache").exists()
    tune_forms(path, "qemu-mps2-an386", forced={"CONV_2D": "loops"}, progress=said.append,
               cache_dir=tmp_path / "cache")  # fmt: skip
    assert said, "the control reached no progress line"
