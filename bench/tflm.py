"""Benchmark 25: TFLM beside our compiled models, per model and core (issue 43).

Given a prepared TFLM tree (``MLF_BENCH_TFLM``: the tflite-micro directory with its
downloads in place, as ``bench/tflm_tree.sh`` lays it out from git mirrors), every model of
part 24 (:func:`bench.compiled.models`) is run under TFLM on the cores and configurations
part 24 measures ours on (:data:`bench.compiled.CORES`): qemu-mps2-an385 (Cortex-M3) with
TFLM's reference kernels, qemu-mps2-an386 (Cortex-M4F) and qemu-mps3-an547 (Cortex-M55 +
MVE) with ``OPTIMIZED_KERNEL_DIR=cmsis_nn`` (int8 models only, as ours).

TFLM's library is built by its own Makefile (``TARGET=cortex_m_generic``, :data:`BUILD_TYPE`,
the toolchain on ``PATH``), with the kernel sources cut to the operators of the measured
models (the linker takes nothing else from the library either; the signal library is left
out), every object compiled with the Makefile's own flags. Our harness
(``firmware/tflm_main.cc``) runs one inference with a ``MicroMutableOpResolver`` of the
model's operators and the ``.tflite`` by ``.incbin``, on our board seam (start-up, linker
script, SysTick, semihosting log), with the same random inputs as part 24: instructions of
``Invoke()`` under ``-icount shift=0`` (SysTick ticks, to within one tick, as our firmware
counts a RUN), flash = text + data of ``arm-none-eabi-size`` less the embedded inputs, RAM =
``.data`` + ``.bss`` less the stack, with the tensor arena the smallest with which
``AllocateTensors()`` succeeds (found by relinking). TFLM's outputs are checked against
LiteRT's reference kernels on the same inputs (int8 equal, float32 within rtol 1e-5), as
ours are.

Ours is measured by part 24's code (:func:`bench.compiled.measure_model`) in the same run;
the comparison rows carry ours / TFLM per figure. Without a tree the part is skipped.
``--smoke``: KWS on the an385 only.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from bench import compiled, onboard
from bench.common import (
    FIRMWARE_DIR,
    REPO_ROOT,
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    have,
    require_qemu,
    size_berkeley,
)

TREE_ENV = "MLF_BENCH_TFLM"
MAKEFILE = "tensorflow/lite/micro/tools/make/Makefile"
# TFLM at its smallest and fastest, as issue 43 measured it (bench/README.md §25):
# BUILD_TYPE=release (no error texts, no index checks) and, on the CMSIS-NN cores, the
# int8-only registrations (Register_CONV_2D_INT8(), ...), which leave the int16 and int4
# kernels out. MLF_BENCH_TFLM_BUILD_TYPE=default and MLF_BENCH_TFLM_INT8=0 measure the others.
BUILD_TYPE = os.environ.get("MLF_BENCH_TFLM_BUILD_TYPE", "release")
INT8_REGISTRATIONS = os.environ.get("MLF_BENCH_TFLM_INT8", "1") == "1"
# TFLM's TARGET_ARCH per board, and whether CMSIS-NN's kernels are in (part 24's cores)
ARCH = {compiled.AN385: "cortex-m3", compiled.AN386: "cortex-m4+fp", compiled.AN547: "cortex-m55"}
FIRST_ARENA = 1 << 20  # the first run's arena: enough for every MLPerf Tiny model
TFLM_STACK = 16 * 1024  # TFLM's stack (excluded from RAM, as ours); its use is reported
# Kernel sources every operator needs besides its own
KERNEL_HELPERS = ("kernel_util", "micro_tensor_utils")
# Where a MicroMutableOpResolver method or kernel file is not the schema name in camel case
RESOLVER = {"ADD_N": "AddAddN", "PAD_V2": "AddPadV2", "L2_NORMALIZATION": "AddL2Normalization"}
KERNEL_FILE = {"AVERAGE_POOL_2D": "pooling", "MAX_POOL_2D": "pooling", "MEAN": "reduce",
               "PAD_V2": "pad", "RELU": "activations", "RELU6": "activations"}  # fmt: skip
INT8_KERNELS = ("ADD", "AVERAGE_POOL_2D", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
                "MAX_POOL_2D", "SOFTMAX")  # fmt: skip
KERNEL_SRCS = "MICROLITE_CC_KERNEL_SRCS"
TIMEOUT = 3600


def tree() -> Path:
    """The TFLM tree ``MLF_BENCH_TFLM`` names; :class:`Skip` without one."""
    named = os.environ.get(TREE_ENV, "")
    if not named:
        raise Skip(f"no TFLM tree: set {TREE_ENV} to one bench/tflm_tree.sh prepared")
    path = Path(named)
    if not (path / MAKEFILE).is_file():
        raise Skip(f"{TREE_ENV}={named} is not a tflite-micro tree (no {MAKEFILE})")
    return path


def resolver_method(op: str) -> str:
    """``CONV_2D`` → ``AddConv2D``: the ``MicroMutableOpResolver`` method of a builtin."""
    return RESOLVER.get(op) or "Add" + "".join(
        w if w[0].isdigit() else w.title() for w in op.split("_")
    )


def kernel_file(op: str) -> str:
    """``DEPTHWISE_CONV_2D`` → ``depthwise_conv``: the stem of the operator's kernel source."""
    return KERNEL_FILE.get(op) or re.sub(r"_2d$", "", op.lower())


