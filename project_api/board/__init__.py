"""Boards as data: ``boards/<name>.toml`` → :class:`Board`.

:mod:`.model` is the board and its parts, :mod:`.schema` reads and checks the TOML, and
:mod:`.architecture` is the seam each architecture fills in its own module (:mod:`.host`,
:mod:`.arm`). Adding a board is adding a TOML file; adding an architecture is adding a module.
"""

from .architecture import ARCHITECTURES, Architecture, Cpu, architecture
from .arm import ArmCpu
from .model import Board, Console, MemoryRegion, RunConfig, SerialHints, Timer
from .schema import (
    CONSOLE_KINDS,
    RUN_KINDS,
    TIMER_KINDS,
    board_names,
    list_boards,
    load_board,
    load_board_file,
    parse_board,
)

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "ArmCpu",
    "Board",
    "CONSOLE_KINDS",
    "Console",
    "Cpu",
    "MemoryRegion",
    "RUN_KINDS",
    "RunConfig",
    "SerialHints",
    "TIMER_KINDS",
    "Timer",
    "architecture",
    "board_names",
    "list_boards",
    "load_board",
    "load_board_file",
    "parse_board",
]
