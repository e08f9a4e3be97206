"""The archive's C compiled here, confined, before an export is written.

An export carries the archive's C (TVM's generated code, its headers, the C API over them,
and the dependencies' sources) into the user's own build, which runs the compiler with the
user's rights. So each of those files is first compiled here for the export's CPU (the host's
``cc``, or the board's cross compiler), with the export's one include directory (``src/``),
by a compiler confined as a build is (:func:`...sandbox.policies.build`): it reads the
export's ``src/`` and the toolchain, nothing else of the user's. A file that does not compile
so (an ``#include`` or ``.incbin`` of a file outside the export, or C that does not compile
for the CPU) refuses the export, in one line naming the file and the reason; ``--force``
writes it anyway and ``export.json`` says which files failed and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Sequence

from ...board import Board
from ...errors import GenerateError
from ...sandbox import enabled
from ...sandbox.compile import Compiled, compile_each, first_error

# How much of a compiler's message a refusal quotes (it may come from the archive's text).
REASON_CHARS = 200
# What the assembler names its input when the compiler pipes to it (-pipe).
_PIPED_INPUT = "{standard input}"


def check_archive_c(
    root: Path,
    files: Sequence[str],
    board: Board,
    target: str,
    *,
    force: bool,
    say: Callable[[str], None],
) -> Dict[str, Any]:
    """Compiles ``files`` (relative to ``root``, the export being written) confined for
    ``target`` (the CPU's name in messages); raises
    GenerateError naming the first that fails unless ``force``. Returns the record for
    ``export.json``."""
    confined = enabled()
    record: Dict[str, Any] = {"files": len(files), "confined": confined, "failed": []}
    compiler = board.compiler_command()
    if compiler is None:
        packages = board.architecture.compiler_packages
        what = board.architecture.compiler if packages else "C compiler (cc, gcc, clang)"
        reason = f"no {what} on PATH" + (f" (apt-get install {packages})" if packages else "")
        if not force:
            raise GenerateError(
                f"cannot check the archive's C before it goes into your build: {reason}",
                hint="install the compiler, or pass --force to write the export unchecked",
            )
        say(f"warning: the archive's C was not compiled here: {reason}")
        return {**record, "compiler": None, "note": reason}
    # -pipe: the assembler reads the compiler's output from a pipe, so its errors (an .incbin
    # it may not open) name no scratch file.
    say(f"compiling the archive's C {'confined ' if confined else ''}for {target}")
    argv = [*compiler, *board.model_opt_flags(), "-pipe", "-w", "-Isrc"]
    done = compile_each(argv, [Path(f) for f in files], [root / "src"], cwd=root)
    failed = [{"file": c.source.as_posix(), "reason": failure_reason(c)} for c in done if not c.ok]
    record.update(compiler=Path(compiler[0]).name, failed=failed)
    if failed and not force:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        how = "confined " if confined else ""
        raise GenerateError(
            f"{first['file']} of the archive's C does not compile {how}for {target}: "
            f"{first['reason']}{more}",
            hint="it would go into your build as it is; pass --force to write the export anyway",
        )
    for failure in failed:
        say(f"warning: {failure['file']} does not compile here: {failure['reason']}")
    return record


def failure_reason(compiled: Compiled) -> str:
    """Why a file did not compile, in a few printable words: the compiler's first error,
    unless it lies in a file outside the export (whose text it might quote)."""
    if compiled.status is None:
        return _printable(compiled.diagnostics)
    found = first_error(compiled.diagnostics)
    if found is None:
        return f"the compiler failed (status {compiled.status})"
    where, message = found
    if where != _PIPED_INPUT and Path(where).is_absolute():
        return f"an error in {_printable(where)}, which lies outside the export"
    return _printable(message)


def _printable(text: str) -> str:
    shown = "".join(c if c.isprintable() else "?" for c in text[: REASON_CHARS + 1])
    return shown if len(shown) <= REASON_CHARS else shown[: REASON_CHARS - 3] + "..."
