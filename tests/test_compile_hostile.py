"""``compile`` on hostile and unsupported ``.tflite`` files: one line, exit status 2, nothing
written, quickly; and a short fuzz of the reader and checks (bench/compile_fuzz.py runs the
long one)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List

import numpy as np
import pytest
from compile_cases import conv_case, fc_case, tiny_model
from tflite_builders import TfliteWriter
from tflite_fuzz import fuzz

from project_api.cli import main
from project_api.compile import compile_tflite, read_tflite
from project_api.compile.tflite import MAX_FILE_BYTES, parse_tflite
from project_api.errors import CompileError


@dataclass
class Child:
    returncode: int
    stdout: str
    stderr: str
    cpu_seconds: float  # this child's own user + system time
    max_rss_kib: int  # this child's own peak resident size


def run_compile(model: Path, out: Path, *extra: str) -> Child:
    """``mlf-project compile`` as a command, with its own resource usage (os.wait4)."""
    argv = [sys.executable, "-m", "project_api", "compile", str(model), str(out), *extra]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.stdout.read(), process.stderr.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        if process.poll() is None and process.returncode is None:
            process.kill()
    process.returncode = os.waitstatus_to_exitcode(status)
    return Child(
        process.returncode, stdout, stderr, usage.ru_utime + usage.ru_stime, usage.ru_maxrss
    )


def assert_refused(model: Path, tmp_path: Path, *needles: str, process: bool = False) -> str:
    """Refused: exit 2, one line naming each needle, no archive, within 2 s of CPU time (a
    loaded machine's wall clock says nothing). In this process through the CLI's main
    (fast), or with ``process`` as a command (the interpreter's start counted too)."""
    out = tmp_path / "out.tar"
    if process:
        done = run_compile(model, out)
        elapsed = done.cpu_seconds
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        start = time.process_time()
        stdout_io, stderr_io = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout_io), contextlib.redirect_stderr(stderr_io):
            status = main(["compile", str(model), str(out)])
        stdout, stderr = stdout_io.getvalue(), stderr_io.getvalue()
        elapsed = time.process_time() - start
    assert status == 2, stderr
    assert stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("mlf-project compile: error:")
    for needle in needles:
        assert needle in stderr, stderr
    assert not out.exists() and list(tmp_path.glob(".out.tar.*")) == []
    assert elapsed < (2 + 3 if process else 2), f"{elapsed:.1f} s"
    return stderr


def write(tmp_path: Path, data: bytes, name: str = "model.tflite") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- corrupt files -------------------------------------------------------------------------


def test_the_valid_seed_compiles(tmp_path: Path) -> None:
    """The control: the model every hostile variant below starts from is accepted."""
    archive = compile_tflite(write(tmp_path, tiny_model()), tmp_path / "ok.tar")
    assert archive.stat().st_size > 0


@pytest.mark.parametrize("keep", [0, 7, 8, 12, 100, 1000, 2000])
def test_truncated(keep: int, tmp_path: Path) -> None:
    data = tiny_model()
    with pytest.raises(CompileError) as caught:
        parse_tflite(data[:keep])
    assert "\n" not in str(caught.value)


def test_truncated_through_the_cli(tmp_path: Path) -> None:
    assert_refused(write(tmp_path, tiny_model()[:1500]), tmp_path, "model.tflite", process=True)


def test_not_a_tflite(tmp_path: Path) -> None:
    assert_refused(write(tmp_path, b"PK\x03\x04" + bytes(100)), tmp_path, "not a .tflite")


def test_root_offset_outside_the_file(tmp_path: Path) -> None:
    data = bytearray(tiny_model())
    data[0:4] = struct.pack("<I", 0xFFFFFFF0)
    assert_refused(write(tmp_path, bytes(data)), tmp_path, "outside the file")


def test_vtable_outside_the_file(tmp_path: Path) -> None:
    data = bytearray(tiny_model())
    (root,) = struct.unpack_from("<I", data, 0)
    data[root : root + 4] = struct.pack("<i", -0x7FFFFFF0)
    assert_refused(write(tmp_path, bytes(data)), tmp_path, "outside the file")


def test_one_table_read_many_times_is_bounded(tmp_path: Path) -> None:
    """A tensors vector of 60000 entries that all name the same table with a 4 KiB name (the
    FlatBuffer form of an offset loop): the read budget refuses it quickly."""
    w = TfliteWriter()
    w.tensor((1, 4), "float32", name="n" * 4000)
    assert read_tflite(write(tmp_path, w.finish([0], [0]))).tensors[0].name.startswith("nnn")
    w.repeat_tensors = 60000
    data = w.finish([0], [0])
    began = time.process_time()
    with pytest.raises(CompileError, match="more reading than any model needs"):
        parse_tflite(data)
    assert time.process_time() - began < 2


def test_buffer_outside_the_file(tmp_path: Path) -> None:
    """A Buffer whose offset/size (weights after the FlatBuffer) lie beyond the file's end."""
    data = _offset_buffer_model(offset=1 << 40, size=32)
    assert_refused(write(tmp_path, data), tmp_path, "outside the file")


def _offset_buffer_model(offset: int, size: int) -> bytes:
    import flatbuffers

    w = TfliteWriter()
    fx, fy = fc_case((1, 4), 2, "NONE", bias=False)(w, np.random.default_rng(0), "float32")
    original = w._buffer

    def buffer(b: flatbuffers.Builder, data: bytes) -> int:
        if len(data) != 32:
            return original(b, data)
        b.StartObject(3)
        b.PrependUint64Slot(1, offset, 0)
        b.PrependUint64Slot(2, size, 0)
        return b.EndObject()

    w._buffer = buffer  # type: ignore[method-assign]
    return w.finish([fx], [fy])


def test_shape_whose_product_overflows(tmp_path: Path) -> None:
    w = TfliteWriter()
    x = w.tensor((1, 4), "float32")
    y = w.tensor((2**31 - 1, 2**31 - 1, 2**31 - 1, 65536), "float32")
    w.op("RESHAPE", [x], [y])
    assert_refused(write(tmp_path, w.finish([x], [y])), tmp_path, "beyond any microcontroller")


def test_activations_far_beyond_any_mcu(tmp_path: Path) -> None:
    w = TfliteWriter()
    tensors = [w.tensor((4096, 4096), "float32") for _ in range(5)]
    for a, b in zip(tensors, tensors[1:]):
        w.op("RESHAPE", [a], [b])
    assert_refused(write(tmp_path, w.finish(tensors[:1], tensors[-1:])), tmp_path, "MiB")


def test_a_100_mb_file_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "huge.tflite"
    with path.open("wb") as handle:
        handle.write(tiny_model())
        handle.truncate(100 << 20)  # sparse: costs no disk
    assert path.stat().st_size > MAX_FILE_BYTES
    assert_refused(path, tmp_path, "beyond any microcontroller", process=True)
    child = run_compile(path, tmp_path / "again.tar")
    assert child.returncode == 2
    # its own peak resident size (KiB) stays far below the file's size
    assert child.max_rss_kib < 256 << 10, child.max_rss_kib


# --- unsupported models ----------------------------------------------------------------------


def test_unsupported_operator_names_it_and_its_index(tmp_path: Path) -> None:
    w = TfliteWriter()
    x, y = conv_case((1, 4, 4, 2), (2, 3, 3, 2), {})(w, np.random.default_rng(0), "float32")
    z = w.tensor((1, 4, 4, 2), "float32")
    w.op("SQUARED_DIFFERENCE", [y, y], [z], version=1)
    line = assert_refused(
        write(tmp_path, w.finish([x], [z])), tmp_path, "operator 1 (SQUARED_DIFFERENCE v1)"
    )
    assert "CONV_2D" in line and "FULLY_CONNECTED" in line  # what is supported


def test_custom_operator(tmp_path: Path) -> None:
    w = TfliteWriter()
    x, y = w.tensor((1, 4), "float32"), w.tensor((1, 4), "float32")
    w.op("CUSTOM", [x], [y], custom="MyOp")
    assert_refused(write(tmp_path, w.finish([x], [y])), tmp_path, "operator 0 (custom 'MyOp')")


def test_unknown_operator_version(tmp_path: Path) -> None:
    w = TfliteWriter()
    x, y = conv_case((1, 4, 4, 2), (2, 3, 3, 2), {})(w, np.random.default_rng(0), "float32")
    w.opcodes[0] = (w.opcodes[0][0], 9, "")
    assert_refused(write(tmp_path, w.finish([x], [y])), tmp_path, "operator 0 (CONV_2D v9)",
                   "version 9")  # fmt: skip


def test_hybrid_depthwise_with_one_filter_scale_is_refused(tmp_path: Path) -> None:
    """LiteRT's hybrid DEPTHWISE_CONV_2D takes a filter scale per channel (its Prepare
    refuses one scale, DEPTHWISE_CONV_2D v4): refused in one line that says so; the same
    operator with a scale per channel (v6) compiles."""
    w = TfliteWriter()
    rng = np.random.default_rng(0)
    add = conv_case((1, 5, 5, 3), (1, 3, 3, 3), {}, depthwise=True, hybrid=True)
    x, y = add(w, rng, "float32")
    good = write(tmp_path, w.finish([x], [y]), "per_channel.tflite")
    assert compile_tflite(good, tmp_path / "ok.tar")
    w.tensors[w.ops[0].inputs[1]].scales = [0.01]
    w.tensors[w.ops[0].inputs[1]].zero_points = [0]
    w.opcodes[0] = (w.opcodes[0][0], 4, "")
    label = "operator 0 (DEPTHWISE_CONV_2D v4): hybrid"
    assert_refused(write(tmp_path, w.finish([x], [y])), tmp_path, label, "per output channel")


def test_several_subgraphs(tmp_path: Path) -> None:
    w = TfliteWriter(subgraphs=2)
    x, y = fc_case((1, 4), 2, "NONE")(w, np.random.default_rng(0), "float32")
    assert_refused(write(tmp_path, w.finish([x], [y])), tmp_path, "2 subgraphs")


def test_dynamic_shape(tmp_path: Path) -> None:
    w = TfliteWriter()
    x = w.tensor((1, 4), "float32", signature=(1, -1))
    y = w.tensor((1, 4), "float32", signature=(1, -1))
    w.op("SOFTMAX", [x], [y], options=[(0, "f32", 1.0)])
    assert_refused(write(tmp_path, w.finish([x], [y])), tmp_path, "dynamic shape")


def test_interface_is_an_aot_option(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--interface packed without --executor aot: one line, exit 2, nothing written; with it
    the archive is written and --json says which interface."""
    import json

    model = write(tmp_path, tiny_model())
    out = tmp_path / "out.tar"
    assert main(["compile", str(model), str(out), "--interface", "packed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--executor aot" in err and not out.exists()
    argv = ["compile", str(model), str(out), "--executor", "aot", "--interface", "packed"]
    assert main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["executor"], record["interface"], record["name"]) == ("aot", "packed", "default")


def test_an_existing_archive_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    model = write(tmp_path, tiny_model())
    out = tmp_path / "out.tar"
    out.write_bytes(b"precious")
    assert main(["compile", str(model), str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_bytes() == b"precious"
    assert main(["compile", str(model), str(out), "--force"]) == 0
    assert out.read_bytes()[:512].find(b"./") >= 0  # a tar now


# --- fuzz --------------------------------------------------------------------------------------


def test_two_thousand_mutants_are_refused_or_compiled_never_crash() -> None:
    seeds: List[bytes] = [tiny_model("int8"), tiny_model("float32", seed=1)]
    began = time.process_time()
    report = fuzz(seeds, 2000, seed=42, build=True)
    elapsed = time.process_time() - began
    assert report.findings == []
    assert report.refused > 500 and report.accepted > 50  # the mutants reach both sides
    assert report.slowest < 1.0
    assert elapsed < 30


def test_info_describes_a_tflite(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = write(tmp_path, tiny_model())
    assert main(["info", str(model)]) == 0
    text = capsys.readouterr().out
    assert "CONV_2D v3" in text and "SOFTMAX v2" in text and "compile: compiles" in text
    assert "scale" in text and "zero point" in text
    assert main(["info", str(model), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [op["operator"] for op in summary["operators"]][:2] == ["CONV_2D", "DEPTHWISE_CONV_2D"]
    w = TfliteWriter()
    x, y = w.tensor((1, 4), "float32"), w.tensor((1, 4), "float32")
    w.op("CUSTOM", [x], [y], custom="MyOp")
    assert main(["info", str(write(tmp_path, w.finish([x], [y]), "custom.tflite"))]) == 0
    assert "compile: refused: operator 0 (custom 'MyOp')" in capsys.readouterr().out


def test_aot_refuses_input_names_that_make_no_c_identifier(tmp_path: Path) -> None:
    """AOT's header names each input as a struct member: a name that sanitizes to no C
    identifier (or two to the same) is refused in one line; the graph executor takes it."""
    w = TfliteWriter()
    x, y = fc_case((1, 4), 2, "NONE")(w, np.random.default_rng(0), "float32")
    w.tensors[x].name = "1 input"
    model = write(tmp_path, w.finish([x], [y]))
    with pytest.raises(CompileError, match="distinct C identifiers"):
        compile_tflite(model, tmp_path / "aot.tar", executor="aot")
    assert not (tmp_path / "aot.tar").exists()
    assert compile_tflite(model, tmp_path / "graph.tar").is_file()
