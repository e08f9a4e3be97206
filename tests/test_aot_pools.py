"""AOT models whose USMP pools cross the entry point: pools the caller gives
``tvmgen_<mod>_run`` (workspace and constant), inputs and outputs inside those pools, and the
packed interface's ``tvmgen_<mod>_run`` wrapper (USMP pools appended, or the unpacked API).
Read, then run on the host through both project types; a real KWS archive turned into the
caller-pool form runs bit-exact on the host and on Cortex-M3 under QEMU."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import pytest
from aot_pool_builders import FORMS, pool_form_files
from conftest import corpus_archive, corpus_case, requires_arm
from mlf_builders import Files, aot_reference, tar_files, write_dir

from project_api.cli import main
from project_api.driver import Project
from project_api.errors import AotError
from project_api.modelgen import compare_outputs
from project_api.read import open_archive
from project_api.run.base import live_children

HEADER = "codegen/host/include/tvmgen_default.h"
X = np.array([[1.0, 2.5, -3.0, 4.0]], dtype=np.float32)


def read(tmp_path: Path, files: Files):
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        return archive.model()


# --- reading --------------------------------------------------------------------------------


def test_caller_pools_are_read_from_the_header(tmp_path: Path) -> None:
    entry = read(tmp_path, pool_form_files("constant_pool")).aot
    assert entry.interface == "c" and entry.usmp and not entry.io_in_pools
    assert [(p.member, p.size, p.constant) for p in entry.caller_pools] == [
        ("sram", 64, False), ("weights", 4, True),
    ]  # fmt: skip
    assert entry.pool_ram_bytes == 64 and entry.static_pools == ()


def test_workspace_io_maps_inputs_and_outputs(tmp_path: Path) -> None:
    model = read(tmp_path, pool_form_files("workspace_io"))
    assert model.aot.io_in_pools and model.aot.input_fields == ("x",)
    assert model.summary()["aot"]["io_in_pools"] is True


@pytest.mark.parametrize("form, slots", [("packed_usmp", 3), ("packed_unpacked", 2)])
def test_packed_run_wrapper_is_the_entry_point(form: str, slots: int, tmp_path: Path) -> None:
    entry = read(tmp_path, pool_form_files(form)).aot
    assert entry.interface == "packed" and entry.entry_function == "tvmgen_default_run"
    assert entry.packed_slots == slots and entry.packed_run.startswith(("TVMValue*", "void*"))


def _pool_without_size(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(
        b"#define TVMGEN_DEFAULT_SRAM_WORKSPACE_POOL_SIZE 64", b""
    )


def _constant_pool_without_bytes(files: Files) -> None:
    text = files[HEADER].decode()
    files[HEADER] = re.sub(r"#define \w+_CONSTANT_POOL_DATA \\\n.*\\\n", "", text).encode()


def _pool_sized_twice(files: Files) -> None:
    files[HEADER] += b"#define TVMGEN_DEFAULT_SRAM_CONSTANT_POOL_SIZE 4\n"


def _map_not_declared(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(b"tvmgen_default_map_outputs(", b"unrelated_name(")


def _map_not_defined(files: Files) -> None:
    lib0 = "codegen/host/src/default_lib0.c"
    files[lib0] = files[lib0].replace(b"tvmgen_default_map_inputs(", b"tvmgen_other_map_inputs(")


def _devices(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(
        b"  struct tvmgen_default_workspace_pools* workspace_pools\n);",
        b"  struct tvmgen_default_workspace_pools* workspace_pools,\n"
        b"  struct tvmgen_default_devices* devices\n);",
    )


def _pools_before_inputs(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(
        b"int32_t tvmgen_default_run(\n  struct tvmgen_default_inputs* inputs,",
        b"int32_t tvmgen_default_run(\n  struct tvmgen_default_workspace_pools* p,\n"
        b"  struct tvmgen_default_inputs* inputs,",
    )


def _packed_pool_from_the_caller(files: Files) -> None:
    """TVM's packed run for a pool the user gave: its slot is declared, never set."""
    lib0 = "codegen/host/src/default_lib0.c"
    files[lib0] = files[lib0].replace(b"tensors[2] = global_workspace_tvm_value;\n", b"")


