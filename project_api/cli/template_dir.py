from __future__ import annotations

import argparse

from ..resources import template_dir
from .command import EXIT_OK, Command


class TemplateDirCommand(Command):
    name = "template-dir"
    help = "print the installed Project API template directory (point TVM's client at it)"

    def do_run(self, args: argparse.Namespace) -> int:
        print(template_dir())
        return EXIT_OK
