"""Whose word a dependency is: the rule for the ``external_dependencies`` an archive names.

An MLF archive is a data file people download, get from colleagues or pull from CI; opening
or building it must not read the user's files, reach any host it likes or run code nobody
chose. So an entry that comes *from the archive* (``DependencySpec.from_archive``) is held to
this rule before anything is read or fetched, while what the user names (``--dependency``,
``cmsis_path`` / ``$CMSIS_PATH``, a lock file they give with ``--lock``) is trusted as it
always was:

- ``mlf_path``: used where it lies inside the extracted archive; a link anywhere in it that
  leads out of the archive is refused.
- ``path`` (and a ``file://`` or local source of a ``git``/``url`` entry): refused unless it
  lies inside the archive, or the user allows it (``--allow-archive-paths``, option
  ``allow_archive_paths``).
- ``git`` / ``url``: fetched over https, http or git only from an allowed host: the homes of
  the libraries we have recipes for (:data:`DEFAULT_HOSTS`), hosts given with
  ``--allow-host HOST[/PATH]`` (option ``allowed_hosts``), in ``$MLF_PROJECT_ALLOWED_HOSTS``
  or in the file :func:`config_file` names. ``ssh://`` and scp-like ``user@host:path`` use
  the user's keys and ssh configuration: refused. ``ext::``, ``fd::`` and urls that git
  could read as options are refused for everyone (:func:`.spec.check_git_url`).
- Its own ``CMakeLists.txt`` (recipe ``cmake``, or the ``generic`` recipe finding one) runs
  only when the user allows it (``--allow-dependency-cmake``, option
  ``allow_dependency_cmake``); without it the dependency must build from a recipe (our
  CMSIS-NN recipe, or ``sources``/``include_dirs`` globs), which compiles C and runs nothing.

:func:`check_trust` is the one seam: the generator calls it on the merged dependencies
before it creates a directory; :func:`check_builds` refuses, once the files are there, a
dependency whose build would run its CMakeLists.txt. ``info`` shows :func:`assess`'s verdicts.
"""

from __future__ import annotations

import os
import posixpath
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import DependencyError
from .path import resolve_mlf_path
from .recipes import plan_build
from .resolved import ResolvedDependency
from .spec import DependencySpec

PATHS_FLAG = "--allow-archive-paths"
HOST_FLAG = "--allow-host"
CMAKE_FLAG = "--allow-dependency-cmake"
ENV_HOSTS = "MLF_PROJECT_ALLOWED_HOSTS"
CONFIG_NAME = "allowed_hosts"

# The homes of the libraries our recipes know (recipes.py: CMSIS-NN >= 4 and the CMSIS 5
# tree). A bare host would let anyone with an account there in; GitHub's archive downloads
# (…/archive/refs/tags/…) redirect to codeload.github.com under the same owner/repository.
DEFAULT_HOSTS: Tuple[str, ...] = (
    "github.com/ARM-software/CMSIS-NN",
    "codeload.github.com/ARM-software/CMSIS-NN",
    "github.com/ARM-software/CMSIS_5",
    "codeload.github.com/ARM-software/CMSIS_5",
)
REMOTE_SCHEMES = ("https", "http", "git")
_SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?[^/:\s]{2,}:")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_HOST_ENTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[^\s?#]*)?$")


