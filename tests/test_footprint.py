"""`mlf-project footprint` and project_api.footprint: planned sizes from the generator,
linked sizes from the linker map (Cortex-M) or the build's objects (host), the verdict."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest
from aot_pool_builders import pool_form_files
from conftest import CMSIS_NN_SKIP, have_tool
from mlf_builders import aot_files, write_dir

from project_api.cli import main as cli_main
from project_api.driver import Project
from project_api.footprint import (
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_WRITE,
    classify,
    footprint,
    map_objects,
    parse_linker_map,
    project_footprint,
    section_bucket,
)
from project_api.modelgen import Network, catalog
from project_api.report.html import page

requires_cc = pytest.mark.skipif(
    not any(have_tool(cc) for cc in ("cc", "gcc", "clang")), reason="needs a host C compiler"
)
requires_arm_gcc = pytest.mark.skipif(
    not (have_tool("arm-none-eabi-gcc") and have_tool("arm-none-eabi-size")),
    reason="needs arm-none-eabi-gcc (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)",
)
REQUIRED_KEYS = {
    "runtime_text_bytes",
    "runtime_ram_bytes",
    "arena_bytes",
    "workspace_bytes",
    "params_flash_bytes",
    "params_ram_bytes",
    "flash_total_bytes",
    "ram_total_bytes",
    "fits",
}


def cli(capsys: pytest.CaptureFixture, *argv: Any) -> Tuple[int, str, str]:
    status = cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def mlp_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("footprint") / "mlp.tar"
    catalog()["mlp"]().write(path)
    return path


@pytest.fixture(scope="module")
def host_project(mlp_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = Project.generate(mlp_archive, tmp_path_factory.mktemp("fp_host") / "p", board="host")
    return project


# --- classification and parsing -------------------------------------------------------------


@pytest.mark.parametrize(
    "obj, section, category",
    [
        ("libmlf_runtime.a(mlf_executor.c.obj)", ".text.mlf_executor_run", "runtime"),
        ("libmlf_runtime.a(mlf_device.c.obj)", ".text.mlf_device_serve", "firmware"),
        ("libmlf_runtime.a(mlf_frame.c.obj)", ".text.x", "firmware"),
        ("CMakeFiles/mlf_runtime.dir/runtime/src/mlf_params.c.o", ".text", "runtime"),
        ("CMakeFiles/mlf_runtime.dir/runtime/firmware/mlf_standalone.c.o", ".text", "firmware"),
        (
            "CMakeFiles/mlf_model_kws.dir/model/kws/codegen/host/src/kws_lib1.c.obj",
            ".text",
            "model",
        ),
        ("CMakeFiles/firmware.dir/src/params_kws.S.obj", ".rodata.mlf_params_kws", "params"),
        ("CMakeFiles/firmware.dir/src/graph_kws.S.obj", ".rodata.x", "graph"),
        ("CMakeFiles/firmware.dir/src/samples_kws.S.obj", ".rodata.x", "samples"),
        ("CMakeFiles/firmware.dir/src/model_kws.c.obj", ".bss.arena", "arena"),
        ("CMakeFiles/firmware.dir/src/model_kws.c.obj", ".bss.workspace_memory", "workspace"),
        ("CMakeFiles/firmware.dir/src/model_kws.c.obj", ".bss.state", "state"),
        ("CMakeFiles/firmware.dir/src/model_kws.c.obj", ".bss.executor", "state"),
        ("CMakeFiles/firmware.dir/src/model_kws.c.obj", ".bss.graph_tables", "graph"),
        ("CMakeFiles/firmware.dir/src/model_kws.c.obj", ".rodata.mlf_graph_kws_ops", "graph"),
        ("CMakeFiles/firmware.dir/src/model_kws.c.obj", ".text.mlf_model_kws_init", "firmware"),
        ("CMakeFiles/firmware.dir/src/main.c.obj", ".bss.rx_buffer", "rx_buffer"),
        ("CMakeFiles/firmware.dir/src/main.c.obj", ".text.startup.main", "firmware"),
        ("CMakeFiles/firmware.dir/board/cortex_m/startup.c.obj", ".vectors", "board"),
        (
            "/usr/lib/gcc/arm-none-eabi/12.2.1/thumb/v7-m/nofp/libgcc.a(_udivmoddi4.o)",
            ".text",
            "libc",
        ),
        ("/x/arm-none-eabi/lib/thumb/v7-m/nofp/libc_nano.a(lib_a-memcpy.o)", ".text", "libc"),
        ("CMakeFiles/cmsis_nn.dir/deps/cmsis_nn/Source/x.c.obj", ".text", "model"),
        ("libmlf_dep_cmsis_nn.a(arm_convolve_s8.c.obj)", ".text", "model"),
        ("deps/libmlf_dep_cmsis_nn.a(mlf_cmsis_nn_memory.c.obj)", ".bss.scratch", "model"),
        ("somewhere/else.o", ".text", "other"),
        (
            "CMakeFiles/mlf_model_kws.dir/model/kws/codegen/host/src/kws_lib0.c.obj",
            ".bss.noinit.tvm",
            "pools",
        ),
        (
            "CMakeFiles/mlf_model_kws.dir/model/kws/codegen/host/src/kws_lib0.c.obj",
            ".rodata.tvm",
            "model",
        ),
    ],
)
def test_classify(obj: str, section: str, category: str) -> None:
    assert classify(obj, section) == category


def test_section_bucket() -> None:
    assert section_bucket(".text", SHF_ALLOC | SHF_EXECINSTR) == ".text"
    assert section_bucket(".vectors", SHF_ALLOC) == ".text"
    assert section_bucket(".rodata.str1.1", SHF_ALLOC) == ".rodata"
    assert section_bucket(".data.rel.ro", SHF_ALLOC | SHF_WRITE) == ".data"
    assert section_bucket(".bss", SHF_ALLOC | SHF_WRITE) == ".bss"
    assert section_bucket(".stack", SHF_ALLOC | SHF_WRITE) == ".stack"
    # TVM's constants are writable arrays in .rodata.tvm; the linker script puts them in flash.
    assert section_bucket(".rodata.tvm", SHF_ALLOC | SHF_WRITE) == ".rodata"
    assert section_bucket(".bss.noinit.tvm", SHF_ALLOC | SHF_WRITE) == ".bss"
    assert section_bucket(".debug_info", 0) is None
    assert section_bucket(".comment", 0) is None


SYNTHETIC_MAP = """\
Archive member included to satisfy reference by file (symbol)

