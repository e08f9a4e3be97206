"""A compiler reached through a fake ``$HOME``, and a model that reaches into that home
(issue 41): the builders of tests/test_hostile_toolchain.py.

:func:`make_home` makes a home directory with a secret at ``.ssh/key.h`` and a ``bin/`` for
links to real compilers (``~/bin/cc -> /usr/bin/gcc``, the ccache or wrapper setup that once
granted the whole home to the build). :func:`key_archive` is the factory's ``mlp`` with C
that ``#include``\\s that key. :func:`fake_compiler` writes a shell script that answers a
GCC driver's queries with the directories a test chooses.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Sequence

import hostile
from project_api.modelgen import catalog

SECRET_MARK = "mlf-hostile-SECRET"  # in hostile.SECRET_TEXT, the key's content


@dataclass(frozen=True)
class FakeHome:
    root: Path
    key: Path  # root/.ssh/key.h: a C string literal holding SECRET_MARK

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def link(self, name: str, program: str) -> Path:
        """``bin/<name>``, a link to the real file of ``program`` (found on PATH)."""
        found = shutil.which(program)
        assert found is not None, program
        link = self.bin / name
        if not link.is_symlink():
            link.symlink_to(os.path.realpath(found))
        return link


def make_home(root: Path) -> FakeHome:
    (root / ".ssh").mkdir(parents=True, exist_ok=True)
    (root / "bin").mkdir(exist_ok=True)
    key = root / ".ssh" / "key.h"
    key.write_text(hostile.SECRET_TEXT + "\n")
    key.chmod(0o600)
    assert SECRET_MARK in hostile.SECRET_TEXT
    return FakeHome(root, key)


def key_archive(dest: Path, key: Path) -> Path:
    """The factory's ``mlp`` whose operator keeps a string ``#include "<key>"`` makes."""
    plain = catalog()["mlp"]().write(dest.with_name(dest.stem + "-plain.tar"))
    return hostile.build_archive(plain, dest, key, "include")


def fake_compiler(
    path: Path,
    *,
    install: str = "",
    programs: Sequence[str] = (),
    libraries: Sequence[str] = (),
    sysroot: str = "",
    includes: Sequence[str] = (),
) -> Path:
    """A ``/bin/sh`` script at ``path`` answering ``-print-search-dirs``, ``-print-sysroot``
    and ``-v -E`` as a GCC driver would, with these directories."""
    search_dirs = [f"install: {install}", "programs: =" + ":".join(programs)]
    search_dirs.append("libraries: =" + ":".join(libraries))
    answers: Dict[str, str] = {
        "-print-search-dirs": "\n".join(search_dirs),
        "-print-sysroot": sysroot,
    }
    include_report = "\n".join(
        ["#include <...> search starts here:", *(f" {d}" for d in includes), "End of search list."]
    )
    lines = ["#!/bin/sh", 'case "$1" in']
    for flag, text in answers.items():
        lines.append(f"  {flag}) cat <<'EOF'\n{text}\nEOF\n  ;;")
    lines.append(f"  -v) cat >&2 <<'EOF'\n{include_report}\nEOF\n  ;;")
    lines.append('  -print-prog-name=*) echo "${1#-print-prog-name=}" ;;')
    lines.append("  *) exit 1 ;;")
    lines.append("esac")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
