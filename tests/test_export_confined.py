"""`mlf-project export` compiles the archive's C confined before it writes the library (issue
41, part 5): a model whose C includes or assembles a file outside the export is refused in
one line (exit 2, nothing written, the file's content nowhere); ``--force`` writes it; with
the sandbox off the same C compiles (the control: the refusal is the confinement's); a model
of ordinary C exports as before and the output says the library carries its C."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest
from conftest import requires_arm
from mlf_builders import mlf_files, write_tar

from project_api import sandbox
from project_api.generate.export.check import failure_reason
from project_api.sandbox.compile import Compiled

pytestmark = pytest.mark.skipif(
    not sandbox.support().available, reason=f"no sandbox here: {sandbox.support().reason}"
)

SECRET = "mlf-export-SECRET-7d2e"
_INCLUDE_C = (
    'static const char stolen[] =\n#include "@PATH@"\n;\n'
    "const char* keep(void) { return stolen; }\n"
)
_INCBIN_C = (
    '__asm__(".section .rodata.stolen,\\"a\\"\\n.incbin \\"@PATH@\\"\\n.previous\\n");\n'
    "int keep(void) { return 0; }\n"
)


def _archive(tmp_path: Path, source: str = "") -> Path:
    """The factory's smallest model, with ``source`` added to its C as ``lib9.c``."""
    files = mlf_files()
    if source:
        files["codegen/host/src/lib9.c"] = source.encode()
    return write_tar(tmp_path / "model.tar", files)


def _secret(tmp_path: Path, text: str) -> Path:
    """A file of the user's (0600) outside the archive and the export."""
    folder = tmp_path / "private"
    folder.mkdir(exist_ok=True)
    path = folder / "key.h"
    path.write_text(text)
    path.chmod(0o600)
    return path


def _export(archive: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "project_api", "export", str(archive), str(out), "--name", "m",
         "--no-estimate", "--format", "make", *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _holding(root: Path, text: str, skip: Path) -> List[Path]:
    return [
        p for p in root.rglob("*") if p.is_file() and p != skip and text.encode() in p.read_bytes()
    ]


def _refused(tmp_path: Path, archive: Path, secret: Path, *target: str) -> None:
    """The export of ``archive`` is one line naming the file and ``secret``'s path, exit 2,
    nothing written, the secret's content nowhere."""
    out = tmp_path / "out"
    refused = _export(archive, out, *target)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert lines[-1].startswith("mlf-project export: error: src/m/lib9.c "), refused.stderr
    assert str(secret) in lines[-1] and "--force" in lines[-1], lines[-1]
    assert not any(line.startswith("mlf-project export: error") for line in lines[:-1])
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if "out" in p.name] == []
    assert SECRET not in refused.stdout + refused.stderr


@pytest.mark.parametrize(
    "how, target",
    [
        pytest.param("incbin", [], id="incbin-host"),
        pytest.param("include", ["--cpu", "cortex-m4"], id="include-m4", marks=requires_arm),
    ],
)
def test_outside_file_refused(tmp_path: Path, how: str, target: List[str]) -> None:
    """By the host's cc and by a cross compiler, for an #include and an .incbin."""
    secret = _secret(tmp_path, f'"{SECRET}"\n')  # a C string: it compiles where readable
    template = _INCLUDE_C if how == "include" else _INCBIN_C
    _refused(tmp_path, _archive(tmp_path, template.replace("@PATH@", str(secret))), secret, *target)


def test_outside_include_refused_then_forced(tmp_path: Path) -> None:
    secret = _secret(tmp_path, f'"{SECRET}"\n')
    archive = _archive(tmp_path, _INCLUDE_C.replace("@PATH@", str(secret)))
    _refused(tmp_path, archive, secret)
    out = tmp_path / "out"
    forced = _export(archive, out, "--force")
    assert forced.returncode == 0, forced.stderr
    record = json.loads((out / "export.json").read_text())["archive_c"]
    assert record["confined"] and [f["file"] for f in record["failed"]] == ["src/m/lib9.c"]
    assert "warning: src/m/lib9.c does not compile here" in forced.stderr
    assert "1 of its" in forced.stdout and "written with --force" in forced.stdout
    assert SECRET not in forced.stdout + forced.stderr
    assert _holding(tmp_path, SECRET, secret) == []


def test_unconfined_control_compiles_it(tmp_path: Path) -> None:
    """The same C with the sandbox off compiles (so the refusal above is the confinement's),
    and a compiler error inside a file outside the export is named, never quoted."""
    secret = _secret(tmp_path, f'"{SECRET}"\n')
    archive = _archive(tmp_path, _INCLUDE_C.replace("@PATH@", str(secret)))
    done = _export(archive, tmp_path / "out", "--no-sandbox")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "out" / "export.json").read_text())["archive_c"]
    assert record == {**record, "confined": False, "failed": []}
    assert "compiled here unconfined" in done.stdout and "sandbox off" in done.stderr

    secret.write_text(f"{SECRET} is no C\n")
    refused = _export(archive, tmp_path / "again", "--no-sandbox")
    assert refused.returncode == 2, refused.stderr
    assert f"an error in {secret}, which lies outside the export" in refused.stderr
    assert SECRET not in refused.stdout + refused.stderr
    assert not (tmp_path / "again").exists()


def test_ordinary_export_says_it_carries_the_c(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _export(_archive(tmp_path), out)
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("src/ carries the archive's C into your build (its "), last
    assert "compiled here confined" in last
    record = json.loads((out / "export.json").read_text())["archive_c"]
    assert record["confined"] and record["failed"] == [] and record["files"] >= 3
    assert record["compiler"]


@pytest.mark.parametrize(
    "diagnostics, reason",
    [
        ("src/m/a.c:3:10: fatal error: /x/k.h: Permission denied\n", "/x/k.h: Permission denied"),
        ("{standard input}:9: Error: file not found: /x/k\n", "file not found: /x/k"),
        ("In file included from src/m/a.c:2:\n/x/k.h:1:1: error: 'tok' undeclared\n",
         "an error in /x/k.h, which lies outside the export"),
        ("src/m/a.c:1:1: error: \x1b]0;title\x07 " + "z" * 500, None),
        ("src/m/a.c:1:1: note: '#pragma message: b: error: c'\n", "the compiler failed (status 1)"),
    ],
)  # fmt: skip
def test_failure_reason_is_short_and_printable(diagnostics: str, reason: Optional[str]) -> None:
    found = failure_reason(Compiled(Path("src/m/a.c"), 1, diagnostics))
    if reason is not None:
        assert found == reason
    assert found.isprintable() and len(found) <= 200, repr(found)
