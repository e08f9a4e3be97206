"""The base class of every ``mlf-project`` sub-command.

A command is a small class: ``name``, ``help``, ``add_arguments`` and ``do_run``. The
template method :meth:`Command.run` turns this package's errors into a one-line message on
stderr and exit status 2, Ctrl-C into one line and status 130, and a reader that closed our
stdout (``| head``) into a quiet end with the status a shell gives SIGPIPE, so no command
repeats that handling.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from typing import ClassVar

from ..errors import MlfProjectError
from ..sandbox import ENV as SANDBOX_ENV

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


class Command:
    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # Whether the command builds or runs a model's code: it then takes --no-sandbox.
    runs_model_code: ClassVar[bool] = False

    def add_common_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Arguments every command of a kind takes (``--no-sandbox``)."""
        if self.runs_model_code:
            parser.add_argument(
                "--no-sandbox",
                action="store_true",
                help="build and run the model's C unconfined, with your rights (the default "
                "confines it: docs/security.md); also MLF_PROJECT_SANDBOX=off",
            )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the command's arguments (none by default)."""

    def do_run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:
        if getattr(args, "no_sandbox", False):
            os.environ[SANDBOX_ENV] = "off"  # for this process and what it starts
        try:
            status = self.do_run(args)
            sys.stdout.flush()  # here, not at exit, so a closed pipe is seen below
            return status
        except MlfProjectError as err:
            self.say(f"error: {one_line(str(err))}")
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            self.say("interrupted")
            return EXIT_INTERRUPTED
        except BrokenPipeError as err:
            if not stdout_is_closed():
                self.say(f"error: {one_line(str(err))}")
                return EXIT_FAILURE
            silence_stdout()
            return EXIT_BROKEN_PIPE

    def say(self, text: str) -> None:
        print(f"mlf-project {self.name}: {text}", file=sys.stderr)


def stdout_is_closed() -> bool:
    """True when whoever read our stdout has gone (the pipe's read end is closed)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return True


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush finds nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def one_line(text: str) -> str:
    return " ".join(text.split())
