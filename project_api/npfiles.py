"""Arrays from the ``.npz`` / ``.npy`` files a user gives (run's inputs, standalone samples,
MLPerf datasets): read without pickles (``allow_pickle=False``: such files are untrusted data,
docs/security.md), a missing or unreadable file worded by the caller in one line."""

from __future__ import annotations

import zipfile
from typing import Any, Dict, Type, Union

import numpy as np

from .errors import MlfProjectError

Arrays = Union[Dict[str, np.ndarray], np.ndarray]


def load_arrays(
    path: Any, *, what: str, error: Type[MlfProjectError], kinds: str = ".npz/.npy"
) -> Arrays:
    """An ``.npz``'s arrays by key, or a ``.npy``'s one array (what it stands for is the
    caller's business). ``error(f"{what} {path}: no such file")`` and ``error(f"{what}
    {path}: not a readable {kinds} (…)")`` for files that cannot be used."""
    try:
        loaded = np.load(str(path), allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return loaded
        with loaded as data:
            return {key: np.asarray(data[key]) for key in data.files}
    except FileNotFoundError:
        raise error(f"{what} {path}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise error(f"{what} {path}: not a readable {kinds} ({err})") from None
