"""The ``git`` resolver: fetch one tag, branch or commit of a repository, without its history.

How: ``git init`` an empty repository, ``git fetch --depth 1 -- <url> <version_spec>`` (a tag,
a branch or a full commit sha all work this way), check out ``FETCH_HEAD``. When the server
refuses a shallow fetch of that name (an abbreviated sha, a server that does not serve
unadvertised commits), fetch all branches and tags and ask ``rev-parse``. The checkout is
kept without ``.git``; the commit is returned and recorded (cache meta, lock file).

Safety: the url and ref were checked by :func:`.spec.check_git_url` / :func:`.check_git_ref`
(no leading ``-``, no ``<transport>::``, known schemes only) and are checked again here;
they always follow a ``--``; ``GIT_ALLOW_PROTOCOL`` limits git to file, git, http, https and
ssh, and ``protocol.ext.allow=never`` is set as well; git never prompts (no terminal,
``GIT_TERMINAL_PROMPT=0``, stdin is /dev/null); submodules are not fetched; the checkout may
contain symlinks only if they stay inside it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from ..errors import DependencyError
from .spec import GIT_ALLOWED_PROTOCOLS, DependencySpec, check_git_ref, check_git_url

GIT_TIMEOUT_S = 1800
_HEX_SHA = re.compile(r"^[0-9a-f]{40}$")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?[^/:\s]{2,}:")


def git_environment() -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")
    }
    env.update(
        GIT_ALLOW_PROTOCOL=GIT_ALLOWED_PROTOCOLS,
        GIT_TERMINAL_PROMPT="0",
        GCM_INTERACTIVE="never",
        GIT_SSH_COMMAND=env.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
        LC_ALL="C",
    )
    return env


def git_source(spec: DependencySpec, base_dir: Path) -> str:
    """The url to hand to git: as given for remote urls; a ``file://`` url for a local path
    (absolute or relative to ``base_dir``), so that shallow fetches work on it too."""
    url = spec.url
    check_git_url(url, spec.short_name)
    if _URL_SCHEME.match(url):
        return url
    local = Path(url).expanduser()
    if not local.is_absolute():
        local = base_dir / local
    if local.exists():
        return local.resolve().as_uri()
    if _SCP_LIKE.match(url):
        return url  # user@host:path (ssh)
    raise DependencyError(
        f"{spec.short_name}: git repository {url!r} does not exist (looked at {local})"
    )


def _run(args: List[str], cwd: Path, what: str, config: Sequence[str] = ()) -> str:
    command = [
        "git",
        *config,
        "-c",
        "protocol.ext.allow=never",
        "-c",
        "protocol.fd.allow=never",
        "-c",
        "advice.detachedHead=false",
        "-c",
        "init.defaultBranch=main",
        *args,
    ]
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=git_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise DependencyError(
            f"{what}: git is not installed", hint="install git, or give the dependency as a path"
        ) from None
    except subprocess.TimeoutExpired:
        raise DependencyError(f"{what}: git {args[0]} took more than {GIT_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = " ".join(done.stderr.decode("utf-8", "replace").split())[-600:]
        raise _GitFailed(f"{what}: git {args[0]} failed: {tail}")
    return done.stdout.decode("utf-8", "replace").strip()


class _GitFailed(DependencyError):
    pass


def _check_links(tree: Path, what: str) -> None:
    root = os.path.realpath(tree)
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                pointed = os.path.realpath(path)
                if pointed != root and not pointed.startswith(root + os.sep):
                    rel = os.path.relpath(path, tree)
                    raise DependencyError(
                        f"{what}: the checkout holds a link escaping it: {rel} -> "
                        f"{os.readlink(path)}"
                    )


def fetch_git(
    source: str,
    version_spec: str,
    tree: Path,
    *,
    want_commit: Optional[str] = None,
    what: str = "git",
    progress: Optional[Callable[[str], None]] = None,
    redirects: bool = True,
) -> str:
    """Check out ``version_spec`` (or exactly ``want_commit``) of ``source`` into ``tree``
    (which must not exist) and return the commit sha. Without ``redirects`` an http(s)
    server's redirect is not followed (an archive's dependency stays on an allowed host)."""
    config = () if redirects else ("-c", "http.followRedirects=false")
    check_git_url(source, what)
    check_git_ref(version_spec, what)
    if want_commit is not None and not _HEX_SHA.match(want_commit):
        raise DependencyError(f"{what}: locked commit {want_commit!r} is not a 40-digit sha")
    target = want_commit or version_spec
    tree.parent.mkdir(parents=True, exist_ok=True)
    _run(["init", "-q", "--", str(tree)], tree.parent, what)
    try:
        _run(["fetch", "-q", "--depth", "1", "--no-tags", "--", source, target], tree, what, config)
        commit = _run(["rev-parse", "--verify", "-q", "FETCH_HEAD^{commit}"], tree, what)
    except _GitFailed as shallow_error:
        if progress:
            progress(f"{what}: shallow fetch of {target} refused; fetching all branches and tags")
        try:
            _run(
                [
                    "fetch",
                    "-q",
                    "--no-tags",
                    "--",
                    source,
                    "+refs/heads/*:refs/remotes/origin/*",
                    "+refs/tags/*:refs/tags/*",
                ],
                tree,
                what,
                config,
            )
        except _GitFailed:
            raise shallow_error from None
        commit = ""
        for candidate in (target, f"refs/remotes/origin/{target}"):
            try:
                commit = _run(
                    ["rev-parse", "--verify", "-q", "--end-of-options", candidate + "^{commit}"],
                    tree,
                    what,
                )
                break
            except _GitFailed:
                continue
        if not commit:
            raise DependencyError(
                f"{what}: {source} has no tag, branch or commit {target!r}"
            ) from None
    if not _HEX_SHA.match(commit):
        raise DependencyError(f"{what}: git gave an unexpected commit id {commit!r}")
    if want_commit is not None and commit != want_commit:
        raise DependencyError(f"{what}: fetched {commit}, not the locked {want_commit}")
    _run(["checkout", "-q", "--detach", commit], tree, what)
    shutil.rmtree(tree / ".git")
    _check_links(tree, what)
    return commit
