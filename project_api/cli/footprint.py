"""``mlf-project footprint ARCHIVE_OR_PROJECT --board BOARD``: RAM and flash, planned and linked."""

from __future__ import annotations

import argparse
import json

from .command import EXIT_FAILURE, EXIT_OK, Command
from .generate import add_option_argument


class FootprintCommand(Command):
    name = "footprint"
    help = "RAM and flash a model needs on a board: planned before building, linked after"
    description = (
        "Before building: the planned RAM (arena, workspace, executor state, graph tables, "
        "receive buffer, stack) and flash (params, graph tables, model code and runtime "
        "estimated from compiled objects). After building (a built project, or --build): "
        "the firmware's .text/.rodata/.data/.bss split into runtime, model code, params, "
        "firmware loop and glue, board seam and libc, from the linker map (Cortex-M) or the "
        "build's object files (host). Ends with a one-line verdict; exit status 1 when the "
        "firmware does not fit the board."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", help="an MLF archive, or a generated project directory")
        parser.add_argument(
            "--board",
            help="target board (required for an archive; a project knows its own board)",
        )
        parser.add_argument("--model", help="the model of a multi-model archive, or '*'")
        add_option_argument(
            parser, help="a project option for an archive (e.g. graph_format=json); repeatable"
        )
        parser.add_argument(
            "--build",
            action="store_true",
            help="build first (an archive: in a scratch directory) and report linked sizes",
        )
        parser.add_argument(
            "--no-estimate",
            action="store_true",
            help="do not compile the model and runtime to estimate their code before building",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def do_run(self, args: argparse.Namespace) -> int:
        from ..footprint import footprint
        from ..generate import parse_option_assignments
        from .build import ProgressPrinter

        progress = ProgressPrinter() if not args.json else None
        try:
            report = footprint(
                args.target,
                board=args.board,
                model=args.model,
                options=parse_option_assignments(args.option),
                build=args.build,
                estimate=not args.no_estimate,
                progress=progress,
            )
        finally:
            if progress is not None:
                progress.done()
        if args.json:
            print(json.dumps(report.to_json(), indent=2))
        else:
            print(report.text())
        return EXIT_OK if report.fits else EXIT_FAILURE
