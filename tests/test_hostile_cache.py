"""A model whose compiler output forges the runtime cache's lines (issue 41, part 1).

The parent once copied ``staged/<name>`` to ``library`` as the last ``mlf-runtime-cache:
miss <library> staged <staged>`` line of the build log said, and ``#pragma message`` puts such
a line there: a model could copy any file the user can read to any new place, mode 0644. Now
the parent computes every place itself. With the sandbox on, ``mlf-project run x.tar --board
host`` computes the right outputs, the forged line is in the build log, nothing is copied
where it asks and the secret is in no file or message; the control is the same build's own
library, staged where the parent looks and stored in the cache. The build on
qemu-mps2-an385 is held to the same.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest
from conftest import requires_arm
from hostile import build as hostile_build

from project_api import sandbox
from project_api.build import runtime_cache
from project_api.driver import Project
from project_api.modelgen import catalog, compare_outputs

# What the parent once took the cache's places from (the last match of the build log).
OLD_MISS = r"mlf-runtime-cache: miss (.+) staged (.+)$"

pytestmark = pytest.mark.skipif(
    not sandbox.support().available, reason=f"no sandbox here: {sandbox.support().reason}"
)


@pytest.fixture(scope="module")
def forgery(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path, Path]:
    """(the hostile archive, the 0600 secret, where the forged line wants its copy)."""
    root = tmp_path_factory.mktemp("forgery")
    secret = hostile_build.make_secret(root / "secretdir")
    pwn = root / "pwn" / secret.name
    base = catalog()["mlp"]().write(root / "mlp.tar")
    return hostile_build.cache_forgery_archive(base, root / "x.tar", pwn, secret), secret, pwn


def check_nothing_copied(secret: Path, pwn: Path, build_dir: Path, cache: Path,
                         messages: str, roots: List[Path]) -> None:  # fmt: skip
    log = (build_dir / "build.log").read_text()
    # The model spoke last: the parent that read places from the log took these.
    assert re.findall(OLD_MISS, log, re.MULTILINE)[-1] == (str(pwn), str(secret.parent))
    assert not pwn.parent.exists()
    text = secret.read_bytes().strip()
    assert text not in messages.encode()
    assert hostile_build.files_holding([*roots, pwn.parent.parent], text, skip=secret) == []
    # Control: the library this build compiled, staged where the parent looks, is stored.
    entries = [entry for entry in cache.iterdir() if entry.is_dir()]
    assert len(entries) == 1, entries
    stored = entries[0] / runtime_cache.LIBRARY
    staged = build_dir / runtime_cache.STAGING / entries[0].name / runtime_cache.LIBRARY
    assert stored.read_bytes() == staged.read_bytes()
    assert stored.stat().st_mode & 0o777 == 0o644


def test_host_run_copies_nothing_a_log_line_asks_for(
    forgery: Tuple[Path, Path, Path], tmp_path: Path
) -> None:
    archive, secret, pwn = forgery
    cache, project = tmp_path / "cache", tmp_path / "proj"
    model = catalog()["mlp"]()
    inputs = model.sample_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    env = {k: v for k, v in os.environ.items() if k != sandbox.ENV}
    env[runtime_cache.ENV] = str(cache)
    argv = ["run", str(archive), "--board", "host", "--project-dir", str(project)]
    argv += ["--input", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")]
    result = subprocess.run(
        [sys.executable, "-m", "project_api", *argv],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outputs = dict(np.load(str(tmp_path / "out.npz")))
    assert compare_outputs(outputs, model.reference(inputs)) == []
    check_nothing_copied(secret, pwn, project / "build", cache, result.stdout + result.stderr,
                         [tmp_path])  # fmt: skip


@requires_arm
def test_an385_build_copies_nothing_a_log_line_asks_for(
    forgery: Tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive, secret, pwn = forgery
    cache = tmp_path / "cache"
    monkeypatch.setenv(runtime_cache.ENV, str(cache))
    monkeypatch.delenv(sandbox.ENV, raising=False)
    project = Project.generate(archive, tmp_path / "proj", board="qemu-mps2-an385")
    seen: List[str] = []
    assert project.build(progress=seen.append).is_file()
    check_nothing_copied(secret, pwn, project.build_dir, cache, "\n".join(seen), [tmp_path])