def operators(model: Path) -> List[str]:
    """The model's builtin operators, in order of first use."""
    from project_api.compile.tflite import read_tflite

    seen: Dict[str, None] = {}
    for op in read_tflite(model).operators:
        seen.setdefault(op.name)
    return list(seen)


@dataclass
class Library:
    """One TFLM build: the library and how a program is compiled and linked against it."""

    board: str
    make_args: List[str]
    path: Path
    cxx: List[str]  # compile an application .cc (cwd: the tree)
    link: List[str]  # after the objects: the library, TFLM's LDFLAGS and libs
    seconds: float


def _make(root: Path, args: Sequence[str], *goals: str) -> str:
    env = dict(os.environ)
    shim = _python_shim(root)
    if shim is not None:
        env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["nice", "make", "-f", MAKEFILE, *args, *goals],
        cwd=str(root), env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"TFLM's make {' '.join(goals)} failed: {' | '.join(tail)}")
    return done.stdout


def _python_shim(root: Path) -> Optional[Path]:
    """TFLM's Makefile runs ``python3`` on its examples' data (numpy and PIL) while it reads
    itself: a directory whose ``python3`` has both, put first on PATH (None: PATH's has)."""
    probe = "import numpy, PIL"
    candidates = [shutil.which("python3") or "", sys.executable, "/usr/bin/python3"]
    for python in candidates:
        if python and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0:
            if python == candidates[0]:
                return None
            shim = root / "gen" / "python_shim"
            shim.mkdir(parents=True, exist_ok=True)
            link = shim / "python3"
            if not link.exists():
                link.symlink_to(python)
            return shim
    raise Skip("TFLM's Makefile needs a python3 with numpy and PIL (apt-get install python3-pil)")


def _variables(root: Path, args: Sequence[str], *names: str) -> Dict[str, List[str]]:
    """Make variables as the Makefile's recipes pass them to the shell (split as it does)."""
    out = _make(root, [*args, "-s"], *(f"print-{name}" for name in names))
    found: Dict[str, List[str]] = {}
    for line in out.splitlines():
        name, sep, value = line.partition("=")
        if sep and name in names and name not in found:
            found[name] = shlex.split(value)
    missing = [n for n in names if n not in found]
    if missing:
        raise RuntimeError(f"TFLM's make printed no {', '.join(missing)}")
    return found


