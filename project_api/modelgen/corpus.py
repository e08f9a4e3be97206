"""The reference corpus: real TVM archives (``NAME.tar``) with their description
(``NAME.json``) and TVM's own inputs and outputs for them (``NAME.inputs.npz``,
``NAME.outputs.npz``), as the factory's models have numpy references. The test suite and the
benchmarks find it here.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional

CORPUS_ENV = "MLF_PROJECT_CORPUS"
CMSIS_NN_ENV = "MLF_PROJECT_CMSIS_NN"
CMSIS_NN_TAG = "v4.1.0"  # what the corpus's kws_int8_cmsisnn was compiled against


def corpus_dir(checkout: Path) -> Path:
    """$MLF_PROJECT_CORPUS, else ``shared/mlf`` beside the repository ``checkout`` (where CI
    puts it)."""
    configured = os.environ.get(CORPUS_ENV)
    if configured:
        return Path(configured)
    return Path(checkout).parent / "shared" / "mlf"


def corpus_archives(directory: Path) -> List[Path]:
    """The archives of the corpus in ``directory``, sorted; none when it does not exist."""
    if not directory.is_dir():
        return []
    return sorted(directory.glob("*.tar"))


def shared_cmsis_nn_dir(checkout: Path) -> Path:
    """Where CI keeps CMSIS-NN: ``shared/deps/CMSIS-NN.git`` beside the repository, a bare
    git repository holding :data:`CMSIS_NN_TAG`."""
    return Path(checkout).parent / "shared" / "deps" / "CMSIS-NN.git"


@functools.cache
def shared_cmsis_nn(checkout: Path) -> Optional[Path]:
    """A usable copy of :func:`shared_cmsis_nn_dir` (None when it is absent). The shared
    repository comes read-only and without its (empty) ``refs/`` folder, which git needs to
    recognise a repository: the copy has the folder restored, and goes at exit."""
    shared = shared_cmsis_nn_dir(checkout)
    if not shared.is_dir():
        return None
    copy = Path(tempfile.mkdtemp(prefix="mlf-cmsis-nn-")) / "CMSIS-NN.git"
    shutil.copytree(shared, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    (copy / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (copy / "refs" / "tags").mkdir(parents=True, exist_ok=True)
    atexit.register(shutil.rmtree, copy.parent, True)
    return copy


@functools.cache
def shared_cmsis_nn_checkout(checkout: Path) -> Optional[Path]:
    """Tag :data:`CMSIS_NN_TAG` of :func:`shared_cmsis_nn` checked out once per process (None
    when the shared repository is absent or the tag cannot be checked out)."""
    repository = shared_cmsis_nn(checkout)
    if repository is None:
        return None
    tree = Path(tempfile.mkdtemp(prefix="mlf-cmsis-nn-tree-")) / "CMSIS-NN"
    atexit.register(shutil.rmtree, tree.parent, True)
    done = subprocess.run(
        ["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1",
         "--branch", CMSIS_NN_TAG, repository.resolve().as_uri(), str(tree)],
        capture_output=True,
    )  # fmt: skip
    return tree if done.returncode == 0 else None
