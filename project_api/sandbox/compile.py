"""C files compiled one at a time, each by its own compiler process confined as a build is
(:func:`.policies.build`: it reads the given directories and the toolchain, writes a scratch
directory), several at once under one prepared confinement. Footprint's code estimate and
the export's check of the archive's C both go through :func:`compile_each`."""

from __future__ import annotations

import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from . import policies, prepare

# What a compile may take before it counts as failed (a hostile file can make a compiler
# spin), and how much of its diagnostics is kept (a file can make it print without end).
TIMEOUT_SECONDS = 600
DIAGNOSTICS_KEPT = 16 * 1024
# The severities of a diagnostic line that says why a compile failed (gcc, clang, gas).
_ERROR_SEVERITIES = ("error", "fatal error", "Error")


@dataclass(frozen=True)
class Compiled:
    """One source's compile: ``status`` the compiler's exit status (None: it timed out),
    ``diagnostics`` the start of what it printed, ``measured`` what ``measure`` made of its
    object (None when it failed)."""

    source: Path
    status: Optional[int]
    diagnostics: str
    measured: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.status == 0


def compile_each(
    argv: Sequence[str],
    sources: Sequence[Path],
    read_dirs: Sequence[Path],
    *,
    measure: Optional[Callable[[Path], int]] = None,
    cwd: Optional[Path] = None,
    sandbox_option: Optional[bool] = None,
) -> List[Compiled]:
    """Runs ``argv -c SOURCE -o OBJECT`` for each source (``argv[0]`` the compiler), the
    object in a scratch directory, and ``measure(object)`` on each that compiled. The
    compiler may read ``read_dirs`` (and the toolchain) and nothing else of the user's;
    ``sandbox_option`` False (or ``$MLF_PROJECT_SANDBOX=off``) lifts that. Relative
    sources are taken from ``cwd``, so the diagnostics name them as given."""
    if not sources:
        return []
    compiler = argv[0]
    with tempfile.TemporaryDirectory(prefix="mlf-compile-") as scratch:
        # One prepared confinement serves every compile: each child applies it and closes its
        # own copy of the ruleset, the parent closes its copy once all have run.
        confine = prepare(
            lambda: policies.build([compiler], list(read_dirs), [Path(scratch)]), sandbox_option
        )

        if confine is not None:
            env = policies.build_environment(Path(scratch))
        else:
            env = {**os.environ, "TMPDIR": scratch}

        def compile_one(item: Tuple[int, Path]) -> Compiled:
            index, source = item
            obj = Path(scratch) / f"{index}.o"
            try:
                done = subprocess.run(
                    [*argv, "-c", str(source), "-o", str(obj)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    check=False,
                    timeout=TIMEOUT_SECONDS,
                    cwd=cwd,
                    env=env,
                    preexec_fn=confine.apply if confine is not None else None,
                    start_new_session=True,  # its process group (kill 0) is its own, not ours
                )
            except subprocess.TimeoutExpired:
                return Compiled(source, None, f"timed out after {TIMEOUT_SECONDS} s")
            text = done.stderr[:DIAGNOSTICS_KEPT].decode("utf-8", "replace")
            if done.returncode != 0:
                return Compiled(source, done.returncode, text)
            return Compiled(source, 0, text, measure(obj) if measure is not None else None)

        workers = max(1, min(8, os.cpu_count() or 1))
        try:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(compile_one, enumerate(sources)))
        finally:
            if confine is not None:
                confine.close()


def first_error(diagnostics: str) -> Optional[Tuple[str, str]]:
    """The first ``FILE:LINE[:COL]: error: MESSAGE`` of a compiler's diagnostics, as
    (FILE, MESSAGE); None when there is none. Linear in the text."""
    for line in diagnostics.splitlines():
        location, _, rest = line.partition(": ")
        severity, found, message = rest.partition(": ")
        if found and severity in _ERROR_SEVERITIES and ":" in location:
            return location.split(":", 1)[0], message
    return None
