"""``mlf-project matrix``: every archive on every board, in parallel, one table."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import List

from ..errors import InputError
from .command import EXIT_FAILURE, EXIT_OK, Command
from .generate import add_dependency_flags, add_option_argument, dependency_options


class MatrixCommand(Command):
    name = "matrix"
    runs_model_code = True
    help = "run every archive on every board (QEMU in parallel, labgrid places) and report"
    description = (
        "Generate, build and run each archive on each target, --jobs at a time (a labgrid "
        "place runs one cell at a time), compare with the reference outputs beside each "
        "archive (<stem>.outputs.npz, fed <stem>.inputs.npz) and print a table; --json and "
        "--junit for CI. Exit status 1 when a cell failed."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "archives", nargs="+", help="MLF archives (or .tflite files, compiled on the fly)"
        )
        parser.add_argument(
            "--board", action="append", default=[], help="a board to run on (repeatable)"
        )
        parser.add_argument(
            "--labgrid",
            action="append",
            default=[],
            metavar="PLACE=BOARD",
            help="a labgrid place and the board it holds (repeatable)",
        )
        parser.add_argument("--labgrid-coordinator", metavar="HOST:PORT")
        parser.add_argument("--jobs", type=int, default=1, help="cells at a time (default 1)")
        parser.add_argument("--icount", action="store_true", help="QEMU: exact instructions")
        parser.add_argument("--work", help="where the projects go (default: a temporary dir)")
        parser.add_argument("--json", action="store_true", help="print the cells as JSON")
        parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
        add_option_argument(
            parser, help="a project option for every cell (e.g. cmsis_path=DIR); repeatable"
        )
        add_dependency_flags(parser, "for every archive")

    def do_run(self, args: argparse.Namespace) -> int:
        from ..generate import parse_option_assignments
        from ..report.matrix import (
            Cell,
            MatrixOptions,
            Target,
            junit_xml,
            run_matrix,
            table,
            to_json,
        )

        targets = [Target(board) for board in args.board]
        for entry in args.labgrid:
            place, _, board = entry.partition("=")
            if not place or not board:
                raise InputError(f"--labgrid {entry!r}: want PLACE=BOARD")
            targets.append(Target(board, place))
        if not targets:
            raise InputError("no targets", hint="give --board NAME and/or --labgrid PLACE=BOARD")
        archives = [Path(a) for a in args.archives]
        for archive in archives:
            if not archive.exists():
                raise InputError(f"{archive}: no such archive")
        if args.jobs < 1:
            raise InputError("--jobs must be at least 1")
        with tempfile.TemporaryDirectory(prefix="mlf-matrix-") as scratch:
            settings = MatrixOptions(
                work=Path(args.work or scratch),
                jobs=args.jobs,
                icount=args.icount,
                coordinator=args.labgrid_coordinator,
                options=dependency_options(args, parse_option_assignments(args.option)),
            )
            total = len(archives) * len(targets)
            done: List[int] = []

            def progress(cell: Cell) -> None:
                done.append(1)
                name = Path(cell.archive).name
                print(
                    f"[{len(done)}/{total}] {name} on {cell.target}: {cell.status}",
                    file=sys.stderr,
                    flush=True,
                )

            cells = run_matrix(archives, targets, settings, progress)
        if args.junit:
            Path(args.junit).write_bytes(junit_xml(cells))
        if args.json:
            print(json.dumps(to_json(cells), indent=2))
        else:
            print(table(cells))
        return EXIT_OK if all(c.ok for c in cells) else EXIT_FAILURE