Discarded input sections

 .text.unused   0x00000000       0x40 libmlf_runtime.a(mlf_executor.c.obj)

Memory Configuration

Name             Origin             Length             Attributes
FLASH            0x00000000         0x00400000         xr

Linker script and memory map

LOAD CMakeFiles/firmware.dir/src/main.c.obj
                0x00004000                        __mlf_stack_size = 0x4000

.vectors        0x00000000       0x40
 *(.vectors)
 .vectors       0x00000000       0x40 CMakeFiles/firmware.dir/board/cortex_m/startup.c.obj
                0x00000000                mlf_vector_table

.text           0x00000040      0x130
 *(.text .text.*)
 .text.tvmgen_default_fused_add
                0x00000040       0x20 CMakeFiles/mlf_model_m.dir/model/m/codegen/src/m_lib1.c.obj
                0x00000040                tvmgen_default_fused_add
 .text.mlf_executor_run
                0x00000060       0x7c libmlf_runtime.a(mlf_executor.c.obj)
 *fill*         0x000000dc        0x4
 .text.main     0x000000e0       0x90 CMakeFiles/firmware.dir/src/main.c.obj

.rodata         0x00000170      0x140
                0x00000170                        . = ALIGN (0x4)
 .rodata.mlf_params_m
                0x00000180      0x100 CMakeFiles/firmware.dir/src/params_m.S.obj
 .rodata.mlf_graph_m_ops
                0x00000280       0x30 CMakeFiles/firmware.dir/src/model_m.c.obj
 .rodata.memcpy 0x000002b0       0x10 /usr/lib/libc_nano.a(lib_a-memcpy.o)

