"""The CPU features TVM generated CMSIS-NN calls for, and the CMSIS-NN build that follows.

TVM sizes CMSIS-NN scratch buffers for its target's ``-mcpu``/``-mattr`` (no ``-mcpu``: no
DSP, no MVE); CMSIS-NN picks its code from the compiler's ``__ARM_FEATURE_*`` macros. The
generator must build CMSIS-NN at the level TVM assumed, whatever the board could do. These
tests need neither a real CMSIS-NN nor a compiler: projects are generated, not built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import pytest

from project_api.board import load_board
from project_api.driver import Project
from project_api.errors import DependencyError
from project_api.modelgen import Network, emit
from project_api.resolve import (
    assumed_features,
    cmake_fragment,
    cmsis_nn_build,
    parse_dependency,
    parse_target,
    resolve_dependencies,
)


@pytest.mark.parametrize(
    "target, level",
    [
        ("c -keys=cpu -model=host", 0),
        ("cmsis-nn ", 0),
        ("c -keys=arm_cpu,cpu -mcpu=cortex-m0", 0),
        ("c -keys=arm_cpu,cpu -mcpu=cortex-m3", 0),
        ("c -keys=arm_cpu,cpu -mcpu=cortex-m4", 1),
        ("c -mcpu=cortex-m7 -model=stm32f746", 1),
        ("c -mcpu=cortex-m33", 1),
        ("c -mcpu=cortex-m55", 2),
        ("cmsis-nn -mcpu=cortex-m85", 2),
        ("c -mcpu=cortex-m55 -mattr=+nomve", 1),
        ("c -mcpu=cortex-m55+nodsp", 0),
        ("c -mcpu=cortex-m4 -mattr=+nodsp,+fp", 0),
        ("c -mcpu cortex-m4", 1),
    ],
)
def test_target_string_features(target: str, level: int) -> None:
    assert parse_target(target).level == level


def test_cmsis_nn_target_decides_before_the_c_target() -> None:
    features = assumed_features(["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m55"])
    assert features.level == 2 and features.mcpu == "cortex-m55"
    assert assumed_features(["c -mcpu=cortex-m7", "cmsis-nn "]).level == 1
    assert assumed_features({"1": "c -keys=cpu -model=host"}).level == 0  # MLF v5 shape
    assert assumed_features([]).level == 0


def board_cpu(name: str) -> object:
    return load_board(name).cpu


@pytest.mark.parametrize(
    "targets, board, level, flags",
    [
        # What the corpus archives hold: built portable on DSP cores.
        (["c -keys=cpu -model=host"], "qemu-mps2-an386", 0, ("-U__ARM_FEATURE_DSP",)),
        (["c -keys=cpu -model=host"], "qemu-mps2-an500", 0, ("-U__ARM_FEATURE_DSP",)),
        (["c -keys=cpu -model=host"], "qemu-mps2-an385", 0, ()),
        (["c -keys=cpu -model=host"], "host", 0, ()),
        # Generated for the board's own core: its native code.
        (["c -mcpu=cortex-m4"], "qemu-mps2-an386", 1, ()),
        # For an MVE core, run on a DSP core: MVE-sized buffers fit only the portable code.
        (["c -mcpu=cortex-m55"], "qemu-mps2-an386", 0, ("-U__ARM_FEATURE_DSP",)),
        # For a DSP core, run on a core without: nothing to take away.
        (["c -mcpu=cortex-m4"], "qemu-mps2-an385", 0, ()),
    ],
)
def test_cmsis_nn_build_level(targets: list, board: str, level: int, flags: tuple) -> None:
    built = cmsis_nn_build([("m", assumed_features(targets))], board_cpu(board), board)
    assert built.level == level
    assert built.flags == flags
    assert (built.reason is not None) == bool(flags)
    if flags:
        assert board in str(built.reason) and "model m:" in str(built.reason)


def test_mve_board_keeps_dsp_when_the_model_assumed_dsp() -> None:
    cpu = {"mcpu": "cortex-m55", "dsp": True, "mve": True}
    built = cmsis_nn_build([("m", assumed_features(["c -mcpu=cortex-m7"]))], cpu, "m55 board")
    assert built.flags == ("-U__ARM_FEATURE_MVE",) and built.name == "dsp"
    built = cmsis_nn_build([("m", assumed_features(["c"]))], cpu, "m55 board")
    assert built.flags == ("-U__ARM_FEATURE_DSP", "-U__ARM_FEATURE_MVE")


DSP_OFF = ("-U__ARM_FEATURE_DSP",)


@pytest.mark.parametrize(
    "targets, board, level, flags, scratch",
    [
        # The corpus archives (no -mcpu: empty contexts) with the adapter (crt/cmsis_nn):
        # each board's own kernels, the adapter supplying the memory.
        (["c -keys=cpu -model=host"], "qemu-mps2-an386", 1, (), True),
        (["c -keys=cpu -model=host"], "qemu-mps3-an547", 2, (), True),
        (["c -keys=cpu -model=host"], "qemu-mps2-an385", 0, (), False),
        (["c -mcpu=cortex-m55"], "qemu-mps3-an547", 2, (), False),
        (["c -mcpu=cortex-m4"], "qemu-mps3-an547", 2, (), True),
        # More assumed than the board has: the rule without the adapter (portable) applies.
        (["c -mcpu=cortex-m55"], "qemu-mps2-an386", 0, DSP_OFF, False),
    ],
)
def test_scratch_shim_builds_the_boards_own_level(
    targets: list, board: str, level: int, flags: tuple, scratch: bool
) -> None:
    assumed = [("m", assumed_features(targets))]
    built = cmsis_nn_build(assumed, board_cpu(board), board, scratch_shim=True)
    assert (built.level, built.flags, built.scratch) == (level, flags, scratch)
    assert (built.reason is not None) == (scratch or bool(flags))
    if scratch:
        assert board in str(built.reason) and "scratch" in str(built.reason)


def test_models_that_disagree_get_the_portable_code() -> None:
    assumed = [
        ("a", assumed_features(["c -mcpu=cortex-m4"])),
        ("b", assumed_features(["c -keys=cpu"])),
    ]
    built = cmsis_nn_build(assumed, board_cpu("qemu-mps2-an386"), "qemu-mps2-an386")
    assert built.flags == ("-U__ARM_FEATURE_DSP",)
    assert "different CPU features" in str(built.reason)


def fake_cmsis_nn(root: Path) -> Path:
    (root / "Include").mkdir(parents=True)
    (root / "Source" / "SoftmaxFunctions").mkdir(parents=True)
    (root / "Include" / "arm_nnfunctions.h").write_text(
        "#include <stdint.h>\nvoid arm_softmax_s8(const int8_t* in, int8_t* out);\n"
    )
    (root / "Source" / "SoftmaxFunctions" / "arm_softmax_s8.c").write_text(
        '#include "arm_nnfunctions.h"\nvoid arm_softmax_s8(const int8_t* in, int8_t* out) '
        "{ *out = *in; }\n"
    )
    return root


def test_fragment_puts_the_flags_on_cmsis_nn_only(tmp_path: Path) -> None:
    nn = fake_cmsis_nn(tmp_path / "nn")
    other = tmp_path / "other"
    (other / "src").mkdir(parents=True)
    (other / "src" / "o.c").write_text("int o;\n")
    specs = [
        parse_dependency({"short_name": "cmsis-nn", "url": str(nn), "url_type": "path"}),
        parse_dependency({"short_name": "other", "url": str(other), "url_type": "path"}),
    ]
    deps = resolve_dependencies(specs, archive_root=None, base_dir=tmp_path, cache_dir=tmp_path)
    text = cmake_fragment(deps, project_dir=tmp_path, cmsis_nn_flags=["-U__ARM_FEATURE_DSP"])
    flagged = [line for line in text.splitlines() if "-U__ARM_FEATURE_DSP" in line]
    assert flagged == ['target_compile_options(mlf_dep_cmsis_nn PUBLIC "-U__ARM_FEATURE_DSP")']
    assert "-U" not in cmake_fragment(deps, project_dir=tmp_path)
    with pytest.raises(DependencyError, match="not a plain compiler option"):
        cmake_fragment(deps, project_dir=tmp_path, cmsis_nn_flags=["-U X; rm"])


def softmax_archive(path: Path, target: Optional[str]) -> Path:
    """A factory model calling a CMSIS-NN kernel, its metadata's target replaced."""
    net = Network("nnmodel")
    x = net.input("x", (1, 8), "int8")
    net.output(net.extern_call(x, "arm_softmax_s8", reference=lambda a: a))
    model = net.build()
    members = model.members(version=7)
    if target is not None:
        metadata = json.loads(members["metadata.json"])
        metadata["modules"]["nnmodel"]["target"] = [target]
        members["metadata.json"] = emit.metadata_json(metadata).encode()
    path.write_bytes(emit.tar_bytes(members))
    return path