def build_library(
    ctx: Context, root: Path, board: str, cmsis_nn: bool, ops: Sequence[str]
) -> Library:
    """TFLM's ``microlite`` for ``board`` with the kernels of ``ops`` (reference kernels,
    or CMSIS-NN's where ``cmsis_nn``), built by its Makefile into the tree's ``gen/``."""
    toolchain = Path(shutil.which("arm-none-eabi-g++") or "arm-none-eabi-g++").parent
    args = ["TARGET=cortex_m_generic", f"TARGET_ARCH={ARCH[board]}", f"BUILD_TYPE={BUILD_TYPE}",
            f"TARGET_TOOLCHAIN_ROOT={toolchain}/"]  # fmt: skip
    if cmsis_nn:
        args.append("OPTIMIZED_KERNEL_DIR=cmsis_nn")
    stems = {kernel_file(op) for op in ops} | set(KERNEL_HELPERS)
    stems |= {f"{s}_common" for s in stems}
    kernels = [
        src for src in _variables(root, args, KERNEL_SRCS)[KERNEL_SRCS]
        if src.startswith("tensorflow/lite/micro/kernels/") and Path(src).stem in stems
    ]  # fmt: skip
    args += [f"MICROLITE_CC_KERNEL_SRCS={' '.join(kernels)}", "MICROLITE_CC_SIGNAL_KERNEL_SRCS="]
    ctx.log(f"  TFLM microlite for {board}: {len(kernels)} kernel sources ({' '.join(args[:4])})")
    start = time.monotonic()
    _make(root, [*args, "-j2"], "microlite")
    seconds = time.monotonic() - start
    flags = _variables(root, args, "CXX", "CXXFLAGS", "CORE_OPTIMIZATION_LEVEL", "INCLUDES",
                       "LDFLAGS", "MICROLITE_LIBS", "MICROLITE_LIB_PATH")  # fmt: skip
    library = root / flags["MICROLITE_LIB_PATH"][0]
    cxx = [*flags["CXX"], *flags["CXXFLAGS"], *flags["CORE_OPTIMIZATION_LEVEL"], *flags["INCLUDES"]]
    link = [str(library), *flags["LDFLAGS"], *flags["MICROLITE_LIBS"]]
    return Library(board, args, library, cxx, link, seconds)


def _incbin(name: str, path: Path, section: str) -> str:
    """An assembler definition of ``name``: the bytes of ``path``, 16-aligned, sized for nm."""
    return (
        f'  .section {section},"a"\n  .balign 16\n  .global {name}\n  .type {name}, %object\n'
        f'{name}:\n  .incbin "{path}"\n  .size {name}, . - {name}\n'
    )


def write_model(work: Path, model: Path, ops: Sequence[str], sample: bytes,
                registrations: Mapping[str, str]) -> None:  # fmt: skip
    """``tflm_model.h`` for :file:`firmware/tflm_main.cc` and ``tflm_data.S`` (the
    ``.tflite`` and the inputs, ``.incbin``: ``registrations`` maps an operator to its
    registration where it is not the method's default)."""
    methods = " ".join(f"X({resolver_method(op)}, {registrations.get(op, '')})" for op in ops)
    (work / "tflm_model.h").write_text(
        f"/* Written by bench/tflm.py for {model.name}. */\n#pragma once\n"
        f"#define TFLM_OPS(X) {methods}\n#define TFLM_NUM_OPS {len(ops)}\n"
        f"#define TFLM_SAMPLE_BYTES {len(sample)}u\n"
    )
    (work / "tflm_sample.bin").write_bytes(sample)
    (work / "tflm_data.S").write_text(
        _incbin("tflm_model", model.resolve(), ".rodata.tflm_model")
        + _incbin("tflm_sample", work / "tflm_sample.bin", ".rodata.tflm_sample")
    )


def _run(argv: Sequence[str], cwd: Path) -> None:
    done = subprocess.run(list(argv), cwd=str(cwd), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-4:]
        raise RuntimeError(f"{Path(argv[0]).name} failed: {' | '.join(tail)}")


