"""The reference corpus: real TVM archives (``NAME.tar``) with their description
(``NAME.json``) and TVM's own inputs and outputs for them (``NAME.inputs.npz``,
``NAME.outputs.npz``), as the factory's models have numpy references. The test suite and the
benchmarks find it here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

CORPUS_ENV = "MLF_PROJECT_CORPUS"


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
