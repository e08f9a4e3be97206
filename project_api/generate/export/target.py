"""What an export is for: the CPU (``--cpu``, or a board's with ``--board``; neither, or the
host, is the portable export), the package formats (``--format``) and the C names of the
exported models (``--name``)."""

from __future__ import annotations

import keyword
import re
from typing import Dict, List, Optional, Sequence

from ...board import Board, list_boards, load_board
from ...errors import GenerateError

# Every format the export folder can be at once; "all" (the default) is every one of them.
FORMATS = ("cmake", "make", "arduino", "platformio", "zephyr", "espidf")
ALL_FORMATS = "all"

_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# C and C++ keywords a model's C prefix must not be (its functions would not parse).
_C_KEYWORDS = (
    "auto break case char const continue default do double else enum extern float for goto "
    "if inline int long register restrict return short signed sizeof static struct switch "
    "typedef union unsigned void volatile while bool true false class delete new namespace "
    "operator private protected public template this throw try catch virtual asm"
)
_RESERVED = frozenset(_C_KEYWORDS.split()) | frozenset(keyword.kwlist) - {"None", "True", "False"}
# Prefixes the runtime and TVM keep for themselves.
_TAKEN_PREFIXES = ("mlf_", "tvm", "TVM", "__")


def parse_formats(text: Optional[str]) -> List[str]:
    """``cmake,make`` → those formats in canonical order; None or ``all`` → every one."""
    if text is None or text.strip() == ALL_FORMATS:
        return list(FORMATS)
    asked = [word.strip() for word in text.split(",") if word.strip()]
    unknown = [word for word in asked if word not in FORMATS]
    if unknown or not asked:
        raise GenerateError(
            f"unknown export format {', '.join(unknown) or repr(text)}",
            hint=f"one or more of: {', '.join(FORMATS)} (comma-separated), or {ALL_FORMATS}",
        )
    return [name for name in FORMATS if name in asked]


def cpu_boards() -> Dict[str, Board]:
    """CPU name (``host``, ``cortex-m4``, ``rv32imac``, ...) → the first board with it, whose
    compiler flags an export for that CPU uses."""
    found: Dict[str, Board] = {}
    for board in list_boards():
        name = "host" if board.is_host else (board.cpu.core if board.cpu else "")
        # QEMU boards first: their flags are what the project's own tests build with
        if name and (name not in found or (board.is_qemu and not found[name].is_qemu)):
            found[name] = board
    return found


def export_board(board: Optional[str], cpu: Optional[str]) -> Board:
    """The board whose CPU an export is for: ``board`` by name, or the one that stands for
    ``cpu``; the host (the portable export, planned and checked with the host's compiler)
    when neither is given."""
    if board and cpu:
        raise GenerateError("give --board or --cpu, not both", hint="--cpu names the core only")
    if board:
        return load_board(board)
    if not cpu:
        return load_board("host")
    known = cpu_boards()
    if cpu not in known:
        raise GenerateError(f"unknown CPU {cpu!r}", hint="one of: " + ", ".join(sorted(known)))
    return known[cpu]


def free_c_name(name: str) -> bool:
    """Whether ``name`` can prefix a model's C API: an identifier, no keyword, no prefix the
    runtime or TVM keeps."""
    return bool(_C_IDENTIFIER.match(name)) and not (
        name in _RESERVED or name.startswith(_TAKEN_PREFIXES)
    )


def export_target(cpu: Optional[str], cmsis_nn: bool) -> str:
    """What an export is for, in the words of its files' comments."""
    if cpu is None:
        return "any C99 CPU (a portable export: what depends on the target the compiler decides)"
    if cmsis_nn:
        return f"{cpu} (its CMSIS-NN was built for that CPU)"
    return f"{cpu} (its C is portable C99 all the same)"


def check_c_name(name: str, where: str) -> None:
    """A model's C prefix must be a C identifier that names nothing else."""
    if not _C_IDENTIFIER.match(name):
        raise GenerateError(
            f"{where} {name!r} is not a C identifier, so it cannot prefix the model's C API",
            hint="give the model a C name with --name NAME (letters, digits, '_')",
        )
    if name in _RESERVED or name.startswith(_TAKEN_PREFIXES):
        raise GenerateError(
            f"{where} {name!r} is a C keyword or a prefix the runtime or TVM uses",
            hint="give the model another C name with --name NAME",
        )


def export_names(model_names: Sequence[str], name: Optional[str]) -> List[str]:
    """The C prefix of every exported model: the archive's names, or ``--name`` for one."""
    if name is not None:
        if len(model_names) != 1:
            raise GenerateError(
                f"--name renames one model; {len(model_names)} are exported",
                hint="export them one at a time with --model NAME --name C_NAME",
            )
        check_c_name(name, "--name")
        return [name]
    names = list(model_names)
    for model_name in names:
        check_c_name(model_name, "model name")
    if names.count("default") > 1:
        raise GenerateError(
            "two models are both named 'default' (TVM's name when none is given)",
            hint="export each with --model and its own --name",
        )
    return names
