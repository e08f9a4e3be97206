"""Resolving dependencies: git (file:// and plain path), url (local HTTP server), path, mlf_path;
the cache (reuse, staging, interruption, concurrency, offline), the lock file, hostile input.

Everything is local: a git repository and archives built in tmp_path, an HTTP server on
127.0.0.1. Nothing touches the network or the user's cache (every test passes cache_dir).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import pytest
from conftest import git

from project_api.errors import DependencyError
from project_api.resolve import (
    LOCK_FILE_NAME,
    TVM_CRT_NOTE,
    Cache,
    DependencySpec,
    collect_dependencies,
    default_cache_dir,
    install_dependencies,
    parse_dependency,
    read_lock,
    resolve_dependencies,
    write_lock,
)
from project_api.resolve import git as git_module
from project_api.resolve import resolver as resolver_module
from project_api.resolve import url as url_module
from project_api.resolve.git import fetch_git, git_environment

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def commit_answer(repo: Path, value: int, message: str) -> str:
    (repo / "src" / "dep.c").write_text(
        f'#include "dep.h"\nint dep_answer(void) {{ return {value}; }}\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture()
def dep_repo(tmp_path: Path) -> Dict[str, object]:
    """A C library in git: v1 (answer 1, annotated tag), v2 (answer 2), branch 'feature' (3)."""
    repo = tmp_path / "deprepo"
    (repo / "src").mkdir(parents=True)
    (repo / "include").mkdir()
    (repo / "include" / "dep.h").write_text("int dep_answer(void);\n")
    git(repo, "init", "-q")
    v1 = commit_answer(repo, 1, "one")
    git(repo, "tag", "-a", "v1", "-m", "v1")
    v2 = commit_answer(repo, 2, "two")
    git(repo, "tag", "v2")
    git(repo, "checkout", "-q", "-b", "feature")
    feature = commit_answer(repo, 3, "three")
    git(repo, "checkout", "-q", "main")
    return {"path": repo, "v1": v1, "v2": v2, "feature": feature}


def git_spec(url: str, version: str, name: str = "dep") -> DependencySpec:
    return parse_dependency(
        {"short_name": name, "url": url, "url_type": "git", "version_spec": version}
    )


def answer_in(tree: Path) -> int:
    text = (tree / "src" / "dep.c").read_text()
    return int(text.split("return ")[1].split(";")[0])


def resolve(specs: List[DependencySpec], tmp_path: Path, **kw: object) -> list:
    kw.setdefault("cache_dir", tmp_path / "cache")
    return resolve_dependencies(
        specs,
        archive_root=kw.pop("archive_root", None),  # type: ignore[arg-type]
        base_dir=kw.pop("base_dir", tmp_path),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def snapshot(root: Path, skip: Path) -> List[str]:
    """Every path under root except under ``skip`` (the cache)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            continue
        out += [os.path.join(dirpath, n) for n in dirnames + filenames if Path(dirpath, n) != skip]
    return sorted(out)


# --- git ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version, key", [("v1", "v1"), ("v2", "v2"), ("feature", "feature")])
def test_git_tag_branch_by_file_url(
    dep_repo: Dict[str, object], tmp_path: Path, version: str, key: str
) -> None:
    url = Path(str(dep_repo["path"])).as_uri()
    [dep] = resolve([git_spec(url, version)], tmp_path)
    assert dep.resolved == dep_repo[key]
    assert dep.resolved_kind == "commit"
    assert answer_in(dep.path) == {"v1": 1, "v2": 2, "feature": 3}[key]
    assert not (dep.path / ".git").exists()
    assert (tmp_path / "cache") in dep.path.parents


def test_git_full_and_abbreviated_commit_by_plain_relative_path(
    dep_repo: Dict[str, object], tmp_path: Path
) -> None:
    full = str(dep_repo["v1"])
    [by_full] = resolve([git_spec("deprepo", full)], tmp_path, base_dir=tmp_path)
    assert by_full.resolved == full and answer_in(by_full.path) == 1
    [by_short] = resolve([git_spec(str(dep_repo["path"]), full[:10], "dep2")], tmp_path)
    assert by_short.resolved == full


def test_git_unknown_ref_is_a_clear_error(dep_repo: Dict[str, object], tmp_path: Path) -> None:
    with pytest.raises(DependencyError, match="has no tag, branch or commit 'v9'"):
        resolve([git_spec(str(dep_repo["path"]), "v9")], tmp_path)
    assert not any((tmp_path / "cache" / "entries").glob("*/*/tree"))


