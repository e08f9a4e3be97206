"""TVM export_library artifacts: find __tvm_dev_mblob (ELF .so/.o, 32/64-bit, both byte orders,
devc.c), list the serialized modules, refuse them with a clear NotAnMlfError."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from mlf_builders import (
    dmlc_string,
    graph_factory_payload,
    mblob,
    mblob_c_source,
    small_graph,
    small_params,
    write_tar,
)

from project_api.errors import ArchiveError, NotAnMlfError
from project_api.read import open_archive
from project_api.read.elf import ElfFile
from project_api.read.mblob import inspect_artifact, parse_mblob, render_tree

CUDA_PAYLOAD = dmlc_string("ptx") + b"\x01\x00\x00\x00\x00\x00\x00\x00" + b"\x07" * 40

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
needs_arm = pytest.mark.skipif(
    shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc for 32-bit ELF"
)


def factory_blob() -> bytes:
    """GraphExecutorFactory -> library -> cuda, as export_library of a CUDA build writes."""
    entries = [
        dmlc_string("GraphExecutorFactory")
        + graph_factory_payload(small_graph(), small_params(), "default"),
        dmlc_string("_lib"),
        dmlc_string("cuda") + CUDA_PAYLOAD,
    ]
    return mblob(entries, row_ptr=[0, 1, 2, 2], children=[1, 2])


def compile_c(tmp_path: Path, source: str, output: str, *flags: str, cc: str = "gcc") -> Path:
    c_file = tmp_path / "devc.c"
    c_file.write_text(source)
    out = tmp_path / output
    subprocess.run([cc, *flags, str(c_file), "-o", str(out)], check=True, capture_output=True)
    return out


def test_parse_modern_blob():
    modules = parse_mblob(factory_blob())
    assert [m.type_key for m in modules] == ["GraphExecutorFactory", "_lib", "cuda"]
    assert [m.imports for m in modules] == [[1], [2], []]
    assert "module 'default': graph of 4 nodes, 1 params" in modules[0].detail
    assert "not decoded" in modules[2].detail
    tree = render_tree(modules)
    assert tree == "GraphExecutorFactory -> [library (compiled host code) -> [cuda]]"


def test_parse_old_blob_without_import_tree():
    blob = mblob([dmlc_string("cuda") + CUDA_PAYLOAD, dmlc_string("opencl") + b"\x00" * 9])
    modules = parse_mblob(blob)
    assert [m.type_key for m in modules] == ["_lib", "cuda", "opencl"]
    assert modules[0].imports == [1, 2]
    assert render_tree(modules) == "library (compiled host code) -> [cuda, opencl]"


def test_truncated_blob_is_noted_not_crashed():
    report = inspect_artifact(mblob_c_source(factory_blob()[:-20]).encode())
    assert report is not None
    assert report.modules[0].type_key == "?" and "unreadable" in report.modules[0].detail


def test_devc_c_source():
    report = inspect_artifact(mblob_c_source(factory_blob()).encode())
    assert report is not None and report.kind == "C source (devc.c)"
    assert [m.type_key for m in report.modules] == ["GraphExecutorFactory", "_lib", "cuda"]


@needs_gcc
def test_shared_object_is_refused_with_module_list(tmp_path):
    so = compile_c(tmp_path, mblob_c_source(factory_blob()), "deploy.so", "-shared", "-fPIC")
    with pytest.raises(NotAnMlfError) as info:
        open_archive(so)
    err = info.value
    assert "64-bit ELF shared object" in err.message
    assert "GraphExecutorFactory -> [library (compiled host code) -> [cuda]]" in err.message
    assert "export_model_library_format" in str(err) and 'Executor("graph")' in str(err)
    assert [m["type_key"] for m in err.modules] == ["GraphExecutorFactory", "_lib", "cuda"]
    assert err.modules[0]["imports"] == [1]


@needs_gcc
def test_export_library_tar_with_devc_object(tmp_path):
    obj = compile_c(tmp_path, mblob_c_source(factory_blob()), "devc.o", "-c")
    lib0 = compile_c(tmp_path, "int tvmgen_default_run(void) { return 0; }\n", "lib0.o", "-c")
    tar = write_tar(
        tmp_path / "deploy.tar", {"lib0.o": lib0.read_bytes(), "devc.o": obj.read_bytes()}
    )
    with pytest.raises(NotAnMlfError, match=r"deploy.tar \(devc.o\) is a TVM export_library"):
        open_archive(tar)


def test_export_library_tar_with_devc_source(tmp_path):
    tar = write_tar(tmp_path / "lib.tar", {"devc.c": mblob_c_source(factory_blob()).encode()})
    with pytest.raises(NotAnMlfError, match="C source"):
        open_archive(tar)


@needs_gcc
def test_directory_holding_a_library(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    compile_c(folder, mblob_c_source(factory_blob()), "deploy.so", "-shared", "-fPIC")
    with pytest.raises(NotAnMlfError, match="deploy.so is a TVM export_library"):
        open_archive(folder)


@needs_gcc
def test_tvm_library_without_blob(tmp_path):
    source = "int __tvm_module_ctx;\nint tvmgen_default_run(void) { return 0; }\n"
    so = compile_c(tmp_path, source, "single.so", "-shared", "-fPIC")
    with pytest.raises(NotAnMlfError) as info:
        open_archive(so)
    assert [m["type_key"] for m in info.value.modules] == ["_lib"]


@needs_gcc
def test_unrelated_elf_is_an_archive_error(tmp_path):
    so = compile_c(tmp_path, "int add(int a) { return a + 1; }\n", "other.so", "-shared", "-fPIC")
    with pytest.raises(ArchiveError, match="an ELF binary, not a Model Library Format") as info:
        open_archive(so)
    assert not isinstance(info.value, NotAnMlfError)


@needs_arm
@pytest.mark.parametrize("endian", ["-mlittle-endian", "-mbig-endian"])
def test_32_bit_objects(tmp_path, endian):
    source = mblob_c_source(factory_blob())
    obj = compile_c(tmp_path, source, "devc.o", "-c", endian, cc="arm-none-eabi-gcc")
    elf = ElfFile(obj.read_bytes())
    assert not elf.is64 and elf.endian == ("<" if endian == "-mlittle-endian" else ">")
    report = inspect_artifact(obj.read_bytes())
    assert report is not None and report.kind == "32-bit ELF relocatable object"
    assert [m.type_key for m in report.modules] == ["GraphExecutorFactory", "_lib", "cuda"]


def test_elf_symbol_bytes_in_a_shared_object(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    blob = factory_blob()
    so = compile_c(tmp_path, mblob_c_source(blob), "deploy.so", "-shared", "-fPIC")
    elf = ElfFile(so.read_bytes())
    symbol = elf.find_symbols("__tvm_dev_mblob")["__tvm_dev_mblob"]
    assert elf.symbol_bytes(symbol) == blob


def test_not_an_artifact():
    assert inspect_artifact(b"int main(void) { return 0; }\n") is None
    assert inspect_artifact(b"\x7fELF" + bytes(60)) is None