@pytest.mark.parametrize(
    "target, board, flag",
    [
        # No -mcpu (empty contexts) and calls the adapter does not know (not TVM's): the
        # portable code, which needs no scratch (TVM's own calls: test_cmsis_nn_releases.py).
        (None, "qemu-mps2-an386", "-U__ARM_FEATURE_DSP"),
        (None, "host", None),
        ("c -keys=arm_cpu,cpu -mcpu=cortex-m4", "qemu-mps2-an386", None),
        ("c -keys=arm_cpu,cpu -mcpu=cortex-m55", "qemu-mps2-an500", "-U__ARM_FEATURE_DSP"),
    ],
)
def test_generated_project_builds_cmsis_nn_for_the_models_target(
    tmp_path: Path, target: Optional[str], board: str, flag: Optional[str]
) -> None:
    archive = softmax_archive(tmp_path / "m.tar", target)
    messages: List[str] = []
    project = Project.generate(
        archive,
        tmp_path / "p",
        board=board,
        options={"cmsis_path": str(fake_cmsis_nn(tmp_path / "nn")), "cache_dir": str(tmp_path)},
        progress=messages.append,
    )
    fragment = (project.dir / "deps.cmake").read_text()
    (entry,) = project.info["dependencies"]
    notes = [m for m in messages if m.startswith("CMSIS-NN is compiled for")]
    if flag is None:
        assert "-U__ARM_FEATURE" not in fragment
        assert entry["cpu_features_note"] is None and notes == []
    else:
        assert flag in fragment
        assert entry["cpu_features"] == "portable"
        assert not (project.dir / "runtime" / "cmsis_nn").exists()  # no adapter
        assert len(notes) == 1 and board in notes[0]


def test_cmsis_nn_calls_without_cmsis_nn_say_how_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CMSIS_PATH", raising=False)
    archive = softmax_archive(tmp_path / "m.tar", None)
    with pytest.raises(DependencyError, match="--option cmsis_path=") as caught:
        Project.generate(archive, tmp_path / "p", board="host", options={})
    assert "--dependency short_name=cmsis-nn" in str(caught.value)
    assert not (tmp_path / "p").exists()