def test_git_missing_repository(tmp_path: Path) -> None:
    with pytest.raises(DependencyError, match="does not exist"):
        resolve([git_spec("no/such/repo", "v1")], tmp_path)


def test_cache_is_reused_without_git(
    dep_repo: Dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = git_spec(str(dep_repo["path"]), "v2")
    [first] = resolve([spec], tmp_path)

    def no_fetch(*args: object, **kw: object) -> str:
        raise AssertionError("fetched again")

    monkeypatch.setattr(resolver_module, "fetch_git", no_fetch)
    [second] = resolve([spec], tmp_path)
    assert second.path == first.path and second.resolved == first.resolved
    [offline] = resolve([spec], tmp_path, offline=True)
    assert offline.path == first.path


def test_default_cache_dir_from_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "c1"))
    assert default_cache_dir() == tmp_path / "c1"
    monkeypatch.delenv("MLF_PROJECT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "mlf-project-api"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "mlf-project-api"


# --- lock file ---------------------------------------------------------------------------


def test_lock_pins_the_commit_of_a_moving_branch(
    dep_repo: Dict[str, object], tmp_path: Path
) -> None:
    repo = Path(str(dep_repo["path"]))
    spec = git_spec(repo.as_uri(), "main")
    project = tmp_path / "project"
    resolved = resolve([spec], tmp_path, cache_dir=tmp_path / "cache1")
    placed = install_dependencies(resolved, project, target_name="firmware")
    lock_text = (project / LOCK_FILE_NAME).read_text()
    entry = json.loads(lock_text)["dependencies"][0]
    assert entry["resolved"] == {"commit": dep_repo["v2"]}
    assert entry["placed"] == "deps/dep" and placed[0].placed == "deps/dep"
    assert answer_in(project / "deps" / "dep") == 2

    new_head = commit_answer(repo, 4, "four")  # the branch moves on
    lock = read_lock(project / LOCK_FILE_NAME)
    again = resolve([spec], tmp_path, cache_dir=tmp_path / "cache2", lock=lock)
    assert again[0].resolved == dep_repo["v2"]
    install_dependencies(again, project, target_name="firmware", lock=lock)
    assert (project / LOCK_FILE_NAME).read_text() == lock_text  # byte for byte
    assert answer_in(project / "deps" / "dep") == 2

    fresh = resolve([spec], tmp_path, cache_dir=tmp_path / "cache3")
    assert fresh[0].resolved == new_head


def test_lock_that_does_not_match_the_dependencies(
    dep_repo: Dict[str, object], tmp_path: Path
) -> None:
    spec = git_spec(str(dep_repo["path"]), "v1")
    resolved = resolve([spec], tmp_path)
    write_lock(tmp_path / "l.json", resolved)
    lock = read_lock(tmp_path / "l.json")
    with pytest.raises(DependencyError, match=r"dep changed \(version_spec\)"):
        resolve([git_spec(str(dep_repo["path"]), "v2")], tmp_path, lock=lock)
    with pytest.raises(DependencyError, match="other is not in the lock file"):
        resolve([spec, git_spec(str(dep_repo["path"]), "v2", "other")], tmp_path, lock=lock)


def test_lock_with_a_commit_that_cannot_be_fetched(
    dep_repo: Dict[str, object], tmp_path: Path
) -> None:
    spec = git_spec(str(dep_repo["path"]), "v1")
    path = tmp_path / "l.json"
    write_lock(path, resolve([spec], tmp_path))
    data = json.loads(path.read_text())
    data["dependencies"][0]["resolved"]["commit"] = "0" * 40
    path.write_text(json.dumps(data))
    with pytest.raises(DependencyError, match="has no tag, branch or commit '0000000000"):
        resolve([spec], tmp_path, cache_dir=tmp_path / "other-cache", lock=read_lock(path))


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda d: d.update(mlf_project_lock=9), "not a lock file of format 1"),
        (lambda d: d.update(dependencies={}), "must be a list"),
        (lambda d: d["dependencies"][0].update(resolved={"commit": "xyz"}), "'resolved' must be"),
        (lambda d: d["dependencies"][0].update(resolved=None), "needs 'resolved'"),
        (lambda d: d["dependencies"][0].update(placed="../../etc"), "'placed' must be a path"),
        (lambda d: d["dependencies"][0].update(tree_sha256="1"), "'tree_sha256' must be"),
        (lambda d: d["dependencies"].append(d["dependencies"][0]), "is listed twice"),
        (lambda d: d["dependencies"][0].update(url="-x"), "starts with '-'"),
    ],
)
def test_damaged_lock_file(
    dep_repo: Dict[str, object], tmp_path: Path, mutate: object, words: str
) -> None:
    path = tmp_path / "l.json"
    write_lock(path, resolve([git_spec(str(dep_repo["path"]), "v1")], tmp_path))
    data = json.loads(path.read_text())
    mutate(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))
    with pytest.raises(DependencyError, match=words):
        read_lock(path)


