"""Tiled stages (compile/tiling.py, modelgen/ops/tflite_tiled.py): consecutive convolutions
run band by band of output rows, their outputs still equal to LiteRT's reference kernels."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from compile_cases import band_chains_model
from conftest import REPO_ROOT, host_and_arm, requires_arm
from litert_oracle import assert_runs_as_litert

from project_api.compile import CmsisNnSource, compile_tflite, read_tflite
from project_api.compile.lower import lower_model
from project_api.compile.tiling import chains, choose_stages
from project_api.driver import Project
from project_api.errors import CompileError
from project_api.generate.memory_plan import MemoryPlan, model_memory
from project_api.modelgen.ops.tflite_tiled import bands
from project_api.read import open_archive
from project_api.read.kernel_forms import model_kernel_forms

SHARED = REPO_ROOT.parent / "shared" / "models"


def _kernels(archive: Path) -> List[Dict[str, Any]]:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("./src/default.kernels.json")
        assert member is not None
        operators: List[Dict[str, Any]] = json.load(member)["operators"]
        return operators


@pytest.fixture(scope="module")
def band_chains(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiling") / "chains.tflite"
    path.write_bytes(band_chains_model())
    return path


def test_chains_and_forced_stages(band_chains: Path) -> None:
    net = lower_model(read_tflite(band_chains))
    assert chains(net) == [(0, 4), (6, 7)]  # the pool (5) is in no chain
    stages = choose_stages(net, "on", 3)
    assert [(s.first, s.last, s.band, s.by) for s in stages] == [
        (0, 4, 3, "forced"), (6, 7, 3, "forced")
    ]  # fmt: skip
    assert choose_stages(net, "off") == []
    with pytest.raises(CompileError, match="--tile-rows 0"):
        choose_stages(net, "on", 0)


def test_bands_cover_every_row_each_layer_needs() -> None:
    """The first chain's geometry, bands of 3 rows over 4: the last band is one row; the
    first layer's first band starts under a row of padding, the last band ends on one."""
    net = lower_model(read_tflite_bytes(band_chains_model()))
    nodes = net.ops[0:5]
    layers = [n.op for n in nodes]
    kernels = [n.inputs[1].type.shape[1] for n in nodes]
    heights = [13, 7, 7, 7, 4, 4]
    plan = bands(layers, kernels, heights, 3)  # type: ignore[arg-type]
    assert [(r[-1].out0, r[-1].out1) for r in plan] == [(0, 3), (3, 4)]
    assert plan[0][0].pad == 1 and plan[0][0].in0 == 0
    assert plan[-1][0].in1 == 13
    for rows in plan:  # each layer makes the rows the next one reads
        for made, read in zip(rows, rows[1:]):
            assert (made.out0, made.out1) == (read.in0, read.in1)


def read_tflite_bytes(data: bytes) -> Any:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.tflite"
        path.write_bytes(data)
        return read_tflite(path)


@pytest.mark.parametrize(
    "rows, board",
    [
        (1, None),
        (3, None),
        pytest.param(3, "qemu-mps2-an385", marks=[pytest.mark.qemu, requires_arm]),
    ],
)
def test_tiled_stages_equal_litert(
    band_chains: Path, tmp_path: Path, rows: int, board: Optional[str]
) -> None:
    """Both chains forced into stages, bands of 1 and of 3 rows (3 divides neither 4 nor 2):
    the same outputs as LiteRT's reference kernels on the host (and on a Cortex-M3); the
    archive records each stage's operators."""
    archive = compile_tflite(band_chains, tmp_path / "m.tar", tiling="on", tile_rows=rows)
    tiled = [op for op in _kernels(archive) if "tiled" in op]
    assert [op["tiled"]["stage"] for op in tiled] == [0] * 5 + [1] * 2, tiled
    assert all(op["tiled"]["band_rows"] == rows for op in tiled)
    assert len({op["function"] for op in tiled}) == 2
    project = Project.generate(archive, tmp_path / "project", board=board or "host")
    project.build()
    assert_runs_as_litert(project, band_chains.read_bytes(), range(2))


