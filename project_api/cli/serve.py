"""``mlf-project serve``: the Project API server for clients other than TVM's launcher."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Tuple

from ..errors import MlfProjectError
from ..resources import template_dir
from .command import EXIT_OK, Command


class ServeCommand(Command):
    name = "serve"
    runs_model_code = True
    help = "serve TVM's Project API (JSON-RPC v1) on stdin/stdout or given file descriptors"
    description = (
        "Serve TVM's microTVM Project API (JSON-RPC protocol v1, one JSON object per line) for "
        "a template or a generated project, until end of file. Without --read-fd/--write-fd "
        "the requests come on stdin and the replies go to stdout; anything else that would "
        "be printed on stdout (build output) goes to stderr instead. Relative paths in "
        "requests resolve against $MLF_PROJECT_CLIENT_CWD, else this command's working "
        "directory."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--read-fd", type=int, help="file descriptor to read requests from")
        parser.add_argument("--write-fd", type=int, help="file descriptor to write replies to")
        parser.add_argument(
            "--project-dir",
            type=Path,
            help="the generated project (with model.tar) or template to serve "
            "(default: the installed template)",
        )
        parser.add_argument("--debug", action="store_true", help="log requests and replies")

    def do_run(self, args: argparse.Namespace) -> int:
        from ..serve.handler import CLIENT_CWD_ENV
        from ..serve.server import configure_logging, serve

        if (args.read_fd is None) != (args.write_fd is None):
            raise MlfProjectError("--read-fd and --write-fd go together")
        directory = args.project_dir if args.project_dir is not None else template_dir()
        if not directory.is_dir():
            raise MlfProjectError(f"--project-dir {directory}: no such directory")
        configure_logging(args.debug)
        client_cwd = os.environ.get(CLIENT_CWD_ENV) or os.getcwd()
        if args.read_fd is not None:
            read_fd, write_fd = args.read_fd, args.write_fd
            for fd in (read_fd, write_fd):
                try:
                    os.fstat(fd)
                except OSError as err:
                    raise MlfProjectError(f"file descriptor {fd}: {err.strerror}") from None
        else:
            read_fd, write_fd = _take_stdio()
        serve(read_fd, write_fd, directory.resolve(), client_cwd=client_cwd)
        return EXIT_OK


def _take_stdio() -> Tuple[int, int]:
    """Moves the RPC channel off fds 0 and 1, so nothing else (our prints, CMake, compilers)
    can read requests or write into the reply stream: fd 0 becomes /dev/null, fd 1 stderr."""
    sys.stdout.flush()
    read_fd = os.dup(0)
    write_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return read_fd, write_fd
