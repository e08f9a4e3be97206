"""``mlf-project export ARCHIVE DIR``: the model as a C library for your own firmware."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from .command import EXIT_OK, Command
from .generate import add_dependency_flags, add_option_argument, dependency_options


class ExportCommand(Command):
    name = "export"
    runs_model_code = True  # the flash estimate compiles the model's C
    help = "export a model as a C library for your own firmware (CMake, Make, Arduino, ...)"
    description = (
        "Writes DIR: one folder that is every package at once: src/ (the model's C API "
        "<model>.h, its code, params in flash, the runtime), a CMakeLists.txt for "
        "add_subdirectory / find_package / ESP-IDF, <model>.mk, an Arduino library, a "
        "PlatformIO library.json, a Zephyr module and an ESP-IDF component manifest. "
        "The archive's C goes into your build: each of its files is first compiled here, "
        "confined (docs/security.md), and one that does not compile so (an #include of a file "
        "outside the export) refuses the export unless --force. Prints each model's arena "
        "size and a flash estimate. docs/export.md has the C API."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "archive",
            help="the MLF archive (.tar, .tar.gz or a directory), or a .tflite "
            "(compiled on the fly)",
        )
        parser.add_argument("dir", help="the folder to write (new or empty; --force replaces "
                            "an earlier export)")  # fmt: skip
        parser.add_argument("--model", help="the model of a multi-model archive, or '*' for all")
        parser.add_argument("--name", help="the C prefix of the exported model (default: its "
                            "name in the archive)")  # fmt: skip
        target = parser.add_mutually_exclusive_group()
        target.add_argument(
            "--board",
            help="for this board's CPU (`mlf-project boards`): CMSIS-NN and the flash estimate; "
            "without --board or --cpu the export is portable C99",
        )
        target.add_argument("--cpu", help="for this CPU (cortex-m4, rv32imac, ...), as --board")
        parser.add_argument(
            "--format",
            help="the packages to write, comma-separated: cmake, make, arduino, platformio, "
            "zephyr, espidf; default all",
        )
        add_option_argument(parser, help="a generator option (e.g. workspace_size_bytes=N)")
        add_dependency_flags(parser, "for the model's code")
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace an earlier export; write it even where the archive's C does not "
            "compile confined",
        )
        parser.add_argument(
            "--no-estimate", action="store_true", help="do not compile the code to estimate flash"
        )
        parser.add_argument("--json", action="store_true", help="print export.json's content")

    def do_run(self, args: argparse.Namespace) -> int:
        from ..generate import parse_option_assignments
        from ..generate.export import export_library

        info = export_library(
            args.archive,
            args.dir,
            board=args.board,
            cpu=args.cpu,
            model=args.model,
            name=args.name,
            formats=args.format,
            options=dependency_options(args, parse_option_assignments(args.option)),
            progress=None if args.json else lambda line: self.say(line),
            force=args.force,
        )
        code = None if args.no_estimate else _code_estimate(Path(args.dir), info)
        if args.json:
            print(json.dumps({**info, "code_estimate_bytes": code}, indent=2))
            return EXIT_OK
        for model in info["models"]:
            by_bits = model["arena_by_pointer_bits"]
            arena = by_bits["32"]
            print(
                f"{model['name']}: arena {arena['arena_bytes']:,} B with 32-bit pointers, "
                f"{by_bits['64']['arena_bytes']:,} B with 64-bit ({model['name'].upper()}"
                f"_ARENA_BYTES: tensors {arena['activation_bytes']:,}, workspace "
                f"{arena['workspace_bytes']:,}, executor state {arena['state_bytes']:,} / "
                f"{by_bits['64']['state_bytes']:,}), params {model['params_bytes']:,} B in flash"
            )
        if code is not None:
            print(f"flash: about {code:,} B (code and constants of src/, compiled, not linked)")
        elif info["kind"] == "portable" and not args.no_estimate:
            print("flash: no estimate for a portable export (give --cpu or --board for one)")
        what = "any C99 CPU (portable)" if info["kind"] == "portable" else info["cpu"]
        print(f"exported to {args.dir} for {what}: {', '.join(info['formats'])}")
        print(carried_line(info["archive_c"]))
        return EXIT_OK


def carried_line(record: Dict[str, Any]) -> str:
    """The one line that says the library carries the archive's C into the user's build,
    and how it compiled here (export.json's ``archive_c``)."""
    head = "src/ carries the archive's C into your build"
    count = record["files"]
    if record.get("compiler") is None:
        return f"{head}, unchecked here: {record.get('note', 'no compiler')} (--force)"
    failed = len(record["failed"])
    if failed:
        how = "confined " if record["confined"] else ""
        return (
            f"{head}: {failed} of its {count} files did not compile {how}here, written with "
            "--force (export.json: archive_c)"
        )
    if record["confined"]:
        return f"{head} (its {count} files compiled here confined: they read nothing outside src/)"
    return f"{head} (its {count} files compiled here unconfined: --no-sandbox)"


def _code_estimate(root: Path, info: Dict[str, Any]) -> Optional[int]:
    """src/'s C compiled to objects with the CPU's compiler (footprint's estimate); None for a
    portable export, which is for no one CPU."""
    from ..board import load_board
    from ..footprint.estimate import estimate_code

    if info["board"] is None:
        return None
    board = load_board(info["board"])
    sources = sorted((root / "src").rglob("*.c"))
    found = estimate_code(board, sources, [root / "src"], opt_flags=board.model_opt_flags())
    if found.note:
        print(f"flash estimate: {found.note}", file=sys.stderr)
    return found.bytes