def compile_firmware(lib: Library, root: Path, work: Path, model: Path, ops: Sequence[str],
                     sample: bytes) -> List[str]:  # fmt: skip
    """The harness's objects for ``model`` (all but the arena) on our board seam."""
    from project_api.board import load_board

    board = load_board(lib.board)
    work.mkdir(parents=True, exist_ok=True)
    registrations = {}
    if INT8_REGISTRATIONS and "OPTIMIZED_KERNEL_DIR=cmsis_nn" in lib.make_args:
        registrations = {op: f"tflite::Register_{op}_INT8()" for op in ops if op in INT8_KERNELS}
    write_model(work, model, ops, sample, registrations)
    (work / "linker.ld").write_text(board.render_linker_script(stack_bytes=TFLM_STACK))
    includes = [f"-I{d}" for d in [REPO_ROOT / "crt" / "include", *board.seam_include_dirs()]]
    defines = [f"-D{k}={v}" for k, v in board.compile_definitions().items()]
    cpu = board.cpu_flags()
    objects = []
    for source in [*board.seam_sources(), work / "tflm_data.S"]:
        obj = work / f"{source.stem}.o"
        _run(["arm-none-eabi-gcc", *cpu, "-Os", "-ffunction-sections", "-fdata-sections",
              *defines, *includes, "-c", str(source), "-o", str(obj)], work)  # fmt: skip
        objects.append(str(obj))
    main = work / "tflm_main.o"
    _run([*lib.cxx, f"-I{work}", includes[0], "-c", str(FIRMWARE_DIR / "tflm_main.cc"),
          "-o", str(main)], root)  # fmt: skip
    return [str(main), *objects]


def link_firmware(lib: Library, root: Path, work: Path, objects: Sequence[str], arena: int) -> Path:
    """``work/tflm.elf``: ``objects`` and an arena of ``arena`` bytes, linked against TFLM."""
    from project_api.board import load_board

    cpu = load_board(lib.board).cpu_flags()
    source = work / "tflm_arena.c"
    source.write_text(
        f"__attribute__((aligned(16))) unsigned char tflm_arena[{arena}u];\n"
        f"const unsigned int tflm_arena_bytes = {arena}u;\n"
    )
    _run(["arm-none-eabi-gcc", *cpu, "-fdata-sections", "-c", str(source), "-o",
          str(work / "tflm_arena.o")], work)  # fmt: skip
    elf = work / "tflm.elf"
    _run([lib.cxx[0], *cpu, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
          f"-T{work / 'linker.ld'}", f"-Wl,-Map={work / 'tflm.map'}", "-o", str(elf),
          *objects, str(work / "tflm_arena.o"), *lib.link], root)  # fmt: skip
    return elf


class ArenaShort(Exception):
    """AllocateTensors() failed: the arena is too small."""


def run_firmware(board_name: str, elf: Path) -> Dict[str, Any]:
    """Runs the harness once under ``-icount``: arena used, ticks, stack, output bytes."""
    from project_api.board import load_board

    board = load_board(board_name)
    argv = board.qemu_command(elf.resolve(), icount=True, serial="null")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    text = done.stdout + done.stderr
    if done.returncode == 3 and "error AllocateTensors" in text:
        raise ArenaShort()
    if done.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise RuntimeError(f"TFLM on {board_name} exited {done.returncode}: {tail}")
    got: Dict[str, Any] = {"outputs": {}}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] in ("arena_used", "ticks_hi", "ticks_lo", "stack"):
            got[fields[0]] = int(fields[1])
        elif len(fields) == 4 and fields[0] == "output":
            chunks = got["outputs"].setdefault(int(fields[1]), {})
            chunks[int(fields[2])] = bytes.fromhex(fields[3])
    ticks = (got["ticks_hi"] << 32) | got["ticks_lo"]
    outputs = [b"".join(c[k] for k in sorted(c)) for _, c in sorted(got["outputs"].items())]
    return {
        "arena_used": got["arena_used"],
        "instructions": int(round(ticks * board.instructions_per_tick())),
        "stack_used": got["stack"],
        "outputs": outputs,
    }