.stack          0x20000000     0x4000
                0x20000000                        __mlf_stack_limit = .

.data           0x20004000        0x8 load address 0x000002b0
 .data.x        0x20004000        0x8 libmlf_runtime.a(mlf_error.c.obj)

.bss            0x20004008      0x290
 .bss.arena     0x20004008      0x200 CMakeFiles/firmware.dir/src/model_m.c.obj
 .bss.state     0x20004208       0x40 CMakeFiles/firmware.dir/src/model_m.c.obj
 .bss.rx_buffer
                0x20004248       0x40 CMakeFiles/firmware.dir/src/main.c.obj
 COMMON         0x20004288       0x10 libmlf_runtime.a(mlf_workspace.c.obj)

.heap           0x20004298        0x0
.ARM.attributes
                0x00000000       0x2d
 .ARM.attributes
                0x00000000       0x2d CMakeFiles/firmware.dir/src/main.c.obj
.debug_info     0x00000000     0x1000
 .debug_info    0x00000000     0x1000 CMakeFiles/firmware.dir/src/main.c.obj
"""


def test_parse_linker_map() -> None:
    split, totals = parse_linker_map(SYNTHETIC_MAP)
    assert totals == {
        ".text": 0x40 + 0x130,
        ".rodata": 0x140,
        ".stack": 0x4000,
        ".data": 0x8,
        ".bss": 0x290,
        ".heap": 0,
    }
    assert split[".text"] == {"board": 0x40, "model": 0x20, "runtime": 0x7C + 4, "firmware": 0x90}
    assert split[".rodata"] == {"params": 0x100, "graph": 0x30, "libc": 0x10}
    assert split[".data"] == {"runtime": 8}
    assert split[".bss"] == {"arena": 0x200, "state": 0x40, "rx_buffer": 0x40, "runtime": 0x10}
    assert split[".stack"] == {"stack": 0x4000}
    objects = map_objects(SYNTHETIC_MAP)
    assert objects["libmlf_runtime.a(mlf_executor.c.obj)"] == {".text": 0x80}  # discarded: not


# --- planned ------------------------------------------------------------------------------------


def test_planned_matches_the_generator(host_project: Project) -> None:
    report = project_footprint(host_project, estimate=False)
    document = report.to_json()
    assert set(document) >= REQUIRED_KEYS
    (model,) = host_project.models
    sizes = model["sizes"]
    assert document["stage"] == "planned" and document["linked"] is None
    assert (
        document["arena_bytes"] == sizes["arena_bytes"] == host_project.info["shared_arena_bytes"]
    )
    assert document["workspace_bytes"] == sizes["workspace_ram_bytes"] == 0  # in the arena
    assert document["params_flash_bytes"] == sizes["params_blob_bytes"]
    # mlp's 4 params are all bound in place in flash: no params RAM.
    assert (document["params_ram_bytes"], document["params_in_place"]) == (0, 4)
    rx = host_project.info["fit"]["ram"]["items"]["receive buffer"]
    assert document["runtime_ram_bytes"] == sizes["state_bytes"] + rx
    assert document["runtime_text_bytes"] is None  # not estimated
    assert document["fits"] is True
    assert "host has no memory limit" in document["verdict"]


@requires_cc
def test_planned_code_estimate(host_project: Project) -> None:
    report = project_footprint(host_project, estimate=True)
    assert report.runtime_text_bytes is not None and report.runtime_text_bytes > 1000
    assert report.model_code_bytes is not None and report.model_code_bytes > 100
    assert report.flash_total_bytes > report.params_flash_bytes + report.runtime_text_bytes


def test_models_of_one_firmware_count_one_arena(tmp_path: Path) -> None:
    """--model '*': the arena row is the models' one arena (the larger's), and the memory
    plan shows each model's TVM plan, ours and the bound, and the arena they share."""
    archive = catalog()["cnn_pair"]().write(tmp_path / "pair.tar")
    report = footprint(archive, board="qemu-mps2-an385", model="*", estimate=False)
    plans = report.memory_plans()
    assert [p["model"] for p in plans] == ["cnn_nchw", "cnn_nhwc"]
    assert report.arena_bytes == max(p["planned_bytes"] for p in plans) == 6464
    for plan in plans:
        assert plan["lower_bound_bytes"] <= plan["planned_bytes"] < plan["tvm_plan_bytes"]
        assert plan["shares_arena"]
    assert report.to_json()["memory_plan"]["shared_arena_bytes"] == 6464
    assert "one arena for 2 models (one inference at a time): 6,464 B, not 12,224 B" in (
        report.text()
    )
    assert "Memory plan" in page("footprint", metadata={}, footprint=report)