@pytest.fixture(scope="module")
def cmsis_stages(band_chains: Path, cmsis_v7_checkout: Path) -> Path:
    """Both chains forced into stages of 3 rows, in the forms ``--cmsis-nn``'s rules take:
    CMSIS-NN's convolutions and depthwise, the ``simd`` form's 1x1."""
    source = CmsisNnSource(cmsis_path=str(cmsis_v7_checkout))
    archive = band_chains.with_name("cmsis.tar")
    compile_tflite(band_chains, archive, cmsis_nn=True, source=source, tiling="on", tile_rows=3,
                   force=True)  # fmt: skip
    return archive


def test_stages_take_cmsis_nn_forms(cmsis_stages: Path) -> None:
    """Every layer of both stages keeps its CMSIS-NN form; each names its call, and the
    stage's scratch is the largest its calls answered (one per band geometry)."""
    tiled = [op for op in _kernels(cmsis_stages) if "tiled" in op]
    assert [op["form"] for op in tiled] == ["cmsis-nn", "cmsis-nn", "simd", *["cmsis-nn"] * 4]
    assert all(op["call"].startswith("arm_") for op in tiled), tiled
    assert [op["tiled"]["stage"] for op in tiled] == [0] * 5 + [1] * 2
    for stage in (tiled[:5], tiled[5:]):
        assert len({json.dumps(op["scratch"], sort_keys=True) for op in stage}) == 1, stage
        assert stage[0]["scratch"]["portable"] > 0
    with tarfile.open(cmsis_stages) as tar:
        names = [n for n in tar.getnames() if n.startswith("./codegen/") and n.endswith(".c")]
        text = "".join(tar.extractfile(n).read().decode() for n in names)  # type: ignore[union-attr]
    # the first stage's two bands share each later layer's C: its two depthwise calls once
    # each (one per band geometry, as before, would be four), the second stage's one band one
    assert text.count("arm_depthwise_conv_wrapper_s8(&ctx_") == 3 and "tfl_tiled" in text


@pytest.mark.parametrize(
    "board",
    host_and_arm("qemu-mps2-an386", "qemu-mps3-an547"),
)
def test_cmsis_nn_stages_equal_litert(
    cmsis_stages: Path, band_chains: Path, cmsis_v7_checkout: Path, tmp_path: Path,
    board: Optional[str],
) -> None:  # fmt: skip
    """The CMSIS-NN calls on bands of rows (the top band's padding, the bottom's short
    input) give LiteRT's outputs: CMSIS-NN's portable C on the host, its DSP code on the
    Cortex-M4, its Helium code on the Cortex-M55 (and our 1x1 code on both)."""
    options = {"cmsis_path": str(cmsis_v7_checkout)}
    project = Project.generate(cmsis_stages, tmp_path / "p", board=board or "host",
                               options=options)  # fmt: skip
    project.build()
    assert_runs_as_litert(project, band_chains.read_bytes(), range(2))


def _memory(archive: Path) -> MemoryPlan:
    with open_archive(archive) as opened:
        memory = model_memory(opened.models[0])
    assert memory is not None
    return memory