def _symbol_bytes(elf: Path, name: str) -> int:
    out = subprocess.run(["arm-none-eabi-nm", "-S", str(elf)], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[3] == name:
            return int(fields[1], 16)
    raise RuntimeError(f"{elf.name} has no {name}")


def _exact(outputs: Sequence[bytes], want: Optional[Sequence[np.ndarray]]) -> Optional[bool]:
    if want is None:
        return None
    if len(outputs) != len(want):
        return False
    got = {f"output{i}": np.frombuffer(data, dtype=w.dtype) for i, (data, w) in
           enumerate(zip(outputs, want))}  # fmt: skip
    return onboard.outputs_equal(got, want)


def measure(ctx: Context, lib: Library, root: Path, model: Path, inputs: Mapping[str, np.ndarray],
            want: Optional[Sequence[np.ndarray]], kernels: str) -> Dict[str, Any]:  # fmt: skip
    """TFLM on ``model``: built and run with a large arena, then again with the arena it used."""
    from project_api.compile.tflite import read_tflite

    parsed = read_tflite(model)
    names = [parsed.tensors[i].name for i in parsed.inputs]
    sample = b"".join(np.ascontiguousarray(inputs[n]).tobytes() for n in names)
    ops = operators(model)
    work = ctx.scratch(f"tflm_{model.stem}_{lib.board}")
    objects = compile_firmware(lib, root, work, model, ops, sample)
    try:
        first = run_firmware(lib.board, link_firmware(lib, root, work, objects, FIRST_ARENA))
    except ArenaShort:
        raise RuntimeError(
            f"TFLM cannot prepare {model.name} (AllocateTensors() fails with a "
            f"{FIRST_ARENA >> 10} KiB arena; BUILD_TYPE=default prints why)"
        ) from None
    # arena_used_bytes() is what the tensors, TFLM's structs and the kernels' buffers hold
    # once allocated; AllocateTensors() needs a little more on the way (its temporaries at
    # the tail): the smallest arena (a multiple of 4) with which it succeeds, found by steps
    # growing from arena_used_bytes() (16, 80, 336, ... B above it) and then by bisection.
    used = first["arena_used"]
    short, fits, probe = used - 4, FIRST_ARENA, used
    results = {fits: first}
    while probe < fits:
        try:
            results[probe] = run_firmware(lib.board, link_firmware(lib, root, work, objects, probe))
            fits = probe
        except ArenaShort:
            short, probe = probe, used + (probe - used) * 4 + 16
    while fits - short > 4:
        arena = (short + fits) // 2 // 4 * 4
        try:
            results[arena] = run_firmware(lib.board, link_firmware(lib, root, work, objects, arena))
            fits = arena
        except ArenaShort:
            short = arena
    arena, got = fits, results[fits]
    elf = link_firmware(lib, root, work, objects, arena)
    if got["outputs"] != first["outputs"]:
        raise RuntimeError(f"TFLM on {model.name}: the arena of {arena} B changed the outputs")
    berkeley, sections = size_berkeley(elf), onboard.section_sizes(elf)
    return {
        "model": model.stem,
        "source": "tflm",
        "board": lib.board,
        "kernels": kernels,
        "instructions": got["instructions"],
        "flash_text_data_bytes": berkeley["text"]
        + berkeley["data"]
        - _symbol_bytes(elf, "tflm_sample"),
        "ram_bytes": berkeley["data"] + berkeley["bss"] - sections.get(".stack", 0),
        "stack_bytes": got["stack_used"],
        "arena_bytes": arena,
        "arena_used_bytes": got["arena_used"],
        "exact": _exact(got["outputs"], want),
    }


def _ratio(ours: Any, theirs: Any) -> Optional[float]:
    return round(ours / theirs, 3) if ours and theirs else None


def compare(ours: Sequence[Dict[str, Any]], tflm: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per model and core measured on both sides: ours / TFLM per figure."""
    theirs = {(r["model"], r["board"]): r for r in tflm}
    rows = []
    for row in ours:
        other = theirs.get((row["model"], row["board"]))
        if other is None:
            continue
        rows.append({
            "model": row["model"], "source": "ours / TFLM", "board": row["board"],
            "kernels": row["kernels"],
            **{key: _ratio(row[key], other[key]) for key in
               ("instructions", "flash_text_data_bytes", "ram_bytes", "arena_bytes")},
            "exact": bool(row["exact"] is not False and other["exact"] is not False),
        })  # fmt: skip
    return rows


def run(ctx: Context, result: PartResult) -> None:
    root = tree()
    require_qemu()
    if not have("arm-none-eabi-g++") or not have("make"):
        raise Skip("needs arm-none-eabi-g++ (libstdc++-arm-none-eabi-newlib) and make")
    ours_part = PartResult(compiled.PART.name, compiled.PART.title)
    cmsis: Optional[Path] = None
    if not ctx.smoke:
        cmsis = compiled.cmsis_checkout(ctx, ours_part)
    chosen = compiled.models(ctx.smoke)
    ops = sorted({op for model in chosen for op in operators(model)})
    libraries: Dict[str, Library] = {}
    for model in chosen:
        inputs, want = compiled.measure_model(ctx, ours_part, model, cmsis)
        if not inputs:
            continue  # compile refused it: part 24's reason is in skipped
        int8 = all(value.dtype == np.int8 for value in inputs.values())
        for kernels, board, cmsis_nn in compiled.CORES[:1] if ctx.smoke else compiled.CORES:
            if cmsis_nn and not int8:
                continue
            if board not in libraries:
                libraries[board] = build_library(ctx, root, board, cmsis_nn, ops)
            ctx.log(f"  {model.stem}: TFLM ({kernels}) on {board}")
            try:
                row = measure(ctx, libraries[board], root, model, inputs, want, kernels)
            except Exception as err:  # reported, the other models and cores go on
                result.skipped.append(f"TFLM {model.name} on {board}: {type(err).__name__}: {err}")
                continue
            result.rows.append(row)
    ours = [r for r in ours_part.rows if r["source"] == "compile"]
    result.skipped.extend(ours_part.skipped)
    tflm_rows = list(result.rows)
    ratios = compare(ours, tflm_rows)
    result.rows = [*({**r, "source": "ours"} for r in ours), *tflm_rows, *ratios]
    worse = [
        f"{r['model']} on {r['board']}: {key} {r[key]}"
        for r in ratios for key in ("instructions", "flash_text_data_bytes", "ram_bytes")
        if r[key] is not None and r[key] >= 1
    ]  # fmt: skip
    result.summary = {
        "tree": str(root),
        "build": {board: " ".join(lib.make_args[:4]) for board, lib in libraries.items()},
        "library_build_seconds": {b: round(lib.seconds, 1) for b, lib in libraries.items()},
        "compared": len(ratios),
        "tflm_equal_to_litert": all(r["exact"] is not False for r in tflm_rows),
        "tflm_not_equal": [
            f"{r['model']} on {r['board']}" for r in tflm_rows if r["exact"] is False
        ],
        "ours_equal_to_litert": all(r["exact"] is not False for r in ours),
        "not_faster_or_smaller": worse,
        "faster_and_smaller_everywhere": bool(ratios) and not worse,
    }


PART = Part(
    "tflm",
    "25. TFLM beside ours per model and core (same inputs, -icount): instructions, flash, RAM",
    run,
    columns=compiled.ROW_COLUMNS,
    targets=[
        Target(
            "every model and core faster and smaller than TFLM (issue 43)",
            lambda f: (
                f"{f.get('compared', 0)} compared, {len(f.get('not_faster_or_smaller', []))} not"
            ),
            "faster_and_smaller_everywhere",
        ),
    ],
)


if __name__ == "__main__":  # pragma: no cover - run alone: python -m bench.tflm
    PART.run_alone(Path("/tmp/bench_tflm"))
