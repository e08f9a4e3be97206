"""``mlf-project flash PROJECT_DIR``: load a built firmware onto its board."""

from __future__ import annotations

import argparse

from .command import EXIT_OK, Command


class FlashCommand(Command):
    name = "flash"
    runs_model_code = True
    help = "load a built firmware onto its board (real boards; host and QEMU need nothing)"
    description = (
        "Program the firmware of a built project into its board with openocd or pyOCD. For "
        "the host and QEMU boards nothing needs loading: this only checks the firmware exists."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", help="a generated and built project directory")
        parser.add_argument("--serial-number", help="USB serial number of the probe to use")

    def do_run(self, args: argparse.Namespace) -> int:
        from ..driver import Project

        project = Project.open(args.project_dir)
        if args.serial_number:
            project.options["serial_number"] = args.serial_number
        project.flash()
        if project.board.is_real:
            print(f"flashed {project.firmware} to {project.board.name}")
        else:
            print(
                f"{project.firmware} is ready; board {project.board.name} loads it when run "
                "(nothing to flash)"
            )
        return EXIT_OK
