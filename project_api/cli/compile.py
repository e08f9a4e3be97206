"""``mlf-project compile MODEL.tflite OUT.tar``: a ``.tflite`` into an MLF archive, without TVM."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..compile import (
    EXECUTORS,
    FORMS,
    INTERFACES,
    TILINGS,
    CmsisNnSource,
    build_model,
    compile_tflite,
    parse_forced,
    read_tflite,
    supported_text,
)
from ..compile.choose import CPU_CLASSES, cpu_class
from ..compile.tflite import Tensor
from ..compile.tune import tune_forms
from ..errors import CompileError
from .command import EXIT_OK, Command


class CompileCommand(Command):
    name = "compile"
    help = "compile a .tflite into a Model Library Format archive (no TVM needed)"
    description = (
        "Read a TFLite flatbuffer (.tflite), check that every operator is supported, and write "
        "a version-7 Model Library Format archive in TVM 0.14's layout whose C computes "
        "exactly what LiteRT's reference kernels compute (docs/compile.md). Inputs keep the "
        "model's tensor names; outputs are output0..N-1. Nothing is written unless the whole "
        f"model compiles. Supported: {supported_text()}."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("model", help="the .tflite file")
        parser.add_argument("out", help="the archive to write (.tar)")
        parser.add_argument(
            "--executor",
            choices=EXECUTORS,
            default="graph",
            help="graph (default: graph.json and params) or aot (TVM's interface c: "
            "tvmgen_<name>_run, weights as const arrays)",
        )
        parser.add_argument(
            "--interface",
            choices=INTERFACES,
            default="c",
            help="AOT's interface: c (default: tvmgen_<name>_run over structs, a header) or "
            "packed (TVM's packed calling convention through the system library, what a "
            "host-driven microTVM session runs)",
        )
        parser.add_argument(
            "--name", default="default", help="the module name (default 'default', as tvmc)"
        )
        parser.add_argument(
            "--cmsis-nn",
            action="store_true",
            help="int8 operators CMSIS-NN v7.0.0 computes exactly as LiteRT call it (not "
            "FULLY_CONNECTED: see --form), except where a faster exact form of ours wins "
            "(CONV_2D: direct for one input channel, simd for 1x1; FULLY_CONNECTED: dot); "
            "the archive names "
            "CMSIS-NN as a dependency",
        )
        parser.add_argument(
            "--form",
            action="append",
            default=[],
            metavar="KIND=FORM",
            help=f"force a kernel form ({', '.join(FORMS)}) on every operator of KIND, e.g. "
            "FULLY_CONNECTED=cmsis-nn (1 apart from LiteRT on ties: docs/compile.md); repeatable",
        )
        parser.add_argument(
            "--cmsis-path",
            metavar="DIR",
            help="a CMSIS-NN checkout to ask its buffer sizes (else the archive's entry)",
        )
        parser.add_argument(
            "--dependency",
            action="append",
            default=[],
            metavar="SPEC",
            help="short_name=cmsis-nn,url=...,url_type=git,version_spec=... replaces the "
            "CMSIS-NN entry (as for generate)",
        )
        parser.add_argument(
            "--offline", action="store_true", help="never fetch CMSIS-NN (use the cache)"
        )
        parser.add_argument(
            "--board",
            help="choose each operator's form by the rules measured for this board's CPU class "
            "(compile/rules/forms.json; default: the default class)",
        )
        parser.add_argument(
            "--cpu",
            help="as --board, for a CPU (cortex-m4, cortex-m55, rv32imac, ...) or a CPU class "
            f"({', '.join(CPU_CLASSES)})",
        )
        parser.add_argument(
            "--tune",
            metavar="BOARD",
            help="measure every candidate form of each operator on this QEMU board under "
            "-icount (one firmware per form; figures cached) and take the fewest instructions",
        )
        parser.add_argument(
            "--tile",
            choices=TILINGS,
            default="auto",
            help="run consecutive int8 convolutions as tiled stages, band by band of output "
            "rows: auto (default) where that lowers the arena's peak, on (every chain of "
            "them), off (docs/compile.md)",
        )
        parser.add_argument(
            "--tile-rows",
            type=int,
            metavar="N",
            help="output rows of a tiled stage's band (default: chosen, or 2 with --tile on)",
        )
        parser.add_argument("--force", action="store_true", help="replace an existing OUT")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def do_run(self, args: argparse.Namespace) -> int:
        start = time.perf_counter()
        if args.interface != "c" and args.executor != "aot":
            raise CompileError(f"--interface {args.interface} is an AOT option (--executor aot)")
        forced = parse_forced(args.form)
        source = CmsisNnSource(args.cmsis_path, tuple(args.dependency), args.offline)
        if args.board and args.cpu:
            raise CompileError("--board and --cpu both name the CPU: give one")
        board = args.tune or args.board
        if args.tune and args.board and args.board != args.tune:
            raise CompileError(f"--tune {args.tune} measures that board: --board {args.board} "
                               "would name another")  # fmt: skip
        cpu = cpu_class(_board(board), args.cpu)
        tuning = None
        if args.tune:
            if args.force is False and Path(args.out).exists():
                raise CompileError(f"{args.out} exists (--force replaces it)")
            tuning = tune_forms(
                args.model,
                args.tune,
                cmsis_nn=args.cmsis_nn,
                forced=forced,
                source=source,
                progress=lambda line: print(line, file=sys.stderr, flush=True),
            )
        out = compile_tflite(
            args.model,
            args.out,
            name=args.name,
            executor=args.executor,
            interface=args.interface,
            force=args.force,
            cmsis_nn=args.cmsis_nn,
            forms=forced,
            source=source,
            cpu=cpu,
            measured=tuning.measured if tuning else None,
            measured_on=args.tune or "",
            tiling=args.tile,
            tile_rows=args.tile_rows,
        )
        seconds = time.perf_counter() - start
        if args.json:
            document: Dict[str, Any] = {"archive": str(out), "name": args.name,
                                        "executor": args.executor,
                                        "interface": args.interface if args.executor == "aot"
                                        else None,
                                        "seconds": seconds, "cpu": cpu}  # fmt: skip
            if tuning is not None:
                document["tune"] = tuning.to_json()
            print(json.dumps(document))
        else:
            if tuning is not None:
                print(
                    f"tuned on {tuning.board}: {tuning.fresh} figure(s) measured "
                    f"({len(tuning.builds)} firmware(s)), {tuning.cached} from the cache, "
                    f"{tuning.seconds:.1f} s"
                )
            how = f"{args.executor} executor"
            if args.executor == "aot":
                how += f", interface {args.interface}"
            print(f"wrote {out} (module {args.name}, {how}, {seconds:.2f} s)")
        return EXIT_OK


def _board(name: Optional[str]) -> Any:
    """The loaded board ``name`` (None for none); an unknown one is a one-line error."""
    if not name:
        return None
    from ..board import load_board
    from ..errors import MlfProjectError

    try:
        return load_board(name)
    except MlfProjectError as err:
        raise CompileError(f"--board {name}: {err}") from None


def describe_tflite(path: str) -> Dict[str, Any]:
    """What ``info`` says of a ``.tflite``: operators, tensors, quantization, and whether
    compile takes it (the refusal's line when it does not)."""
    model = read_tflite(path)
    verdict = "compiles"
    try:
        build_model(path)
    except CompileError as err:  # a refusal is reported, not raised
        verdict = f"refused: {err}"
    return {
        "file": str(model.path),
        "bytes": model.size,
        "subgraphs": model.subgraphs,
        "inputs": [_tensor(model.tensors[i]) for i in model.inputs],
        "outputs": [_tensor(model.tensors[i]) for i in model.outputs],
        "operators": [
            {
                "index": op.index,
                "operator": op.name if op.opcode != 32 else f"CUSTOM {op.custom_code}",
                "version": op.version,
                "inputs": list(op.inputs),
                "outputs": list(op.outputs),
            }
            for op in model.operators
        ],
        "tensors": [_tensor(t) for t in model.tensors],
        "compile": verdict,
    }


def _tensor(t: Tensor) -> Dict[str, Any]:
    entry: Dict[str, Any] = {
        "index": t.index,
        "name": t.name,
        "shape": list(t.shape),
        "dtype": t.dtype,
        "constant": t.data is not None,
    }
    if t.quantization is not None:
        q = t.quantization
        entry["quantization"] = (
            {"scale": q.scales[0], "zero_point": q.zero_points[0]}
            if not q.per_channel
            else {"channels": len(q.scales), "axis": q.axis}
        )
    return entry


def tflite_lines(summary: Dict[str, Any]) -> List[str]:
    lines = [f"TFLite model: {summary['file']} ({summary['bytes']:,} bytes)"]
    for role in ("inputs", "outputs"):
        lines.append(f"  {role}:")
        for t in summary[role]:
            lines.append(f"    {t['name'] or '#' + str(t['index'])}  {_type(t)}")
    lines.append(f"  operators: {len(summary['operators'])}")
    for op in summary["operators"]:
        lines.append(
            f"    {op['index']:3d} {op['operator']} v{op['version']}  "
            f"{op['inputs']} -> {op['outputs']}"
        )
    lines.append(f"  tensors: {len(summary['tensors'])}")
    for t in summary["tensors"]:
        kind = "const " if t["constant"] else ""
        lines.append(f"    {t['index']:3d} {kind}{_type(t)}  {t['name']}")
    lines.append(f"  compile: {summary['compile']}")
    return lines


def _type(t: Dict[str, Any]) -> str:
    text = f"{t['dtype']}{t['shape']}"
    q = t.get("quantization")
    if q and "scale" in q:
        text += f" scale {q['scale']:.6g} zero point {q['zero_point']}"
    elif q:
        text += f" per-channel ({q['channels']} on axis {q['axis']})"
    return text
