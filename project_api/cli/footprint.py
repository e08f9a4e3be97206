"""``mlf-project footprint ARCHIVE_OR_PROJECT --board BOARD``: RAM and flash, planned and linked."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict

from ..options import PROJECT_TYPES
from .command import EXIT_FAILURE, EXIT_OK, Command
from .generate import add_dependency_flags, add_option_argument, dependency_options


class FootprintCommand(Command):
    name = "footprint"
    runs_model_code = True
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
        parser.add_argument(
            "target", help="an MLF archive or a .tflite, or a generated project directory"
        )
        parser.add_argument(
            "--board",
            help="target board (required for an archive; a project knows its own board)",
        )
        parser.add_argument("--model", help="the model of a multi-model archive, or '*'")
        parser.add_argument(
            "--project-type",
            choices=PROJECT_TYPES,
            default="host_driven",
            help="for an archive: the kind of firmware (default host_driven)",
        )
        add_option_argument(
            parser, help="a project option for an archive (e.g. graph_format=json); repeatable"
        )
        add_dependency_flags(parser, "for an archive")
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
        parser.add_argument("--html", help="also write a self-contained HTML report here")

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
                options=dependency_options(args, parse_option_assignments(args.option)),
                build=args.build,
                estimate=not args.no_estimate,
                progress=progress,
                project_type=args.project_type,
            )
        finally:
            if progress is not None:
                progress.done()
        if args.json:
            print(json.dumps(report.to_json(), indent=2))
        else:
            print(report.text())
        if args.html:
            _write_html(Path(args.html), report)
        return EXIT_OK if report.fits else EXIT_FAILURE


def _write_html(path: Path, report: Any) -> None:
    from ..generate.plan import generator_version
    from ..report.html import page, toolchain_versions

    metadata: Dict[str, Any] = {
        "board": report.board.name,
        "models": ", ".join(m["name"] for m in report.models),
        "what": report.headline(),
        "mlf-project-api": generator_version(),
        **toolchain_versions(report.board),
    }
    title = f"Footprint of {metadata['models'] or 'the firmware'} on {report.board.name}"
    path.write_text(page(title, metadata=metadata, footprint=report), encoding="utf-8")
    print(f"report written to {path}", file=sys.stderr)
