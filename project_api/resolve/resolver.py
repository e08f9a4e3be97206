"""Resolve :class:`DependencySpec` lists into ready directories: :func:`resolve_dependencies`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from ..errors import DependencyError
from .cache import Cache, CacheEntry
from .git import fetch_git, git_source
from .lock import LockFile
from .path import resolve_mlf_path, resolve_path
from .recipes import cmsis_nn_root
from .resolved import ResolvedDependency
from .spec import CMSIS_NN_DEPENDENCY_FLAG, DependencySpec
from .trust import TrustPolicy
from .url import fetch_url, url_source

Callback = Callable[[str], None]

TVM_CRT_NOTE = (
    "the archive lists TVM's standalone C runtime (tvm_standalone_crt); it is not compiled: "
    "the project uses mlf-project-api's own runtime, which implements the same ABI"
)


def _check_against_lock(
    specs: Sequence[DependencySpec], lock: LockFile, *, partial: bool = False
) -> None:
    problems = []
    for spec in specs:
        entry = lock.get(spec.short_name)
        if entry is None:
            if not partial:
                problems.append(f"{spec.short_name} is not in the lock file")
            continue
        differing = entry.differs_from(spec)
        if differing:
            problems.append(
                f"{spec.short_name} changed ({', '.join(differing)}): now {spec.describe()}, "
                f"locked {entry.spec.describe()}"
            )
    if problems:
        where = f" {lock.path}" if lock.path else ""
        raise DependencyError(
            f"the lock file{where} does not match the dependencies: " + "; ".join(problems),
            hint="delete the lock file (or generate without it) to resolve them afresh",
        )


def _missing_line(spec: DependencySpec, want: Optional[str]) -> str:
    pinned = f" pinned to {want}" if want else ""
    return f"{spec.describe()}{pinned}"


def check_dependencies(specs: Sequence[DependencySpec], archive_root: Path) -> None:
    """What :func:`resolve_dependencies` checks of ``specs`` without fetching or looking
    outside the archive: an ``mlf_path`` must be a directory of the archive (one with recipe
    ``none``, such as TVM's own runtime, only a path that stays inside it)."""
    for spec in specs:
        if spec.url_type == "mlf_path":
            must_exist = spec.effective_recipe().kind != "none"
            resolve_mlf_path(spec, archive_root, must_exist=must_exist)


def resolve_dependencies(
    specs: Sequence[DependencySpec],
    *,
    archive_root: Optional[Path],
    base_dir: Path,
    cache_dir: Optional[Path] = None,
    offline: bool = False,
    lock: Optional[LockFile] = None,
    partial_lock: bool = False,
    refresh: bool = False,
    progress: Optional[Callback] = None,
    notify: Optional[Callback] = None,
    policy: Optional[TrustPolicy] = None,
) -> List[ResolvedDependency]:
    """Make every dependency available on disk; return them in the order given.

    - ``archive_root``: the extracted archive (for ``mlf_path``); ``base_dir``: the directory
      relative ``path``/``git``/``url`` locations are taken from (the archive's directory).
    - ``cache_dir``: the cache root (default :func:`~.cache.default_cache_dir`).
    - ``offline``: never fetch; a :class:`DependencyError` lists every dependency missing
      from the cache.
    - ``lock``: fetch exactly what it records (git commit, archive sha256); a dependency that
      is not in it, or differs from it, is an error; with ``partial_lock`` one that is not in
      it is resolved afresh (a project's own lock after a dependency changed, see
      :func:`~.lock.reusable_lock`).
    - ``refresh``: fetch git/url dependencies again even when cached (moving branches).
    - ``progress(msg)``: one line per step; ``notify(msg)``: things the user should read
      (e.g. that TVM's bundled runtime is not compiled), each said once.
    - ``policy``: what the user allows the archive's dependencies (:mod:`.trust`; the caller
      has checked them with :func:`~.trust.check_trust`): their downloads are redirected only
      to allowed hosts, their git fetches not redirected at all.
    """
    cache = Cache(cache_dir)
    if lock is not None:
        _check_against_lock(specs, lock, partial=partial_lock)

    def say(message: str) -> None:
        if progress:
            progress(message)

    results: List[Optional[ResolvedDependency]] = []
    fetch_later: List[Tuple[int, DependencySpec, Optional[str]]] = []
    missing: List[str] = []
    for spec in specs:
        recipe = spec.effective_recipe()
        if recipe.kind == "none":  # never fetched nor compiled, whatever its url_type
            path: Optional[Path] = None
            if spec.url_type == "mlf_path" and archive_root is not None:
                path = resolve_mlf_path(spec, archive_root, must_exist=False)
            if spec.is_tvm_crt:
                note = TVM_CRT_NOTE
                if notify:
                    notify(note)
            else:
                note = "recipe 'none': not compiled"
            say(f"{spec.short_name}: skipped ({note})")
            results.append(ResolvedDependency(spec, path, None, recipe, note=note))
            continue
        if spec.url_type in ("mlf_path", "path"):
            if spec.url_type == "path":
                path = resolve_path(spec, base_dir)
            elif archive_root is None:
                raise DependencyError(f"{spec.short_name}: mlf_path needs the extracted archive")
            else:
                path = resolve_mlf_path(spec, archive_root)
            if recipe.kind == "cmsis-nn":
                path = cmsis_nn_root(path)
            say(f"{spec.short_name}: using {spec.url_type} {path}")
            results.append(ResolvedDependency(spec, path, None, recipe))
            continue
        entry = lock.get(spec.short_name) if lock is not None else None
        want = entry.resolved if entry is not None else spec.sha256
        found = None if refresh else cache.lookup(spec, want)
        if found is not None:
            say(f"{spec.short_name}: cached ({found.resolved[:12]}) in {found.path}")
            results.append(ResolvedDependency(spec, found.tree, found.resolved, recipe))
        elif offline:
            missing.append(_missing_line(spec, want))
            results.append(None)
        else:
            fetch_later.append((len(results), spec, want))
            results.append(None)

    if missing:
        hint = "run once without offline mode to fill the cache"
        if any("cmsis-nn" in line for line in missing):
            hint += ", or use a local checkout: --option cmsis_path=/path/to/CMSIS-NN"
        raise DependencyError(
            f"offline: {len(missing)} dependenc{'y is' if len(missing) == 1 else 'ies are'} "
            f"not in the cache {cache.root}: " + "; ".join(missing),
            hint=hint,
        )

    for index, spec, want in fetch_later:
        fetched = _fetch(cache, spec, want, base_dir, refresh=refresh, say=say, policy=policy)
        results[index] = ResolvedDependency(
            spec, fetched.tree, fetched.resolved, spec.effective_recipe()
        )
    return [r for r in results if r is not None]


def _fetch(
    cache: Cache,
    spec: DependencySpec,
    want: Optional[str],
    base_dir: Path,
    *,
    refresh: bool,
    say: Callback,
    policy: Optional[TrustPolicy],
) -> CacheEntry:
    what = spec.short_name
    guarded = policy is not None and spec.from_archive

    def allowed(url: str) -> bool:
        return policy is not None and policy.allowed_host(url) is not None

    if spec.url_type == "git":
        source = git_source(spec, base_dir)
        pin = f" (commit {want})" if want else ""
        say(f"{what}: fetching git {source} at {spec.version_spec}{pin}")

        def fetcher(work: Path, tree: Path) -> str:
            return fetch_git(
                source,
                spec.version_spec,
                tree,
                want_commit=want,
                what=what,
                progress=say,
                redirects=not guarded,
            )

    else:
        source = url_source(spec, base_dir)
        say(f"{what}: downloading {source}")

        def fetcher(work: Path, tree: Path) -> str:
            return fetch_url(
                source,
                work,
                tree,
                expected_sha256=want,
                what=what,
                progress=say,
                redirects=allowed if guarded else None,
            )

    try:
        entry = cache.fetch(
            spec,
            fetcher,
            want=want,
            refresh=refresh,
            on_wait=lambda: say(f"{what}: waiting for another process fetching it"),
        )
    except DependencyError as err:
        if spec.is_cmsis_nn and err.hint is None:
            err.hint = (
                "check the url and version, or use a local checkout: "
                f"--option cmsis_path=/path/to/CMSIS-NN (default: {CMSIS_NN_DEPENDENCY_FLAG})"
            )
        raise
    say(f"{what}: ready ({entry.resolved[:12]}) in {entry.path}")
    return entry
