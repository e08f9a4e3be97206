"""``mlf-project generate ARCHIVE PROJECT_DIR --board BOARD``: render a firmware project."""

from __future__ import annotations

import argparse

from .command import EXIT_OK, Command


def add_generate_arguments(parser: argparse.ArgumentParser, *, board_default: str) -> None:
    """The options generate and run share."""
    parser.add_argument(
        "--board", default=board_default, help=f"target board (default: {board_default})"
    )
    parser.add_argument(
        "--model",
        help="the model of a multi-model archive to build, or '*' for all of them in one firmware",
    )
    parser.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a project option (graph_format, workspace_size_bytes, compile_definitions, "
        "cmsis_path, sample_inputs, ...); repeatable",
    )


class GenerateCommand(Command):
    name = "generate"
    help = "generate a CMake firmware project for a model and a board"
    description = (
        "Render a self-contained firmware project (CMakeLists.txt, main.c, the model's code, "
        "the runtime, the params as an aligned read-only blob) for one model of an MLF "
        "archive on a board. Sizes are computed, and a model that does not fit the board is "
        "refused before anything is built."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("archive", help="MLF archive (.tar, .tar.gz) or extracted directory")
        parser.add_argument("project_dir", help="directory to create (new or empty)")
        add_generate_arguments(parser, board_default="host")
        parser.add_argument(
            "--project-type",
            choices=["host_driven", "standalone"],
            default="host_driven",
            help="host_driven (answers the device protocol; default) or standalone (runs its "
            "embedded samples once and prints the results)",
        )
        parser.add_argument(
            "--force", action="store_true", help="replace a project generated there before"
        )

    def do_run(self, args: argparse.Namespace) -> int:
        from ..driver import Project
        from ..generate import parse_option_assignments
        from .build import ProgressPrinter

        project = Project.generate(
            args.archive,
            args.project_dir,
            board=args.board,
            project_type=args.project_type,
            model=args.model,
            options=parse_option_assignments(args.option),
            progress=ProgressPrinter(),
            force=args.force,
        )
        for model in project.models:
            sizes = model["sizes"]
            print(
                f"model {model['name']}: arena {sizes['arena_bytes']} B, workspace "
                f"{sizes['workspace_bytes']} B, params {sizes['params_blob_bytes']} B (flash)"
            )
        print(f"next: mlf-project build {args.project_dir}")
        return EXIT_OK