def test_lock_file_not_json(tmp_path: Path) -> None:
    (tmp_path / "l.json").write_text("{")
    with pytest.raises(DependencyError, match="not readable JSON"):
        read_lock(tmp_path / "l.json")


# --- offline -----------------------------------------------------------------------------


def test_offline_lists_exactly_the_missing_dependencies(
    dep_repo: Dict[str, object], tmp_path: Path
) -> None:
    local = tmp_path / "localdep"
    (local / "include").mkdir(parents=True)
    (local / "include" / "l.h").write_text("")
    cached = git_spec(str(dep_repo["path"]), "v1", "cached")
    resolve([cached], tmp_path)
    specs = [
        cached,
        git_spec(str(dep_repo["path"]), "v2", "gitmissing"),
        parse_dependency(
            {"short_name": "urlmissing", "url": "http://127.0.0.1:9/x.tgz", "url_type": "url"}
        ),
        parse_dependency({"short_name": "local", "url": str(local), "url_type": "path"}),
    ]
    with pytest.raises(DependencyError) as info:
        resolve(specs, tmp_path, offline=True)
    message = str(info.value)
    assert "offline: 2 dependencies are not in the cache" in message
    assert "gitmissing (git" in message and "urlmissing (url" in message
    assert "cached (" not in message and "local (" not in message


# --- url ---------------------------------------------------------------------------------


def make_tar(path: Path, members: Mapping[str, object], gz: bool = True) -> str:
    """members: name -> bytes (file), None (dir), ('sym', target), ('lnk', target), 'fifo'."""
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(content, tuple):
                info.type = tarfile.SYMTYPE if content[0] == "sym" else tarfile.LNKTYPE
                info.linkname = str(content[1])
                tar.addfile(info)
            elif content == "fifo":
                info.type = tarfile.FIFOTYPE
                tar.addfile(info)
            else:
                assert isinstance(content, bytes)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return hashlib.sha256(path.read_bytes()).hexdigest()


LIB = {
    "lib-1.0/": None,
    "lib-1.0/include/lib.h": b"int lib_value(void);\n",
    "lib-1.0/src/lib.c": b'#include "lib.h"\nint lib_value(void) { return 7; }\n',
}


def url_spec(url: str, sha256: Optional[str] = None, name: str = "lib") -> DependencySpec:
    raw = {"short_name": name, "url": url, "url_type": "url", "version_spec": "1.0"}
    if sha256:
        raw["sha256"] = sha256
    return parse_dependency(raw)


def test_url_with_and_without_sha256(http_root: tuple, tmp_path: Path) -> None:
    root, base = http_root
    digest = make_tar(root / "lib-1.0.tar.gz", LIB)
    [plain] = resolve([url_spec(f"{base}/lib-1.0.tar.gz")], tmp_path)
    assert plain.resolved == digest and plain.resolved_kind == "sha256"
    assert (plain.path / "src" / "lib.c").is_file()  # lib-1.0/ stripped
    [checked] = resolve(
        [url_spec(f"{base}/lib-1.0.tar.gz", digest, "lib2")], tmp_path, cache_dir=tmp_path / "c2"
    )
    assert checked.resolved == digest
    [suffix] = resolve(
        [url_spec(f"{base}/lib-1.0.tar.gz#sha256={digest}", None, "lib3")],
        tmp_path,
        cache_dir=tmp_path / "c3",
    )
    assert suffix.resolved == digest


