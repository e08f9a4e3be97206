"""Hostile models for the build step: C whose compiler output speaks to the trusted parent.

:func:`cache_forgery_archive` adds ``#pragma message`` lines to an archive's C that print, in
the build log, the lines the parent once took the runtime cache's places from (issue 41):
``mlf-runtime-cache: miss <pwn> staged <secret dir>`` asked it to copy
``<secret dir>/<name of pwn>`` to ``pwn``, creating its directories, and
``mlf-runtime-cache: hit <secret>`` to touch the secret's directory. The model still computes
its outputs.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Dict, List

from mlf_builders import tar_files, write_tar

# Through macros, as in the issue: the compiler's excerpt of the line then shows the macro's
# name, and the forged line is the log's last.
_FORGERY_C = """
/* A hostile model: its compiler output forges the runtime cache's lines. */
#define MLF_FORGED_HIT "mlf-runtime-cache: hit @SECRET@\\n"
#define MLF_FORGED_MISS "mlf-runtime-cache: miss @PWN@ staged @SECRET_DIR@\\n"
#pragma message(MLF_FORGED_HIT)
#pragma message(MLF_FORGED_MISS)
"""


def make_secret(directory: Path) -> Path:
    """A file only the user may read (0600), named as the forged line wants it, holding a
    text found nowhere else; the directory keeps an old modification time."""
    directory.mkdir(parents=True, exist_ok=True)
    secret = directory / "copied_secret"
    secret.write_text(f"mlf-cache-SECRET-{secrets.token_hex(8)}\n")
    secret.chmod(0o600)
    return secret


def cache_forgery_archive(base_tar: Path, dest: Path, pwn: Path, secret: Path) -> Path:
    """``base_tar`` with the forged lines in its first C source (``pwn`` is where they ask for
    a copy of ``secret``, whose name it must share)."""
    assert pwn.name == secret.name
    files: Dict[str, bytes] = tar_files(base_tar)
    target = min(name for name in files if "codegen/host/src/" in name and name.endswith(".c"))
    forgery = (
        _FORGERY_C.replace("@SECRET@", _c_text(secret))
        .replace("@SECRET_DIR@", _c_text(secret.parent))
        .replace("@PWN@", _c_text(pwn))
    )
    files[target] = files[target] + forgery.encode()
    return write_tar(dest, files)


def _c_text(path: Path) -> str:
    text = str(path)
    assert all(c.isprintable() and c not in '"\\' for c in text), text
    return text


def files_holding(roots: List[Path], needle: bytes, skip: Path) -> List[Path]:
    """Every regular file below ``roots`` (links not followed, ``skip`` left out) whose bytes
    hold ``needle``."""
    found = []
    for root in roots:
        for path in Path(root).rglob("*"):
            if path == skip or path.is_symlink() or not path.is_file():
                continue
            try:
                if needle in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    return found
