"""The base class of every ``mlf-project`` sub-command.

A command is a small class: ``name``, ``help``, ``add_arguments`` and ``do_run``. The
template method :meth:`Command.run` turns this package's errors into a one-line message on
stderr and exit status 2, so no command repeats that handling.
"""

from __future__ import annotations

import argparse
import sys
from typing import ClassVar

from ..errors import MlfProjectError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


class Command:
    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the command's arguments (none by default)."""

    def do_run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:
        try:
            return self.do_run(args)
        except MlfProjectError as err:
            print(f"mlf-project {self.name}: error: {one_line(str(err))}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            print(f"mlf-project {self.name}: interrupted", file=sys.stderr)
            return 130


def one_line(text: str) -> str:
    return " ".join(text.split())
