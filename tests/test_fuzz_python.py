"""Mutation fuzzing of the Python parsers of untrusted bytes.

The C parsers have libFuzzer targets (tests/test_crt_fuzz.py, tests/test_device_firmware.py).
Python cannot corrupt memory, but a parser can still fail in ways a user should never see: an
IndexError or struct.error instead of a message naming the member and the offset. Each test
mutates a valid input a few thousand times with a fixed seed (so a failure reproduces) and
accepts only this package's own errors.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Callable, List

import pytest
from aot_pool_builders import pool_form_files
from mlf_builders import (
    aot_files,
    dmlc_string,
    mblob,
    mblob_c_source,
    mlf_files,
    small_graph,
    small_params,
    write_dir,
    write_tar,
)

from project_api.errors import MlfProjectError
from project_api.read import Graph, load_params, open_archive, save_params
from project_api.read.mblob import MblobError, inspect_artifact, parse_mblob
from project_api.read.relay import result_shapes
from project_api.transport.frames import FrameDecoder, encode_frame

ROUNDS = 1500


def mutations(seed_bytes: bytes, rounds: int = ROUNDS, seed: int = 7) -> List[bytes]:
    """Byte flips, truncations, insertions and duplicated spans, a few at a time."""
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        data = bytearray(seed_bytes)
        for _ in range(rng.randint(1, 6)):
            choice = rng.random()
            if choice < 0.4 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif choice < 0.55:
                del data[rng.randrange(len(data) + 1) :]
            elif choice < 0.8:
                at = rng.randrange(len(data) + 1)
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
            else:
                a, b = sorted(rng.randrange(len(data) + 1) for _ in range(2))
                at = rng.randrange(len(data) + 1)
                data[at:at] = data[a:b][:64]
        out.append(bytes(data))
    return out


def only_our_errors(parse: Callable[[bytes], object], inputs: List[bytes]) -> None:
    for data in inputs:
        try:
            parse(data)
        except MlfProjectError:
            pass
        except Exception as exc:  # pragma: no cover - the failure report
            raise AssertionError(f"{type(exc).__name__}: {exc} for input {data[:80]!r}") from exc


def test_params_parser() -> None:
    only_our_errors(load_params, mutations(save_params(small_params())))


def test_graph_parser() -> None:
    text = json.dumps(small_graph()).encode()
    only_our_errors(
        lambda d: Graph.from_json(d.decode("utf-8", "replace"), "g.json"), mutations(text)
    )


def test_metadata_and_archive_reader(tmp_path: Path) -> None:
    """Mutated metadata.json inside an otherwise valid archive."""
    files = mlf_files(7)
    metadata = files["metadata.json"]
    assert isinstance(metadata, (bytes, str))
    raw = metadata.encode() if isinstance(metadata, str) else metadata

    def parse(data: bytes) -> None:
        archive = write_tar(tmp_path / "m.tar", {**files, "metadata.json": data})
        with open_archive(archive):
            pass

    only_our_errors(parse, mutations(raw, rounds=300))


def test_relay_result_shapes() -> None:
    """Mutated Relay text: the result tracer gives a shape of the right size, or None."""
    text = (
        b"def @main(%x: Tensor[(1, 64), int8], %w: Tensor[(12, 64), int8]) {\n"
        b"  %1 = reshape(%x, newshape=[-1, 64]);\n"
        b'  %2 = qnn.dense(%1, %w, 0, 0, 1f, 1f, units=12, out_dtype="int32");\n'
        b"  %3 = (nn.softmax(%2), reshape(%x, newshape=[8, -1]));\n"
        b"  nn.relu(%2)\n}\n"
    )

    def parse(data: bytes) -> None:
        for shape in result_shapes(data.decode("utf-8", "replace"), [12]):
            assert shape is None or math.prod(shape) == 12

    only_our_errors(parse, mutations(text))


@pytest.mark.parametrize("form", ["header", "caller_pool", "packed_usmp"])
def test_aot_interface_reader(form: str, tmp_path: Path) -> None:
    """Mutated AOT headers and entry-point sources inside an otherwise valid archive."""
    files = aot_files() if form == "header" else pool_form_files(form)
    member = next(
        m for m in files if m.endswith(".h" if form != "packed_usmp" else "_lib0.c")
        and "codegen" in m
    )  # fmt: skip

    # The other members are written once (removing and writing the whole tree each round was
    # most of the test's time); each round rewrites only the mutated member.
    root = write_dir(tmp_path / "a", files)

    def parse(data: bytes) -> None:
        (root / member).write_bytes(data)
        with open_archive(root) as archive:
            archive.model()

    only_our_errors(parse, mutations(files[member], rounds=300))


def test_tar_container(tmp_path: Path) -> None:
    """Mutated tar bytes: truncated headers, bad checksums, garbage members."""
    seed = write_tar(tmp_path / "ok.tar", mlf_files(7)).read_bytes()
    target = tmp_path / "fuzz.tar"

    def parse(data: bytes) -> None:
        target.write_bytes(data)
        with open_archive(target):
            pass

    only_our_errors(parse, mutations(seed, rounds=300))
    assert tarfile.is_tarfile(str(tmp_path / "ok.tar"))


def _module_blob() -> bytes:
    return mblob([dmlc_string("_lib"), dmlc_string("cuda") + b"\x03" * 24], [0, 1, 1], [1])


def test_module_blob_parser() -> None:
    """parse_mblob reports MblobError (which inspect_artifact turns into a note)."""
    for data in mutations(_module_blob()):
        with contextlib.suppress(MblobError):
            parse_mblob(data)


def test_devc_source_recogniser() -> None:
    only_our_errors(inspect_artifact, mutations(mblob_c_source(_module_blob()).encode(), 300))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build an ELF object")
def test_elf_reader(tmp_path: Path) -> None:
    source = tmp_path / "devc.c"
    source.write_text(mblob_c_source(_module_blob()))
    obj = tmp_path / "devc.o"
    subprocess.run(["gcc", "-c", str(source), "-o", str(obj)], check=True)
    only_our_errors(inspect_artifact, mutations(obj.read_bytes(), rounds=600))


def test_frame_decoder_never_raises() -> None:
    """The host's frame decoder turns any byte stream into frames and bad-frame events."""
    stream = b"".join(encode_frame(0x81 + i % 5, i, bytes(range(i * 7 % 50))) for i in range(8))
    for data in mutations(stream):
        decoder = FrameDecoder(65535)
        decoder.feed(data)
        decoder.idle()