def config_file() -> Path:
    """``$XDG_CONFIG_HOME/mlf-project-api/allowed_hosts``, else
    ``~/.config/mlf-project-api/allowed_hosts``: one ``HOST[/PATH]`` a line, ``#`` comments."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "mlf-project-api" / CONFIG_NAME


def _host_entry(text: str, where: str) -> str:
    """``HOST[:PORT][/PATH]`` lower-cased, without scheme, trailing ``/`` or ``.git``."""
    entry = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*://", "", text.strip()).lower()
    entry = _strip_repo_suffix(entry)
    if not _HOST_ENTRY.match(entry) or ".." in entry.split("/"):
        raise DependencyError(
            f"{where}: {text!r} is not a host to allow (HOST, HOST:PORT or HOST/PATH)"
        )
    return entry


def _strip_repo_suffix(path: str) -> str:
    path = path.rstrip("/")
    return path[: -len(".git")] if path.endswith(".git") else path


def parse_hosts(text: Any, where: str) -> Tuple[str, ...]:
    """Host entries from a string (separated by commas, whitespace or lines; ``#`` starts a
    comment) or a list of strings."""
    if not text:
        return ()
    items = text if isinstance(text, (list, tuple)) else [str(text)]
    entries: List[str] = []
    for item in items:
        for line in str(item).splitlines():
            for word in re.split(r"[\s,]+", line.split("#", 1)[0]):
                if word:
                    entries.append(_host_entry(word, where))
    return tuple(entries)


@dataclass(frozen=True)
class TrustPolicy:
    """What the user allows the archive's dependencies: local paths, hosts, their CMake."""

    allow_archive_paths: bool = False
    allow_dependency_cmake: bool = False
    hosts: Tuple[str, ...] = tuple(h.lower() for h in DEFAULT_HOSTS)

    @classmethod
    def from_options(cls, opts: Mapping[str, Any]) -> TrustPolicy:
        """The policy of generator options ``allow_archive_paths``, ``allow_dependency_cmake``
        and ``allowed_hosts``, plus ``$MLF_PROJECT_ALLOWED_HOSTS`` and :func:`config_file`."""
        hosts = list(cls().hosts)
        hosts += parse_hosts(opts.get("allowed_hosts"), "option allowed_hosts")
        hosts += parse_hosts(os.environ.get(ENV_HOSTS), f"${ENV_HOSTS}")
        config = config_file()
        if config.is_file():
            try:
                text = config.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise DependencyError(f"{config}: cannot read it ({err})") from None
            hosts += parse_hosts(text, str(config))
        return cls(
            allow_archive_paths=bool(opts.get("allow_archive_paths")),
            allow_dependency_cmake=bool(opts.get("allow_dependency_cmake")),
            hosts=tuple(dict.fromkeys(hosts)),
        )

    def allowed_host(self, url: str) -> Optional[str]:
        """The entry that allows ``url`` (a remote url), None when none does."""
        parts = urllib.parse.urlsplit(url)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port
        except ValueError:
            return None
        path = _strip_repo_suffix(urllib.parse.unquote(parts.path)).lower()
        segments = path.split("/")
        if not host or "\\" in url or "." in segments or ".." in segments:
            return None
        for entry in self.hosts:
            where, slash, prefix = entry.partition("/")
            want_host, colon, want_port = where.partition(":")
            if want_host != host or (colon and str(port) != want_port):
                continue
            if not slash or path == "/" + prefix or path.startswith("/" + prefix + "/"):
                return entry
        return None


@dataclass(frozen=True)
class Verdict:
    """Whether a dependency may be used, and where it would come from, before any fetch."""

    spec: DependencySpec
    source: str
    allowed: bool
    reason: str  # why allowed, or the refusal (one line naming the flag)

    def error(self) -> DependencyError:
        return DependencyError(self.reason)

    def to_json(self) -> Dict[str, Any]:
        return {
            "short_name": self.spec.short_name,
            "url_type": self.spec.url_type,
            "url": self.spec.url,
            "version_spec": self.spec.version_spec,
            "from_archive": self.spec.from_archive,
            "source": self.source,
            "allowed": self.allowed,
            "reason": self.reason,
        }


def _where(spec: DependencySpec) -> str:
    return f"{spec.origin} ({spec.short_name})" if spec.origin else spec.short_name


def _local_path(url: str, base_dir: Path) -> Path:
    """The path a local source names, joined and normalised without touching the disk."""
    text = url.strip()
    if text.lower().startswith("file:"):
        text = urllib.request.url2pathname(urllib.parse.urlsplit(text).path)
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = Path(base_dir) / path
    return Path(posixpath.normpath(path.as_posix()))


def _kind_of_source(spec: DependencySpec) -> str:
    """``local``, ``ssh``, ``remote`` or ``other`` for a git/url entry."""
    url = spec.url.strip()
    scheme = _SCHEME.match(url)
    name = scheme.group(1).lower() if scheme and len(scheme.group(1)) > 1 else ""
    if name == "file" or (not name and not (spec.url_type == "git" and _SCP_LIKE.match(url))):
        return "local"
    if name in _SSH_SCHEMES or not name:
        return "ssh"
    if spec.url_type == "url" and name == "git":
        return "other"
    return "remote" if name in REMOTE_SCHEMES and url[len(name) :].startswith("://") else "other"


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _escaping_link(directory: Path, root: Path) -> Optional[str]:
    """The first link under ``directory`` whose target lies outside ``root``."""
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full) and not _inside(Path(os.path.realpath(full)), root):
                return os.path.relpath(full, directory)
    return None


def _own_cmake(spec: DependencySpec, directory: Path) -> bool:
    """Whether building ``directory`` with the spec's recipe would run its CMakeLists.txt."""
    recipe = spec.effective_recipe()
    if recipe.kind in ("cmake",):
        return True
    if recipe.kind != "generic" or recipe.sources or recipe.include_dirs:
        return False
    return (directory / "CMakeLists.txt").is_file()


def _cmake_refusal(spec: DependencySpec) -> str:
    return (
        f"{_where(spec)}: the archive's dependency would run its own CMakeLists.txt; refused "
        f"(allow it with {CMAKE_FLAG}, or give its C files yourself: --dependency "
        f"short_name={spec.short_name},...,sources=GLOBS,include_dirs=DIRS)"
    )