BAD: Dict[str, tuple] = {
    "pool without size": ("caller_pool", _pool_without_size, "pool sram", "exactly one of"),
    "constant pool without bytes": (
        "constant_pool", _constant_pool_without_bytes, "WEIGHTS_CONSTANT_POOL_DATA", "missing",
    ),
    "pool sized twice": ("caller_pool", _pool_sized_twice, "pool sram", "exactly one of"),
    "map not declared": ("workspace_io", _map_not_declared, "tvmgen_default_run", "map_outputs"),
    "map not defined": ("workspace_io", _map_not_defined, "codegen/host/src", "map_inputs"),
    "devices": ("caller_pool", _devices, "tvmgen_default_run", "device contexts"),
    "pools first": ("caller_pool", _pools_before_inputs, "tvmgen_default_run", "expected struct"),
    "packed caller pool": (
        "packed_usmp", _packed_pool_from_the_caller, "default_lib0.c", "sets only 2",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_pool_archive(case: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    form, breaks, where, says = BAD[case]
    files = pool_form_files(form)
    breaks(files)
    with pytest.raises(AotError) as caught:
        read(tmp_path, files)
    assert where in str(caught.value) and says in str(caught.value)
    assert main(["info", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


def test_every_rule_has_a_fixture() -> None:
    fixtures: list[Callable[[Files], None]] = [entry[1] for entry in BAD.values()]
    assert len(set(fixtures)) == len(BAD)


# --- running on the host ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
def test_every_pool_form_runs(form: str, tmp_path: Path) -> None:
    archive = write_dir(tmp_path / f"{form}.mlf", pool_form_files(form))
    expected = aot_reference(X)
    project = Project.generate(archive, tmp_path / "hd")
    project.build()
    with project.session(timeout=30) as session:
        for _ in range(2):
            assert compare_outputs(session.run({"x": X}), expected) == []
    np.savez(tmp_path / "samples.npz", x=X, **expected)
    standalone = Project.generate(
        archive, tmp_path / "sa", project_type="standalone",
        options={"sample_inputs": str(tmp_path / "samples.npz")},
    )  # fmt: skip
    standalone.build()
    result = standalone.run_standalone(timeout=30)
    assert result.status == "pass" and result.exit_status == 0, result.text
    assert live_children() == []


# --- a real model: KWS with its workspace given by the caller ---------------------------------


def caller_pool_kws(tmp_path: Path) -> Path:
    """kws_int8_aot_usmp as TVM writes it when the user names the workspace pool ``sram``:
    the header gains the pools struct, its size and the third parameter; the C defines no
    global_workspace and passes ``workspace_pools->sram`` instead."""
    archive = corpus_archive("kws_int8_aot_usmp")
    if archive is None:
        pytest.skip("kws_int8_aot_usmp.tar is not in the corpus (MLF_PROJECT_CORPUS)")
    files = tar_files(archive)
    header, lib0 = "codegen/host/include/tvmgen_kws.h", "codegen/host/src/kws_lib0.c"
    pool = re.search(rb"static uint8_t global_workspace\[(\d+)\];", files[lib0])
    assert pool is not None
    size = pool.group(1)
    files[header] = (
        files[header]
        .replace(
            b"  struct tvmgen_kws_outputs* outputs\n);",
            b"  struct tvmgen_kws_outputs* outputs,\n"
            b"  struct tvmgen_kws_workspace_pools* workspace_pools\n);",
        )
        .replace(
            b"#define TVMGEN_KWS_WORKSPACE_SIZE",
            b"#define TVMGEN_KWS_SRAM_WORKSPACE_POOL_SIZE " + size + b"\n"
            b"#define TVMGEN_KWS_WORKSPACE_SIZE",
        )
        .replace(
            b"/*!\n * \\brief entrypoint",
            b"struct tvmgen_kws_workspace_pools {\n  void* sram;\n};\n\n/*!\n * \\brief entrypoint",
        )
    )
    files[lib0] = re.sub(
        rb'__attribute__\(\(section\("\.bss\.noinit\.tvm"\), aligned\(\d+\)\)\)\s*'
        rb"static uint8_t global_workspace\[\d+\];\n",
        b"",
        files[lib0],
    )
    files[lib0] = (
        files[lib0]
        .replace(
            b"struct tvmgen_kws_outputs* outputs) {",
            b"struct tvmgen_kws_outputs* outputs,"
            b"struct tvmgen_kws_workspace_pools* workspace_pools) {",
        )
        .replace(b"&global_workspace);", b"workspace_pools->sram);")
    )
    return write_dir(tmp_path / "kws_pools.mlf", files)


def check_kws(archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture, *board: str) -> None:
    case = corpus_case(corpus_archive("kws_int8_aot_usmp") or Path())
    out = tmp_path / "out.npz"
    status = main(
        ["run", str(archive), "--input", str(case["inputs_npz"]), "--output", str(out), *board]
    )
    err = capsys.readouterr().err
    assert status == 0, err
    reference = np.load(case["outputs_npz"])
    got = np.load(out)
    assert np.array_equal(got["output0"].reshape(-1), reference["output0"].reshape(-1))


@pytest.mark.slow
def test_real_kws_with_a_caller_pool_on_the_host(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    archive = caller_pool_kws(tmp_path)
    with open_archive(archive) as opened:
        entry = opened.model().aot
    assert [(p.member, p.constant) for p in entry.caller_pools] == [("sram", False)]
    assert entry.static_pools == () and entry.pool_ram_bytes == 104192
    check_kws(archive, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.qemu
@requires_arm
def test_real_kws_with_a_caller_pool_on_cortex_m3(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The pool the firmware defines is placed with USMP's own (.noinit) and counted."""
    archive = caller_pool_kws(tmp_path)
    check_kws(archive, tmp_path, capsys, "--board", "qemu-mps2-an385")
