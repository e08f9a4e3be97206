"""Where a project or an export is written: the destination checked first (empty, or holding
an earlier one of the same kind that ``force`` replaces), then everything written into a
staging folder beside it, swapped in at the end. A failure leaves the destination as it was.
One code path for :func:`..project.generate_firmware` and :func:`..export.export_library`."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..errors import GenerateError


@dataclass(frozen=True)
class Destination:
    """What a destination may already hold: ``recognise`` tells an earlier one of this kind;
    the words say what it is (``a generated project``, ``an export``)."""

    recognise: Callable[[Path], bool]
    kind: str
    not_ours: str  # "<dir> <not_ours>": the refusal of a non-empty folder of something else
    not_ours_hint: str
    force_hint: str
    verb: str  # the staging folder's name: .<dir>.<verb>-XXXX


def check_destination(destination: Path, force: bool, rule: Destination) -> None:
    """Refuses a file, a non-empty folder that holds something else, and (without
    ``force``) an earlier one of this kind."""
    if destination.exists() and not destination.is_dir():
        raise GenerateError(f"{destination} exists and is not a directory")
    if not destination.is_dir() or not any(destination.iterdir()):
        return
    if not rule.recognise(destination):
        raise GenerateError(f"{destination} {rule.not_ours}", hint=rule.not_ours_hint)
    if not force:
        raise GenerateError(f"{destination} already holds {rule.kind}", hint=rule.force_hint)


@contextmanager
def staged(destination: Path, rule: Destination) -> Iterator[Path]:
    """A staging folder beside ``destination``, swapped in when the block ends well and
    removed when it raises."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{destination.name}.{rule.verb}-", dir=destination.parent)
    )
    try:
        yield staging
        swap_in(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def swap_in(staging: Path, destination: Path) -> None:
    """``staging`` renamed to ``destination``; an earlier destination is moved aside first
    and put back if the rename fails."""
    old: Optional[Path] = None
    if destination.exists():
        old = destination.with_name(f".{destination.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.rename(destination, old)
    try:
        os.rename(staging, destination)
    except OSError:
        if old is not None:
            os.rename(old, destination)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