def _inside_archive(
    spec: DependencySpec, directory: Path, archive_root: Path, policy: TrustPolicy
) -> Verdict:
    root = Path(os.path.realpath(archive_root))
    link = _escaping_link(directory, root)
    if link is not None:
        return Verdict(
            spec,
            str(directory),
            False,
            f"{_where(spec)}: {link} in the archive's directory {spec.url!r} is a link leading "
            "out of the archive; refused",
        )
    if not policy.allow_dependency_cmake and _own_cmake(spec, directory):
        return Verdict(spec, str(directory), False, _cmake_refusal(spec))
    return Verdict(spec, str(directory), True, "inside the archive")


def _local(
    spec: DependencySpec,
    policy: TrustPolicy,
    archive_root: Optional[Path],
    base_dir: Path,
) -> Verdict:
    path = _local_path(spec.url, base_dir)
    if archive_root is not None and spec.url_type == "path":
        root = Path(os.path.realpath(archive_root))
        if _inside(path, root) or _inside(path, Path(archive_root)):
            real = Path(os.path.realpath(path))
            if _inside(real, root) and real.is_dir():
                return _inside_archive(spec, real, root, policy)
    if policy.allow_archive_paths:
        return Verdict(spec, str(path), True, f"a local path, allowed by {PATHS_FLAG}")
    return Verdict(
        spec,
        str(path),
        False,
        f"{_where(spec)}: {spec.url_type} {spec.url!r} names a local path outside the archive "
        f"({path}); an archive may not make the tool read your files (allow it with "
        f"{PATHS_FLAG})",
    )


def assess(
    spec: DependencySpec,
    policy: TrustPolicy,
    *,
    archive_root: Optional[Path],
    base_dir: Path,
) -> Verdict:
    """Whether ``spec`` may be used, and where it would come from. Reads nothing outside the
    archive and fetches nothing."""
    where = _where(spec)
    if not spec.from_archive:
        return Verdict(spec, spec.url, True, f"named by you ({spec.origin or 'option'})")
    if spec.effective_recipe().kind == "none":
        return Verdict(spec, spec.url, True, "neither fetched nor compiled (recipe 'none')")
    if spec.effective_recipe().kind == "cmake" and not policy.allow_dependency_cmake:
        return Verdict(spec, spec.url, False, _cmake_refusal(spec))
    if spec.url_type == "mlf_path":
        if archive_root is None:
            return Verdict(spec, spec.url, False, f"{where}: mlf_path needs the archive")
        try:
            directory = resolve_mlf_path(spec, archive_root)
        except DependencyError as err:  # worded as generate and info word it
            return Verdict(spec, spec.url, False, err.message)
        return _inside_archive(spec, directory, archive_root, policy)
    if spec.url_type == "path":
        return _local(spec, policy, archive_root, base_dir)
    kind = _kind_of_source(spec)
    if kind == "local":
        return _local(spec, policy, archive_root, base_dir)
    if kind == "ssh":
        return Verdict(
            spec,
            spec.url,
            False,
            f"{where}: ssh url {spec.url!r} refused from an archive (it would use your ssh keys "
            "and configuration); name it yourself with --dependency if you trust it",
        )
    if kind == "other":
        return Verdict(
            spec,
            spec.url,
            False,
            f"{where}: url {spec.url!r} refused from an archive (only "
            f"{', '.join(REMOTE_SCHEMES)} urls of allowed hosts)",
        )
    entry = policy.allowed_host(spec.url)
    if entry is None:
        host = (urllib.parse.urlsplit(spec.url).hostname or "?").lower()
        return Verdict(
            spec,
            spec.url,
            False,
            f"{where}: host {host} is not allowed to serve an archive's dependency (allow it "
            f"with {HOST_FLAG} {host}, ${ENV_HOSTS} or {config_file()})",
        )
    return Verdict(spec, spec.url, True, f"allowed host {entry}")


def assess_all(
    specs: Iterable[DependencySpec],
    policy: TrustPolicy,
    *,
    archive_root: Optional[Path],
    base_dir: Path,
) -> List[Verdict]:
    return [assess(s, policy, archive_root=archive_root, base_dir=base_dir) for s in specs]


def check_trust(
    specs: Sequence[DependencySpec],
    policy: TrustPolicy,
    *,
    archive_root: Optional[Path],
    base_dir: Path,
) -> List[Verdict]:
    """Every verdict; the first refusal raised as a one-line :class:`DependencyError`."""
    verdicts = assess_all(specs, policy, archive_root=archive_root, base_dir=base_dir)
    for verdict in verdicts:
        if not verdict.allowed:
            raise verdict.error()
    return verdicts


def check_builds(resolved: Sequence[ResolvedDependency], policy: TrustPolicy) -> None:
    """Refuse, now that its files are there, an archive's dependency whose build would run its
    own CMakeLists.txt (a fetched tree the rule could not look into before)."""
    if policy.allow_dependency_cmake:
        return
    for dep in resolved:
        if not dep.spec.from_archive or dep.skipped or dep.path is None:
            continue
        if plan_build(dep.path, dep.recipe, dep.short_name).kind == "cmake":
            raise DependencyError(_cmake_refusal(dep.spec))
