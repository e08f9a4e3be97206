"""Running built firmware: host processes, QEMU machines, real boards.

:func:`make_runner` picks the runner for a board; :func:`flash_firmware` loads a firmware
where that means something (real boards) and checks it exists everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Union

from ..errors import FlashError
from .base import Runner, live_children, reap, spawn

PathLike = Union[str, Path]

__all__ = ["Runner", "flash_firmware", "live_children", "make_runner", "reap", "spawn"]


def _require_firmware(firmware: PathLike) -> Path:
    path = Path(firmware)
    if not path.is_file():
        raise FlashError(
            f"no firmware at {path}",
            hint="build the project first (mlf-project build PROJECT_DIR)",
        )
    return path


def make_runner(
    board: Any, firmware: PathLike, options: Optional[Mapping[str, Any]] = None
) -> Runner:
    """The runner for ``firmware`` on ``board`` (a :class:`project_api.board.Board`).

        Options: ``qemu_icount`` (QEMU boards), ``serial_port``/``serial_number`` (real boards),
        ``log_path`` (host: where the firmware's stderr goes), ``sandbox`` (host and QEMU: False
    runs the firmware unconfined, None follows ``$MLF_PROJECT_SANDBOX``); ``labgrid_place`` (with
        ``labgrid_coordinator``, ``labgrid_env``, ``labgrid_wait``, ``say``) runs it on that
        labgrid place, whatever the board's own kind. Not started yet.
    """
    opts = dict(options or {})
    if opts.get("labgrid_place"):
        from .labgrid import LabgridRunner

        return LabgridRunner(
            _require_firmware(firmware),
            str(opts["labgrid_place"]),
            coordinator=opts.get("labgrid_coordinator"),
            env_file=Path(opts["labgrid_env"]) if opts.get("labgrid_env") else None,
            wait=bool(opts.get("labgrid_wait")),
            say=opts.get("say") or (lambda _: None),
        )
    if board.is_host:
        from .host import HostRunner

        path = _require_firmware(firmware)
        return HostRunner(
            path, cwd=str(path.parent), log_path=opts.get("log_path"), sandbox=opts.get("sandbox")
        )
    if board.is_qemu:
        from .qemu import QemuRunner

        return QemuRunner(
            board,
            _require_firmware(firmware),
            icount=bool(opts.get("qemu_icount")),
            sandbox=opts.get("sandbox"),
        )
    if board.is_real:
        from .flasher import RealBoardRunner

        return RealBoardRunner(
            board,
            port=opts.get("serial_port"),
            serial_number=opts.get("serial_number"),
        )
    raise FlashError(f"board {board.name!r}: no way to run firmware of kind {board.run.kind!r}")


def flash_firmware(
    board: Any, firmware: PathLike, options: Optional[Mapping[str, Any]] = None
) -> Optional[str]:
    """Loads the firmware onto a real board (returns the tool used); for host and QEMU
    boards only checks that it exists (they load it when started)."""
    path = _require_firmware(firmware)
    if not board.is_real:
        return None
    from .flasher import flash

    opts = dict(options or {})
    return flash(board, path, serial_number=opts.get("serial_number"))