def test_url_with_wrong_sha256_is_refused_and_not_cached(http_root: tuple, tmp_path: Path) -> None:
    root, base = http_root
    digest = make_tar(root / "lib.tgz", LIB)
    with pytest.raises(DependencyError) as info:
        resolve([url_spec(f"{base}/lib.tgz", "0" * 64)], tmp_path)
    assert digest in str(info.value) and "expected " + "0" * 64 in str(info.value)
    assert not list((tmp_path / "cache" / "entries").rglob("tree"))
    assert not any((tmp_path / "cache" / "staging").iterdir())


def test_url_zip_plain_tar_file_url_and_local_path(http_root: tuple, tmp_path: Path) -> None:
    root, base = http_root
    with zipfile.ZipFile(root / "z.zip", "w") as zf:
        zf.writestr("top/include/z.h", "int z(void);\n")
        zf.writestr("top/src/z.c", "int z(void) { return 1; }\n")
    [z] = resolve([url_spec(f"{base}/z.zip", name="z")], tmp_path)
    assert (z.path / "src" / "z.c").is_file()
    make_tar(tmp_path / "plain.tar", {"a.c": b"int a;\n", "a.h": b""}, gz=False)
    [by_file_url] = resolve([url_spec((tmp_path / "plain.tar").as_uri(), name="p1")], tmp_path)
    assert sorted(p.name for p in by_file_url.path.iterdir()) == ["a.c", "a.h"]
    [by_path] = resolve([url_spec("plain.tar", name="p2")], tmp_path, cache_dir=tmp_path / "c")
    assert by_path.resolved == by_file_url.resolved


def test_url_http_error_and_not_an_archive(http_root: tuple, tmp_path: Path) -> None:
    root, base = http_root
    with pytest.raises(DependencyError, match="HTTP 404"):
        resolve([url_spec(f"{base}/missing.tgz")], tmp_path)
    (root / "junk.tgz").write_bytes(b"this is no archive at all" * 40)
    with pytest.raises(DependencyError, match="unusable: not a readable tar archive"):
        resolve([url_spec(f"{base}/junk.tgz")], tmp_path)


def test_url_scheme_not_supported(tmp_path: Path) -> None:
    with pytest.raises(DependencyError, match="scheme 'ftp' is not supported"):
        resolve([url_spec("ftp://host/x.tgz")], tmp_path)


HOSTILE_TARS: Dict[str, Dict[str, object]] = {
    "traversal": {"top/": None, "top/../../escaped.txt": b"x"},
    "absolute": {"/tmp/escaped-abs.txt": b"x"},
    "symlink out": {"top/": None, "top/link": ("sym", "../../.."), "top/x.c": b""},
    "symlink absolute": {"top/": None, "top/link": ("sym", "/etc/passwd")},
    "write through link": {"top/": None, "top/l": ("sym", "."), "top/l/f.c": b""},
    "hardlink out": {"top/": None, "top/h": ("lnk", "../outside")},
    "fifo": {"top/": None, "top/p": "fifo"},
}


@pytest.mark.parametrize("case", sorted(HOSTILE_TARS))
def test_hostile_download_writes_nothing_outside_the_cache(
    http_root: tuple, tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, base = http_root
    make_tar(root / "evil.tgz", HOSTILE_TARS[case])
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = snapshot(tmp_path, tmp_path / "cache")
    with pytest.raises(DependencyError, match="refused, unsafe"):
        resolve([url_spec(f"{base}/evil.tgz")], tmp_path)
    assert snapshot(tmp_path, tmp_path / "cache") == before
    assert not list((tmp_path / "cache" / "entries").rglob("tree"))
    assert not Path("/tmp/escaped-abs.txt").exists()


def test_hostile_zip_is_refused(http_root: tuple, tmp_path: Path) -> None:
    root, base = http_root
    with zipfile.ZipFile(root / "evil.zip", "w") as zf:
        zf.writestr("top/../../escaped.txt", "x")
    before = snapshot(tmp_path, tmp_path / "cache")
    with pytest.raises(DependencyError, match="refused, unsafe"):
        resolve([url_spec(f"{base}/evil.zip")], tmp_path)
    assert snapshot(tmp_path, tmp_path / "cache") == before


# --- hostile git -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, ref",
    [
        ("--upload-pack=touch PWNED", "v1"),
        ("-uhttps://example.invalid/x", "v1"),
        ("ext::sh -c touch% PWNED", "v1"),
        ("REPO", "--upload-pack=touch PWNED"),
        ("REPO", "-b"),
    ],
)
def test_hostile_git_input_is_refused_before_git_runs(
    dep_repo: Dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    ref: str,
) -> None:
    url = url.replace("REPO", str(dep_repo["path"]))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = snapshot(tmp_path, tmp_path / "cache")
    with pytest.raises(DependencyError):
        parse_dependency({"short_name": "x", "url": url, "url_type": "git", "version_spec": ref})
    # Past the parser too (a spec built by hand): the resolver refuses on its own.
    with pytest.raises(DependencyError, match="starts with '-'|'<transport>::' syntax"):
        fetch_git(url, ref, tmp_path / "cache" / "t")
    assert snapshot(tmp_path, tmp_path / "cache") == before
    assert not (work / "PWNED").exists()


