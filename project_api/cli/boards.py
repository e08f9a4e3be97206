from __future__ import annotations

import argparse
import json
from typing import List

from ..board import Board, list_boards, load_board
from ..sandbox import support
from .command import EXIT_OK, Command


class BoardsCommand(Command):
    name = "boards"
    help = "list the boards firmware can be generated for (or describe one)"
    description = (
        "List the boards in boards/*.toml: CPU, memory, how they run. With a NAME, describe "
        "that board in full."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("name", nargs="?", help="describe only this board")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def do_run(self, args: argparse.Namespace) -> int:
        boards = [load_board(args.name)] if args.name else list_boards()
        if args.json:
            summaries = [board.summary() for board in boards]
            print(json.dumps(summaries[0] if args.name else summaries, indent=2))
        elif args.name:
            print(_details(boards[0]))
        else:
            print(_table(boards))
            print(f"\n{support().describe()}")
        return EXIT_OK


def _cpu(board: Board) -> str:
    return "host" if board.cpu is None else board.cpu.label


def _memory(board: Board) -> str:
    if board.flash is None or board.ram is None:
        return "-"
    return f"{_size(board.flash.length)} / {_size(board.ram.length)}"


def _size(count: int) -> str:
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size}{unit}"
    return str(count)


def _table(boards: List[Board]) -> str:
    rows = [("BOARD", "CPU", "FLASH / RAM", "RUNS ON", "DESCRIPTION")]
    for board in boards:
        runs_on = board.run.kind + (f" {board.run.qemu_machine}" if board.is_qemu else "")
        rows.append((board.name, _cpu(board), _memory(board), runs_on, board.description))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4]
        for row in rows
    )


def _details(board: Board) -> str:
    lines = [f"{board.name}: {board.description}", f"  arch       {board.arch} ({board.family})"]
    if board.cpu is not None:
        lines.append(f"  cpu flags  {' '.join(board.cpu_flags())}")
        extensions = [name for name, on in (("dsp", board.cpu.dsp), ("mve", board.cpu.mve)) if on]
        lines.append(f"  extensions {', '.join(extensions) or 'none'}")
    if board.flash is not None and board.ram is not None:
        lines.append(f"  flash      {board.flash}")
        lines.append(f"  ram        {board.ram} (stack {board.stack_bytes} B)")
    console = board.console
    where = f" @0x{console.address:08x}" if console.address is not None else ""
    lines.append(f"  console    {console.kind}{where}, {console.baud} baud")
    lines.append(f"  timer      {board.timer.kind} at {board.timer.clock_hz} Hz")
    if board.is_qemu:
        lines.append(f"  run        {board.qemu_binary} -machine {board.run.qemu_machine}")
        lines.append(f"  icount     {board.instructions_per_tick():g} instructions per tick")
    elif board.is_real:
        lines.append(f"  run        flash with {board.run.kind}")
        if board.serial.vid_pid:
            pairs = ", ".join(f"{v:04x}:{p:04x}" for v, p in board.serial.vid_pid)
            lines.append(f"  serial     {pairs}")
    else:
        lines.append("  run        native process on a pty")
    lines.append(f"  payload    {board.max_payload} B max per device-protocol frame")
    return "\n".join(lines)
