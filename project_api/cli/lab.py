"""The labgrid arguments every running command shares (run, profile, mlperf, matrix)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_labgrid_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("labgrid (a board anywhere in a lab; docs/labgrid.md)")
    group.add_argument(
        "--labgrid", metavar="PLACE", help="run on this labgrid place instead of a local board"
    )
    group.add_argument(
        "--labgrid-coordinator",
        metavar="HOST:PORT",
        help="the labgrid coordinator (default: $LG_COORDINATOR, else 127.0.0.1:20408)",
    )
    group.add_argument(
        "--labgrid-env",
        metavar="FILE",
        help="a labgrid environment file whose drivers flash the place (bootstrap); without "
        "it the place runs the firmware it holds",
    )
    group.add_argument(
        "--labgrid-wait",
        action="store_true",
        help="wait for the place while someone else holds it (instead of failing)",
    )


def check_labgrid(args: argparse.Namespace) -> None:
    """The coordinator answers and knows the place: asked before anything is generated or
    built, so a lab that is not there costs a second, not a build."""
    place = getattr(args, "labgrid", None)
    if not place:
        return
    from ..run.labgrid import LabgridClient, LabgridError

    client = LabgridClient(place, args.labgrid_coordinator)
    status, text = client.call("show")  # raises when the coordinator is unreachable
    if status != 0:
        last = text.strip().splitlines()[-1] if text.strip() else f"status {status}"
        raise LabgridError(f"labgrid place {place!r} at {client.coordinator}: {last}")


def apply_labgrid(project: Any, args: argparse.Namespace) -> None:
    """Points ``project``'s runner at the labgrid place the arguments name (if any)."""
    place = getattr(args, "labgrid", None)
    if not place:
        return
    project.run_overrides.update(
        labgrid_place=place,
        labgrid_coordinator=args.labgrid_coordinator,
        labgrid_env=args.labgrid_env,
        labgrid_wait=args.labgrid_wait,
        say=lambda text: print(f"mlf-project: {text}", file=sys.stderr, flush=True),
    )
