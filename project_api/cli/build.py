"""``mlf-project build PROJECT_DIR``: configure and build a generated project with CMake."""

from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Optional

from .command import EXIT_OK, Command


class ProgressPrinter:
    """Progress lines on stderr: on a terminal one line rewritten in place, elsewhere one line
    per stage (configuring, compiling, linking, ...) so logs stay short."""

    def __init__(self, stream: Optional[IO[str]] = None, *, prefix: str = "") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.prefix = prefix
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._stage = ""
        self._open_line = False

    def __call__(self, message: str) -> None:
        stage = message.split(" ", 1)[0]
        if self.tty:
            self.stream.write(f"\r\x1b[K{self.prefix}{message}")
            self._open_line = True
            if stage not in ("compiling",):
                self.stream.write("\n")
                self._open_line = False
        elif stage != self._stage or stage != "compiling":
            self.stream.write(f"{self.prefix}{message}\n")
        self._stage = stage
        self.stream.flush()

    def done(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False


class BuildCommand(Command):
    name = "build"
    runs_model_code = True
    help = "build a generated project (CMake; host compiler or the board's cross toolchain)"
    description = (
        "Configure (first time) and build a project made by `mlf-project generate`. Prints "
        "progress; on failure, the lines that say why (compiler and linker errors, CMake "
        "errors with their reasons) and where the whole log is (BUILD_DIR/build.log; shown "
        "as it runs with --verbose)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", help="a generated project directory")
        parser.add_argument(
            "--verbose", action="store_true", help="show the full CMake and compiler output"
        )

    def do_run(self, args: argparse.Namespace) -> int:
        from ..driver import Project

        project = Project.open(args.project_dir)
        if args.verbose:
            project.options["verbose"] = True
        progress = ProgressPrinter()
        started = time.monotonic()
        try:
            firmware = project.build(progress=progress)
        finally:
            progress.done()
        print(f"{firmware} ({time.monotonic() - started:.1f} s)")
        return EXIT_OK