@pytest.mark.parametrize(
    "stem, layers, rows, arena",
    [("vww_96_int8", (0, 3), 4, (73_728, 47_296)), ("pretrainedResnet_quant", (1, 2), 8,
                                                   (52_224, 40_960))],
)  # fmt: skip
def test_the_rule_tiles_where_the_peak_drops(
    tmp_path: Path, stem: str, layers: Tuple[int, int], rows: int, arena: Tuple[int, int]
) -> None:
    """VWW's first four layers (the model input beside them) and IC's first residual
    branch (its input kept for the ADD) as one stage each: the arena's peak drops, and
    ``footprint``'s peak names the stage; ``--tile off`` is the control."""
    model = SHARED / f"{stem}.tflite"
    if not model.exists():
        pytest.skip(f"{model} is absent (the shared models live in ../shared/models)")
    on = compile_tflite(model, tmp_path / "on.tar")
    tiled = [op for op in _kernels(on) if "tiled" in op]
    assert (tiled[0]["index"], tiled[-1]["index"]) == layers, tiled
    assert {op["tiled"]["by"] for op in tiled} == {"rule"}
    assert {op["tiled"]["band_rows"] for op in tiled} == {rows}
    with open_archive(on) as opened:
        forms = model_kernel_forms(opened.models[0])
    assert forms is not None  # info's line for each of the stage's operators
    shown = [op.tiled for op in forms.operators if op.tiled]
    assert shown[0].startswith(f"tiled stage 0 ({layers[1] - layers[0] + 1} layers, bands of "
                               f"{rows} rows, rule; peak "), shown  # fmt: skip
    memory = _memory(on)
    assert memory.arena_bytes == arena[1]
    assert memory.peak_operator.endswith(
        f"a tiled stage of .tflite operators {layers[0]}-{layers[1]}"
    ), memory.peak_operator
    off = compile_tflite(model, tmp_path / "off.tar", tiling="off")
    assert not any("tiled" in op for op in _kernels(off))
    assert _memory(off).arena_bytes == arena[0]
    assert "tiled" not in _memory(off).peak_operator


@pytest.mark.parametrize("stem", ["vww_96_int8", "pretrainedResnet_quant"])
def test_the_rule_leaves_cmsis_nn_forms_whole(
    tmp_path: Path, cmsis_v7_checkout: Path, stem: str
) -> None:
    """With ``--cmsis-nn`` (the Cortex-M55's rules) the rule takes no stage of CMSIS-NN
    calls (their per-band cost is not in its budget); ``--tile on`` is the control that
    makes the same layers, in their CMSIS-NN forms, stages."""
    model = SHARED / f"{stem}.tflite"
    if not model.exists():
        pytest.skip(f"{model} is absent (the shared models live in ../shared/models)")
    source = CmsisNnSource(cmsis_path=str(cmsis_v7_checkout))
    auto = compile_tflite(model, tmp_path / "auto.tar", cmsis_nn=True, source=source,
                          cpu="cortex-m-mve")  # fmt: skip
    assert not [op for op in _kernels(auto) if "tiled" in op]
    on = compile_tflite(model, tmp_path / "on.tar", cmsis_nn=True, source=source,
                        cpu="cortex-m-mve", tiling="on")  # fmt: skip
    tiled = [op for op in _kernels(on) if "tiled" in op]
    assert {op["tiled"]["by"] for op in tiled} == {"forced"}
    assert "cmsis-nn" in {op["form"] for op in tiled}, tiled


def test_no_stage_where_none_lowers_the_peak(tmp_path: Path) -> None:
    """KWS's peak is its AVERAGE_POOL_2D (no stage takes it): nothing is tiled."""
    model = SHARED / "kws_ref_model.tflite"
    if not model.exists():
        pytest.skip(f"{model} is absent (the shared models live in ../shared/models)")
    net = lower_model(read_tflite(model))
    assert chains(net) and choose_stages(net) == []


def test_cli_tile_options(band_chains: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``compile --tile on --tile-rows 3`` records the stages; a bad band height is one line
    and exit status 2."""
    from project_api.cli import main

    out = tmp_path / "m.tar"
    argv = ["compile", str(band_chains), str(out), "--tile", "on", "--tile-rows", "3"]
    assert main(argv) == 0
    assert [op["tiled"]["band_rows"] for op in _kernels(out) if "tiled" in op] == [3] * 7
    capsys.readouterr()
    assert main([*argv[:-1], "0", "--force"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--tile-rows 0" in err and "\n" not in err, err