def test_git_environment_blocks_ext_transport_even_if_asked(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    done = subprocess.run(
        ["git", "ls-remote", f"ext::sh -c touch% {marker}"],
        env=git_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode != 0 and not marker.exists()
    assert b"not allowed" in done.stderr


def test_git_checkout_with_an_escaping_symlink_is_refused(
    dep_repo: Dict[str, object], tmp_path: Path
) -> None:
    repo = Path(str(dep_repo["path"]))
    os.symlink("/etc/passwd", repo / "include" / "evil.h")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "evil")
    git(repo, "tag", "evil")
    with pytest.raises(DependencyError, match="link escaping it: include/evil.h"):
        resolve([git_spec(repo.as_uri(), "evil")], tmp_path)
    assert not list((tmp_path / "cache" / "entries").rglob("tree"))


# --- interrupted and concurrent fetches -------------------------------------------------


def test_interrupted_fetch_leaves_no_entry(
    http_root: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, base = http_root
    make_tar(root / "lib.tgz", LIB)

    def broken_extract(archive: Path, dest: Path, **kw: object) -> None:
        (dest / "half").mkdir(parents=True)
        (dest / "half" / "written.c").write_text("int half;")
        raise KeyboardInterrupt  # the user pressed ^C mid-extraction

    monkeypatch.setattr(url_module, "safe_extract", broken_extract)
    with pytest.raises(KeyboardInterrupt):
        resolve([url_spec(f"{base}/lib.tgz")], tmp_path)
    cache = tmp_path / "cache"
    assert not list((cache / "entries").rglob("tree"))
    assert not list((cache / "entries").rglob("latest"))
    assert not any((cache / "staging").iterdir())
    monkeypatch.undo()
    [dep] = resolve([url_spec(f"{base}/lib.tgz")], tmp_path)  # and the next run is fine
    assert (dep.path / "src" / "lib.c").is_file()


def test_stale_staging_of_a_killed_fetch_is_cleaned(
    dep_repo: Dict[str, object], tmp_path: Path
) -> None:
    spec = git_spec(str(dep_repo["path"]), "v1")
    cache = Cache(tmp_path / "cache")
    from project_api.resolve.cache import cache_key

    leftover = cache.root / "staging" / f"{cache_key(spec)}-dead"
    (leftover / "entry" / "tree").mkdir(parents=True)
    resolve([spec], tmp_path)
    assert not leftover.exists()


def test_concurrent_resolvers_fetch_once(
    dep_repo: Dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: List[int] = []
    real = git_module.fetch_git
    started = threading.Event()

    def slow_fetch(*args: object, **kw: object) -> str:
        calls.append(1)
        started.set()
        threading.Event().wait(0.3)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(resolver_module, "fetch_git", slow_fetch)
    spec = git_spec(str(dep_repo["path"]), "v2")
    results: List[object] = []

    def run() -> None:
        results.append(resolve([spec], tmp_path)[0])

    threads = [threading.Thread(target=run) for _ in range(2)]
    threads[0].start()
    started.wait(5)
    threads[1].start()
    for thread in threads:
        thread.join(30)
    assert len(calls) == 1
    assert len(results) == 2 and results[0] == results[1]


# --- path and mlf_path -------------------------------------------------------------------


def test_path_relative_to_base_dir_and_absolute(tmp_path: Path) -> None:
    lib = tmp_path / "archives" / "libs" / "mine"
    (lib / "include").mkdir(parents=True)
    rel = parse_dependency({"short_name": "mine", "url": "libs/mine", "url_type": "path"})
    [dep] = resolve([rel], tmp_path, base_dir=tmp_path / "archives")
    assert dep.path == lib.resolve() and dep.resolved is None
    absolute = parse_dependency({"short_name": "mine", "url": lib.as_uri(), "url_type": "path"})
    assert resolve([absolute], tmp_path)[0].path == lib.resolve()
    missing = parse_dependency({"short_name": "gone", "url": "nope", "url_type": "path"})
    with pytest.raises(DependencyError, match="'nope' does not exist"):
        resolve([missing], tmp_path)


def test_mlf_path_inside_the_archive_and_tvm_crt_notice(tmp_path: Path) -> None:
    archive = tmp_path / "extracted"
    (archive / "runtime" / "src").mkdir(parents=True)
    (archive / "extra" / "include").mkdir(parents=True)
    (archive / "extra" / "include" / "extra.h").write_text("")
    notes: List[str] = []
    specs = collect_dependencies(
        [
            [
                {
                    "short_name": "tvm_standalone_crt",
                    "url": "./runtime",
                    "url_type": "mlf_path",
                    "version_spec": "0.14.0",
                },
                {"short_name": "extra", "url": "./extra", "url_type": "mlf_path"},
            ]
        ]
    )
    crt, extra = resolve(specs, tmp_path, archive_root=archive, notify=notes.append)
    assert crt.skipped and crt.note == TVM_CRT_NOTE and notes == [TVM_CRT_NOTE]
    assert extra.path == (archive / "extra").resolve() and not extra.skipped
    placed = install_dependencies([crt, extra], tmp_path / "project")
    assert placed[0].placed is None and placed[1].placed == "deps/extra"
    assert not (tmp_path / "project" / "deps" / "tvm_standalone_crt").exists()


def test_recipe_none_is_never_fetched(tmp_path: Path) -> None:
    notes: List[str] = []
    specs = collect_dependencies(
        [
            [
                {
                    "short_name": "tvm_standalone_crt",
                    "url": "https://127.0.0.1:9/crt.git",
                    "url_type": "git",
                    "version_spec": "v0.14.0",
                },
                {"short_name": "docs", "url": "/nonexistent", "url_type": "path", "recipe": "none"},
            ]
        ]
    )
    crt, docs = resolve(specs, tmp_path, offline=True, notify=notes.append)
    assert crt.skipped and docs.skipped and notes == [TVM_CRT_NOTE]
    assert crt.path is None and docs.path is None
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("url", ["../outside", "/etc", "runtime/../../x", "link"])
def test_mlf_path_must_stay_inside_the_archive(tmp_path: Path, url: str) -> None:
    archive = tmp_path / "extracted"
    archive.mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", archive / "link")
    spec = parse_dependency({"short_name": "x", "url": url, "url_type": "mlf_path"})
    with pytest.raises(DependencyError, match="inside the archive|out of the archive"):
        resolve([spec], tmp_path, archive_root=archive)


def test_changed_path_dependency_is_caught_by_the_lock(tmp_path: Path) -> None:
    lib = tmp_path / "mine"
    (lib / "include").mkdir(parents=True)
    (lib / "include" / "m.h").write_text("#define M 1\n")
    spec = parse_dependency({"short_name": "mine", "url": str(lib), "url_type": "path"})
    project = tmp_path / "project"
    install_dependencies(resolve([spec], tmp_path), project)
    lock = read_lock(project / LOCK_FILE_NAME)
    install_dependencies(resolve([spec], tmp_path, lock=lock), project, lock=lock)  # unchanged
    (lib / "include" / "m.h").write_text("#define M 2\n")
    with pytest.raises(DependencyError, match="differ from the locked ones"):
        install_dependencies(resolve([spec], tmp_path, lock=lock), project, lock=lock)
    assert (project / "deps" / "mine" / "include" / "m.h").read_text() == "#define M 1\n"


def test_placement_refuses_links_leading_out_of_a_path_dependency(tmp_path: Path) -> None:
    lib = tmp_path / "mine"
    (lib / "include").mkdir(parents=True)
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", lib / "include" / "s.h")
    spec = parse_dependency({"short_name": "mine", "url": str(lib), "url_type": "path"})
    with pytest.raises(DependencyError, match="link leading out of the dependency"):
        install_dependencies(resolve([spec], tmp_path), tmp_path / "project")