# --- linked ---------------------------------------------------------------------------------------


@requires_cc
def test_linked_host(host_project: Project) -> None:
    host_project.build()
    report = project_footprint(host_project, estimate=False)
    # Split by the build tree's objects, or, when the runtime library came from the shared
    # cache (an earlier project built it), by a side build's.
    assert report.linked is not None and report.linked.method.startswith("objects")
    linked = report.linked
    (model,) = host_project.models
    sizes = model["sizes"]
    ram = (".data", ".bss")
    assert linked.category_bytes("arena", ram) == sizes["arena_bytes"]
    assert linked.category_bytes("workspace", ram) == sizes["workspace_ram_bytes"]
    rx = host_project.info["fit"]["ram"]["items"]["receive buffer"]
    assert linked.category_bytes("rx_buffer", ram) == rx
    # Executor state: the state array plus the mlf_executor and mlf_workspace structs.
    assert linked.category_bytes("state", ram) >= sizes["state_bytes"]
    assert linked.category_bytes("params", (".rodata",)) >= sizes["params_blob_bytes"]
    assert 1000 < report.runtime_text_bytes < 64 * 1024  # type: ignore[operator]
    assert report.model_code_bytes and report.model_code_bytes > 0
    document = report.to_json()
    assert document["stage"] == "linked"
    assert set(document["linked"]["sections"]) >= {".text", ".rodata", ".bss"}


