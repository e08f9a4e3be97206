"""Mutating ``.tflite`` files, and feeding the mutants to compile's reader and checks.

Shared by tests/test_compile_hostile.py (a few thousand mutants) and bench/compile_fuzz.py
(the million the issue asks for). A mutant may be refused (CompileError, one line) or
accepted; anything else (another exception, a traceback) is a finding.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Sequence

import numpy as np

from project_api.compile import EXECUTORS, archive_members, lower_to_model
from project_api.compile.lower import lower_model
from project_api.compile.tflite import parse_tflite
from project_api.errors import CompileError

INTERESTING_U32 = (0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000,
                   0xFFFFFFFF, 0xFFFFFFFE, 0x10000, 0x1000000)  # fmt: skip


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """One mutant: byte flips, an interesting 32-bit word, a copied run, or a truncation."""
    buf = bytearray(data)
    kind = int(rng.integers(0, 6))
    if kind == 0:  # flip a few bytes
        for _ in range(int(rng.integers(1, 9))):
            buf[int(rng.integers(0, len(buf)))] ^= int(rng.integers(1, 256))
    elif kind == 1:  # an interesting word at an aligned offset
        at = int(rng.integers(0, len(buf) // 4)) * 4
        value = int(INTERESTING_U32[int(rng.integers(0, len(INTERESTING_U32)))])
        if rng.integers(0, 2):
            value = (value + len(buf) - at) & 0xFFFFFFFF  # pointing near the end
        buf[at : at + 4] = struct.pack("<I", value)[: len(buf) - at]
    elif kind == 2:  # a small signed delta to a word (offsets that point a little off)
        at = int(rng.integers(0, len(buf) // 4)) * 4
        (word,) = struct.unpack_from("<I", buf, at) if at + 4 <= len(buf) else (0,)
        delta = int(rng.integers(-64, 65))
        if at + 4 <= len(buf):
            buf[at : at + 4] = struct.pack("<I", (word + delta) & 0xFFFFFFFF)
    elif kind == 3:  # copy a run of bytes over another place
        n = int(rng.integers(1, 64))
        src, dst = (int(rng.integers(0, max(len(buf) - n, 1))) for _ in range(2))
        buf[dst : dst + n] = buf[src : src + n]
    elif kind == 4:  # truncate
        del buf[int(rng.integers(8, max(len(buf), 9))) :]
    else:  # a 16-bit vtable entry or count
        at = int(rng.integers(0, len(buf) // 2)) * 2
        buf[at : at + 2] = struct.pack("<H", int(rng.choice([0, 2, 4, 0xFFFF, 0x8000, 6, 8])))
    return bytes(buf)


@dataclass
class FuzzReport:
    mutants: int = 0
    refused: int = 0
    accepted: int = 0
    slowest: float = 0.0
    findings: List[str] = field(default_factory=list)


def fuzz(
    seeds: Sequence[bytes], count: int, seed: int = 0, *, lower: bool = True, build: bool = False
) -> FuzzReport:
    """``count`` mutants of ``seeds``: each read (and, with ``lower``, checked and lowered to
    a Network; with ``build``, an accepted one also rendered to C as compile writes it, for
    every executor and AOT's packed interface too);
    findings are the mutants that raised anything but CompileError."""
    rng = np.random.default_rng(seed)
    report = FuzzReport()
    for number in range(count):
        data = mutate(seeds[number % len(seeds)], rng)
        start = time.process_time()  # CPU time: a loaded machine does not make it slower
        try:
            model = parse_tflite(data, Path("mutant.tflite"))
            if build:
                generated = lower_to_model(model)
                for executor in EXECUTORS:
                    archive_members(generated, executor)
                archive_members(generated, "aot", interface="packed")
            elif lower:
                lower_model(model)
            report.accepted += 1
        except CompileError as err:
            if "\n" in str(err):
                report.findings.append(f"mutant {number}: a refusal of several lines: {err!r}")
            report.refused += 1
        except Exception as err:  # noqa: BLE001 - every other exception is a finding
            report.findings.append(f"mutant {number}: {type(err).__name__}: {err}")
        report.slowest = max(report.slowest, time.process_time() - start)
        report.mutants += 1
    return report
