"""The dependency cache: fetched git checkouts and downloaded archives, ready to build.

Layout (``<root>`` is :func:`default_cache_dir` unless overridden)::

    <root>/entries/<key>/<resolved>/tree/       the dependency's files (no .git)
    <root>/entries/<key>/<resolved>/meta.json   url_type, url, version_spec, resolved, fetched
    <root>/entries/<key>/latest                 name of the newest <resolved> (one line)
    <root>/staging/<key>-<random>/              a fetch in progress (work/ + entry/)
    <root>/locks/<key>.lock                     flock'ed while <key> is being fetched

``<key>`` is a readable slug of the url plus 20 hex digits of SHA-256 over
``[url_type, url, version_spec]``; ``<resolved>`` is the git commit (40 hex digits) or the
archive's SHA-256 (64 hex digits). An entry is written once in ``staging/`` and renamed into
``entries/`` in one step, so a reader sees a whole entry or none: an interrupted fetch leaves
only a staging directory, which the next fetch of that key removes. Entries are never
modified after the rename. A second process fetching the same key waits on the key's lock
(POSIX flock); where there is no flock, losing the rename race just reuses the winner's entry.

An entry is reused whenever it exists, for tags, commits *and branches*: a branch is fetched
again only with ``refresh=True`` (the lock file, not the cache, is what pins versions).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional

from ..errors import DependencyError
from ..jsontext import parse_json
from .spec import DependencySpec

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: rename-race tolerance only
    fcntl = None  # type: ignore[assignment]

ENV_CACHE = "MLF_PROJECT_CACHE"
_RESOLVED = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")
_META_FILE = "meta.json"

# A fetcher fills ``tree`` (which does not exist yet; the fetcher creates it) using ``work`` as
# scratch space, and returns what it resolved to (commit sha or archive sha256).
Fetcher = Callable[[Path, Path], str]


def default_cache_dir() -> Path:
    """``$MLF_PROJECT_CACHE``, else ``$XDG_CACHE_HOME/mlf-project-api``, else
    ``~/.cache/mlf-project-api``."""
    configured = os.environ.get(ENV_CACHE)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "mlf-project-api"
    return Path.home() / ".cache" / "mlf-project-api"


def cache_key(spec: DependencySpec) -> str:
    """The cache key of a dependency: slug of its url + hash of (url_type, url, version_spec)."""
    digest = hashlib.sha256(
        json.dumps([spec.url_type, spec.url, spec.version_spec]).encode("utf-8")
    ).hexdigest()[:20]
    tail = spec.url.rstrip("/").rsplit("/", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{tail}-{spec.version_spec}").strip("._-")[:40]
    return f"{slug}-{digest}" if slug else digest


@dataclass(frozen=True)
class CacheEntry:
    key: str
    resolved: str
    path: Path  # entries/<key>/<resolved>

    @property
    def tree(self) -> Path:
        return self.path / "tree"

    def meta(self) -> Dict[str, Any]:
        try:
            data = parse_json((self.path / _META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


class Cache:
    """The cache directory. Nothing is created until something is fetched."""

    def __init__(self, root: Optional[Path] = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_cache_dir()

    # --- lookup ------------------------------------------------------------------------

    def key_dir(self, spec: DependencySpec) -> Path:
        return self.root / "entries" / cache_key(spec)

    def lookup(self, spec: DependencySpec, resolved: Optional[str] = None) -> Optional[CacheEntry]:
        """The ready entry for ``spec`` (pinned to ``resolved`` if given, else the latest)."""
        key = cache_key(spec)
        key_dir = self.root / "entries" / key
        if resolved is None:
            try:
                resolved = (key_dir / "latest").read_text(encoding="ascii").strip()
            except (OSError, UnicodeDecodeError):
                return None
        if not _RESOLVED.match(resolved):
            return None
        entry = CacheEntry(key, resolved, key_dir / resolved)
        return entry if entry.tree.is_dir() else None

    # --- fetching ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, key: str, on_wait: Optional[Callable[[], None]]) -> Iterator[None]:
        if fcntl is None:  # pragma: no cover
            yield
            return
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{key}.lock", "a+b") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                if on_wait:
                    on_wait()
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _remove_stale_staging(self, key: str) -> None:
        # Called with the key's lock held: any staging dir of this key is a dead fetch's.
        staging = self.root / "staging"
        if fcntl is None or not staging.is_dir():  # pragma: no cover - cannot know who owns it
            return
        for leftover in staging.glob(f"{key}-*"):
            shutil.rmtree(leftover, ignore_errors=True)

    def fetch(
        self,
        spec: DependencySpec,
        fetcher: Fetcher,
        *,
        want: Optional[str] = None,
        refresh: bool = False,
        on_wait: Optional[Callable[[], None]] = None,
    ) -> CacheEntry:
        """The entry for ``spec``: reused if present (unless ``refresh``), else fetched.

        ``want`` pins the result (a lock file's commit, a declared sha256): an entry for it is
        reused, and a fetch that resolves to anything else is discarded with an error.
        """
        key = cache_key(spec)
        with self._locked(key, on_wait):
            if not refresh:
                found = self.lookup(spec, want)
                if found is not None:
                    return found
            self._remove_stale_staging(key)
            (self.root / "staging").mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=self.root / "staging"))
            try:
                work = staging / "work"
                entry_dir = staging / "entry"
                work.mkdir()
                entry_dir.mkdir()
                resolved = fetcher(work, entry_dir / "tree")
                if not _RESOLVED.match(resolved):
                    raise DependencyError(
                        f"{spec.short_name}: internal error: bad resolved id {resolved!r}"
                    )
                if want is not None and resolved != want:
                    raise DependencyError(
                        f"{spec.short_name}: {spec.url_type} {spec.url} resolved to {resolved}, "
                        f"not the expected {want}",
                        hint="the source changed since it was pinned (lock file or sha256)",
                    )
                meta = {
                    "short_name": spec.short_name,
                    "url_type": spec.url_type,
                    "url": spec.url,
                    "version_spec": spec.version_spec,
                    "resolved": resolved,
                    "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
                (entry_dir / _META_FILE).write_text(
                    json.dumps(meta, indent=2) + "\n", encoding="utf-8"
                )
                key_dir = self.root / "entries" / key
                key_dir.mkdir(parents=True, exist_ok=True)
                final = key_dir / resolved
                if refresh and final.exists():
                    pass  # same content already there (entries never change): keep it
                else:
                    try:
                        os.rename(entry_dir, final)
                    except OSError as err:
                        # Lost a race with a process that had no lock: its entry is as good.
                        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not final.is_dir():
                            raise
                self._set_latest(key_dir, resolved)
                return CacheEntry(key, resolved, final)
            finally:
                shutil.rmtree(staging, ignore_errors=True)

    @staticmethod
    def _set_latest(key_dir: Path, resolved: str) -> None:
        handle, tmp = tempfile.mkstemp(prefix=".latest-", dir=key_dir)
        with os.fdopen(handle, "w", encoding="ascii") as out:
            out.write(resolved + "\n")
        os.replace(tmp, key_dir / "latest")
