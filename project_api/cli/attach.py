"""``mlf-project attach PROJECT``: start a firmware and hand its console to other programs.

The firmware runs (a host process, a QEMU machine, or a flashed board) until Ctrl-C or
SIGTERM; its console is relayed to a pseudo-terminal of its own and to a TCP port on
127.0.0.1 (:class:`~project_api.transport.bridge.ConsoleBridge`), so the MLPerf Tiny runner,
a terminal program or a script talks to it directly, as to a board on a USB serial port.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import GenerateError
from .command import EXIT_FAILURE, EXIT_OK, Command


class AttachCommand(Command):
    name = "attach"
    runs_model_code = True
    help = "run a firmware and expose its console on a pty and a TCP port, until interrupted"
    description = (
        "Build (incrementally) and start the firmware of a generated project on its board "
        "(host process, QEMU, or a flashed board), then relay its console to a new "
        "pseudo-terminal and to socket://127.0.0.1:PORT, printing both, until Ctrl-C or "
        "SIGTERM. Point the MLPerf Tiny runner, a terminal (picocom, screen) or a script at "
        "the pty path as at a board's serial port; output nobody is connected to is dropped."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project", help="a generated project directory")
        parser.add_argument("--board", help="check that the project was generated for it")
        parser.add_argument(
            "--port",
            type=int,
            default=0,
            help="TCP port on 127.0.0.1 (default: a free one; -1: none)",
        )
        parser.add_argument(
            "--icount",
            action="store_true",
            help="QEMU boards: -icount shift=0 (timestamps count instructions exactly)",
        )
        parser.add_argument(
            "--json", action="store_true", help="print the endpoints as one JSON line"
        )

    def do_run(self, args: argparse.Namespace) -> int:
        from ..driver import Project
        from ..generate import is_generated_project
        from ..transport.bridge import ConsoleBridge
        from .build import ProgressPrinter

        target = Path(args.project)
        if not (target.is_dir() and is_generated_project(target)):
            raise GenerateError(
                f"{target} is not a generated project",
                hint="generate one: mlf-project generate ARCHIVE DIR --board BOARD "
                "--project-type mlperftiny",
            )
        project = Project.open(target)
        if args.board and args.board != project.board.name:
            raise GenerateError(
                f"{project.dir} was generated for board {project.board.name}, not {args.board}"
            )
        if args.icount:
            if not project.board.is_qemu:
                raise GenerateError(f"--icount only applies to QEMU boards, not {args.board}")
            project.options["qemu_icount"] = True
        progress = ProgressPrinter(prefix="")
        try:
            project.build(progress=progress)
        finally:
            progress.done()
        _terminate_on_sigterm()
        runner, link = project.start_firmware()
        try:
            _await_boot(project, link)
        except BaseException:
            link.close()
            runner.stop()
            raise
        bridge = ConsoleBridge(link, tcp_port=None if args.port < 0 else args.port)
        try:
            bridge.start()
            _announce(project, runner, bridge, args.json)
            try:
                while not bridge.wait(0.5):
                    pass
            except KeyboardInterrupt:
                print("mlf-project attach: stopping the firmware", file=sys.stderr)
                return EXIT_OK
            print(f"mlf-project attach: the firmware went away: {bridge.closed_reason}")
            return EXIT_FAILURE
        finally:
            bridge.close()
            link.close()
            runner.stop()


def _await_boot(project: Any, link: Any) -> None:
    """Reads away the boot banner of a firmware we saw start (host, QEMU: their console is
    ours from the first byte), up to its project type's last boot line; a board flashed
    earlier may have said it long ago, so it is not waited for."""
    from ..errors import TransportTimeoutError
    from ..generate.project_types import project_type_for

    marker = project_type_for(project.project_type).boot_done
    if marker is None or project.board.is_real:
        return
    deadline = time.monotonic() + project.start_timeout()
    seen = b""
    while marker not in seen or b"\n" not in seen[seen.rfind(marker) :]:  # the whole line
        try:
            seen = (seen + link.read_some(deadline, what="the boot banner"))[-4096:]
        except TransportTimeoutError:
            return  # said nothing we know: hand it over as it is


def _announce(project: Any, runner: Any, bridge: Any, as_json: bool) -> None:
    endpoints = {
        "pty": bridge.pty_path,
        "socket": bridge.url,
        "board": project.board.name,
        "project_type": project.project_type,
        "pid": getattr(runner, "pid", None),
    }
    if as_json:
        print(json.dumps(endpoints), flush=True)
        return
    print(f"{project.project_type} firmware of {project.dir} running on {project.board.name}")
    print(f"pty     {bridge.pty_path}")
    if bridge.url:
        print(f"socket  {bridge.url}")
    print("Ctrl-C stops it.", flush=True)


def _terminate_on_sigterm() -> None:
    """SIGTERM ends attach like Ctrl-C: the firmware is stopped and reaped."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
