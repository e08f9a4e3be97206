"""``mlf-project``: the command-line face of the pipeline.

Each sub-command lives in its own module of this package as a :class:`Command` subclass;
``COMMANDS`` lists them in the order ``--help`` shows them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional, Sequence

from ..sandbox import support
from .command import Command

# (module, class) of every sub-command, in help order.
COMMANDS = [
    ("compile", "CompileCommand"),
    ("info", "InfoCommand"),
    ("generate", "GenerateCommand"),
    ("export", "ExportCommand"),
    ("build", "BuildCommand"),
    ("flash", "FlashCommand"),
    ("run", "RunCommand"),
    ("profile", "ProfileCommand"),
    ("mlperf", "MlperfCommand"),
    ("attach", "AttachCommand"),
    ("matrix", "MatrixCommand"),
    ("demo", "DemoCommand"),
    ("boards", "BoardsCommand"),
    ("footprint", "FootprintCommand"),
    ("serve", "ServeCommand"),
    ("template_dir", "TemplateDirCommand"),
]


def _load_commands() -> List[Command]:
    commands = []
    for module_name, class_name in COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
        except ModuleNotFoundError as err:
            if err.name == f"{__name__}.{module_name}":
                continue  # not written yet
            raise
        commands.append(getattr(module, class_name)())
    return commands


def package_version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlf-project-api")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: the version, and what confinement this machine offers (unwrapped)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help=str(kwargs.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"{parser.prog} {package_version()}\n{support().describe()}")
        parser.exit()


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlf-project",
        description="Turn a TVM Model Library Format archive (or a .tflite) into firmware "
        "that runs.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="show the version and this machine's sandbox"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in commands:
        cmd_parser = sub.add_parser(
            command.name, help=command.help, description=command.description or command.help
        )
        command.add_arguments(cmd_parser)
        command.add_common_arguments(cmd_parser)
        cmd_parser.set_defaults(_command=command)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser(_load_commands())
    args = parser.parse_args(argv)
    return args._command.run(args)


if __name__ == "__main__":
    sys.exit(main())