@requires_arm_gcc
def test_linked_cortex_m_from_the_map(mlp_archive: Path, tmp_path: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "p", board="qemu-mps2-an385")
    project.build()
    report = project_footprint(project, estimate=True)
    linked = report.linked
    # Our C is link-time optimised on Cortex-M: the bytes are split as the same project
    # linked without it splits them, and what the optimisation saved is a row of its own.
    assert linked is not None and linked.method == "linker map, attributed"
    assert linked.category_bytes("lto", (".text",)) < 0
    assert (project.dir / "build-no-lto" / "firmware.elf").is_file()
    for bucket in (".text", ".rodata", ".data", ".bss"):
        explained = sum(linked.split.get(bucket, {}).values())
        # Merged strings may overlap by a few bytes; nothing else is left unexplained.
        assert 0 <= explained - linked.totals[bucket] <= 64, bucket
    assert "other" not in linked.split.get(".text", {})
    (model,) = project.models
    assert linked.category_bytes("arena", (".bss",)) == model["sizes"]["arena_bytes"]
    assert linked.category_bytes("stack", (".stack",)) == project.info["stack_bytes"]
    assert report.ram_total_bytes == sum(
        linked.totals[b] for b in (".stack", ".data", ".bss", ".heap")
    )
    out = (
        subprocess.run(
            ["arm-none-eabi-size", str(project.firmware)],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.splitlines()[1]
        .split()
    )
    text, data, bss = int(out[0]), int(out[1]), int(out[2])
    assert report.flash_total_bytes == text + data
    assert report.ram_total_bytes == data + bss  # size counts .stack/.heap (NOLOAD) as bss
    # The planned runtime figure is an upper bound of the linked one (unused functions).
    assert report.planned_flash["runtime"] is not None
    assert report.planned_flash["runtime"] >= report.runtime_text_bytes  # type: ignore[operator]
    assert report.fits and "fits qemu-mps2-an385" in report.verdict()


# --- CLI ------------------------------------------------------------------------------------------


def test_cli_json_for_an_archive(mlp_archive: Path, capsys: pytest.CaptureFixture) -> None:
    status, out, _ = cli(
        capsys, "footprint", mlp_archive, "--board", "qemu-mps2-an385", "--json", "--no-estimate"
    )
    assert status == 0
    document: Dict[str, Any] = json.loads(out)
    assert set(document) >= REQUIRED_KEYS
    assert document["board"] == "qemu-mps2-an385" and document["stage"] == "planned"
    assert document["planned"]["ram"]["stack"] == 4096
    assert document["ram_available_bytes"] == 4 * 1024 * 1024


def test_cli_text_for_a_project(host_project: Project, capsys: pytest.CaptureFixture) -> None:
    status, out, _ = cli(capsys, "footprint", host_project.dir, "--no-estimate")
    assert status == 0
    assert "arena (tensors, windows)" in out and "params: 4 of 4 bound in place" in out
    assert re.search(
        r"memory plan +TVM plan +ours +lower bound\n  mlp +[\d,]+ +[\d,]+ +[\d,]+", out
    )
    # the plan names the call that sets its peak
    assert re.search(r"peak of mlp: during operator \d+ \(node \d+, tvmgen_\w+\)", out)
    assert out.strip().splitlines()[-1].startswith("verdict: mlp")


def test_cli_json_option_graph_format(mlp_archive: Path, capsys: pytest.CaptureFixture) -> None:
    status, out, _ = cli(
        capsys, "footprint", mlp_archive, "--board", "host", "-o", "graph_format=json",
        "--json", "--no-estimate",
    )  # fmt: skip
    document = json.loads(out)
    assert status == 0 and document["graph_format"] == ["json"]
    assert document["planned"]["ram"]["graph tables"] > 0


def test_cli_cmsis_path_for_an_archive(
    mlf_corpus: Path, cmsis_nn_checkout: Optional[Path], capsys: pytest.CaptureFixture
) -> None:
    """footprint takes the dependency flags run and generate take (here for the an547)."""
    if cmsis_nn_checkout is None:
        pytest.skip(CMSIS_NN_SKIP)
    archive = mlf_corpus / "kws_int8_cmsisnn.tar"
    argv = ["footprint", archive, "--board", "qemu-mps3-an547", "--json", "--no-estimate"]
    status, _, err = cli(capsys, *argv)
    assert status == 2 and "CMSIS-NN" in err
    status, out, err = cli(capsys, *argv, "--cmsis-path", cmsis_nn_checkout)
    assert status == 0, err
    assert json.loads(out)["fits"] is True


def test_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A model the generator refuses for a board is reported (exit status 1), not an error."""
    net = Network("wide")
    net.output(net.relu(net.input("x", (1, 16384))))  # 2 x 64 KiB of tensors
    archive = net.build().write(tmp_path / "wide.tar")
    status, out, _ = cli(capsys, "footprint", archive, "--board", "qemu-lm3s6965evb", "--json")
    document = json.loads(out)
    assert status == 1 and document["fits"] is False
    assert document["ram_total_bytes"] > document["ram_available_bytes"] == 64 * 1024
    assert "DOES NOT FIT" in document["verdict"]
    assert any("refuses" in note for note in document["notes"])
    assert any("not estimated" in note for note in document["notes"])  # why code shows "-"


def test_archive_needs_a_board(mlp_archive: Path, capsys: pytest.CaptureFixture) -> None:
    status, _, err = cli(capsys, "footprint", mlp_archive)
    assert status == 2 and "say which board" in err


def test_project_board_must_match(host_project: Project, capsys: pytest.CaptureFixture) -> None:
    status, _, err = cli(capsys, "footprint", host_project.dir, "--board", "qemu-mps2-an385")
    assert status == 2 and "was generated for board host" in err


def test_project_model_must_exist(host_project: Project, capsys: pytest.CaptureFixture) -> None:
    status, _, err = cli(capsys, "footprint", host_project.dir, "--model", "nope")
    assert status == 2 and "no model 'nope'" in err


def test_missing_archive(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, _, err = cli(capsys, "footprint", tmp_path / "nothing.tar", "--board", "host")
    assert status == 2 and "mlf-project footprint: error:" in err


def test_unknown_board(mlp_archive: Path, capsys: pytest.CaptureFixture) -> None:
    status, _, err = cli(capsys, "footprint", mlp_archive, "--board", "no-such-board")
    assert status == 2 and "no-such-board" in err


@requires_cc
def test_build_flag_on_an_archive(mlp_archive: Path) -> None:
    report = footprint(mlp_archive, board="host", build=True, estimate=False)
    assert report.linked is not None
    assert not Path(report.project_dir).exists()  # the scratch project is gone
    assert report.to_json()["stage"] == "linked"
    assert report.to_json()["project_dir"] is None  # not a path that no longer exists


# --- AOT ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def usmp_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dir(tmp_path_factory.mktemp("fp_aot") / "usmp.mlf", aot_files(usmp=True))


def test_aot_planned_counts_the_model_pools(usmp_archive: Path) -> None:
    report = footprint(usmp_archive, board="qemu-mps2-an385", estimate=False)
    assert report.planned_ram["model pools"] == 32 == report.model_pools_bytes
    assert report.ram_total_bytes == report.info["fit"]["ram"]["needed"]
    assert "aot executor" in report.text().splitlines()[0]
    assert "model pools (USMP)" in report.text()


@requires_arm_gcc
def test_aot_linked_pools_and_constants(usmp_archive: Path, tmp_path: Path) -> None:
    """USMP's pool is linked into .noinit (counted as RAM, as the model's pools), and the
    model's code is what it was planned to be; nothing is left unexplained."""
    project = Project.generate(usmp_archive, tmp_path / "p", board="qemu-mps2-an385")
    project.build()
    report = project_footprint(project, estimate=True)
    linked = report.linked
    assert linked is not None and linked.method.startswith("linker map")
    assert linked.category_bytes("pools", (".bss",)) == 32 == report.model_pools_bytes
    for bucket in (".text", ".rodata", ".data", ".bss"):
        explained = sum(linked.split.get(bucket, {}).values())
        assert 0 <= explained - linked.totals.get(bucket, 0) <= 64, bucket
    assert report.to_json()["model_pools_bytes"] == 32


@requires_arm_gcc
def test_pools_given_by_the_firmware_are_placed_and_counted(tmp_path: Path) -> None:
    """The workspace pool the adapter defines is linked with USMP's (.noinit, "model pools"),
    the constant pool lands in flash as the model's, and the fit check counts it."""
    archive = write_dir(tmp_path / "c.mlf", pool_form_files("constant_pool"))
    project = Project.generate(archive, tmp_path / "p", board="qemu-mps2-an385")
    assert project.info["fit"]["flash"]["items"]["model constant pools"] == 4
    project.build()
    report = project_footprint(project, estimate=True)
    linked = report.linked
    assert linked is not None
    assert linked.category_bytes("pools", (".bss",)) == 64 == report.model_pools_bytes
    assert report.planned_ram["model pools"] == 64
    assert linked.category_bytes("graph", (".rodata",)) < 512  # the pool is not graph tables
