"""Archives are untrusted (docs/security.md): the external_dependencies an archive names need
the user's consent to read local paths, reach hosts beyond the known homes of our recipes'
libraries, or run their own CMake. One bad archive per rule, each refused in one line naming
the flag before anything is read or fetched, with nothing left behind (no project, no
staging directory, no cache); what the user allows, or names themselves, still works.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from conftest import cmsis_nn_dependency, corpus_archive
from mlf_builders import member, write_dir, write_raw_tar

from project_api.cli import main
from project_api.errors import DependencyError
from project_api.modelgen import Network
from project_api.resolve.trust import DEFAULT_HOSTS, ENV_HOSTS, TrustPolicy

LIB_C = b"int lib_value(void) { return 7; }\n"
# CMake that would leave a mark if it ever ran (the reproduction).
EVIL_CMAKE = b'file(WRITE "${CMAKE_CURRENT_LIST_DIR}/../../../PWNED" "ran")\nadd_library(x lib.c)\n'


def members(deps: List[Dict[str, Any]]) -> Dict[str, bytes]:
    """A small model's archive members, its metadata naming ``deps``."""
    net = Network("trusty")
    x = net.input("x", (4,), "int32")
    net.output(net.add(x, x))
    return net.build().members(external_dependencies=deps)


def archive_tar(path: Path, deps: List[Dict[str, Any]]) -> Path:
    files = members(deps)
    with tarfile.open(path, "w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def tree(root: Path) -> List[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def no_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anything that would look at a dependency's location fails the test."""

    def forbidden(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a refused dependency was looked at or fetched")

    for name in ("resolve_path", "git_source", "url_source", "fetch_git", "fetch_url"):
        monkeypatch.setattr(f"project_api.resolve.resolver.{name}", forbidden)


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No allowed hosts from the environment or a config file; the cache under tmp_path."""
    monkeypatch.delenv(ENV_HOSTS, raising=False)
    monkeypatch.delenv("CMSIS_PATH", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "cache"))
    return tmp_path


def generate(
    capsys: pytest.CaptureFixture, archive: Path, project: Path, *flags: str
) -> Tuple[int, str]:
    status = main(["generate", str(archive), str(project), *flags])
    return status, capsys.readouterr().err


def assert_refused(
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
    archive: Path,
    fragments: List[str],
    *flags: str,
) -> str:
    """generate refuses with one error line holding ``fragments``; nothing is left behind."""
    before = tree(tmp_path)
    status, err = generate(capsys, archive, tmp_path / "project", *flags)
    assert status == 2, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0] == err.splitlines()[-1], err
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert tree(tmp_path) == before  # no project, staging dir, cache entry or mark
    assert not (tmp_path / "project").exists() and not (tmp_path / "cache").exists()
    assert not list(tmp_path.rglob("PWNED*"))
    return errors[0]


# --- one bad archive per rule ------------------------------------------------------------


def test_a_path_outside_the_archive_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, clean_env: Path, no_fetch: None
) -> None:
    outside = tmp_path / "home" / "victim"
    outside.mkdir(parents=True)
    (outside / "CMakeLists.txt").write_bytes(EVIL_CMAKE)
    (outside / "lib.c").write_bytes(LIB_C)
    deps = [{"short_name": "x", "url": str(outside), "url_type": "path"}]
    archive = archive_tar(tmp_path / "m.tar", deps)
    line = assert_refused(capsys, tmp_path, archive, ["(x)", "outside the archive"])
    assert line.endswith("(allow it with --allow-archive-paths)")
    # Relative to the archive's directory, or ~: the same.
    for url in ("home/victim", "~/victim", "../../etc"):
        deps = [{"short_name": "x", "url": url, "url_type": "path"}]
        archive = archive_tar(tmp_path / "m.tar", deps)
        assert_refused(capsys, tmp_path, archive, ["--allow-archive-paths"])


GH = "https://github.com"


@pytest.mark.parametrize(
    "url, url_type, host",
    [
        ("https://evil.example/x.git", "git", "evil.example"),
        ("https://evil.example/x.tar.gz", "url", "evil.example"),
        # Look-alikes of the default homes.
        (f"{GH}/ARM-software/CMSIS-NN-evil.git", "git", "github.com"),
        (f"{GH}/evil/CMSIS-NN.git", "git", "github.com"),
        ("https://github.com@evil.example/ARM-software/CMSIS-NN.git", "git", "evil.example"),
        (f"{GH}/ARM-software/CMSIS-NN/../../evil/x.git", "git", "github.com"),
        (f"{GH}/ARM-software/CMSIS-NN/%2e%2e/%2e%2e/evil/x.git", "git", "github.com"),
    ],
)
def test_a_host_not_allowed_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    clean_env: Path,
    no_fetch: None,
    url: str,
    url_type: str,
    host: str,
) -> None:
    entry = {"short_name": "x", "url": url, "url_type": url_type}
    if url_type == "git":
        entry["version_spec"] = "v1"
    archive = archive_tar(tmp_path / "m.tar", [entry])
    assert_refused(
        capsys, tmp_path, archive, [f"host {host} is not allowed", f"--allow-host {host}"]
    )


def test_cmake_of_a_dependency_runs_only_with_consent(
    tmp_path: Path, capsys: pytest.CaptureFixture, clean_env: Path, no_fetch: None
) -> None:
    # Inside the archive (a directory archive: mlf_path), its own CMakeLists.txt.
    files = members([{"short_name": "x", "url": "deps/x", "url_type": "mlf_path"}])
    files["deps/x/CMakeLists.txt"] = EVIL_CMAKE
    files["deps/x/lib.c"] = LIB_C
    archive = write_dir(tmp_path / "arch", files)
    assert_refused(
        capsys,
        tmp_path,
        archive,
        ["(x)", "would run its own CMakeLists.txt", "--allow-dependency-cmake"],
    )
    # A cmake recipe from an allowed host: refused before it is fetched.
    recipe = {
        "short_name": "cmsis-nn",
        "url": "https://github.com/ARM-software/CMSIS-NN.git",
        "url_type": "git",
        "version_spec": "v4.1.0",
        "recipe": "cmake",
    }
    archive = archive_tar(tmp_path / "m.tar", [recipe])
    assert_refused(capsys, tmp_path, archive, ["--allow-dependency-cmake"])
    # With consent, the project is generated; CMake itself only runs at build time.
    status, err = generate(capsys, tmp_path / "arch", tmp_path / "p", "--allow-dependency-cmake")
    assert status == 0, err
    assert "add_subdirectory(" in (tmp_path / "p" / "deps.cmake").read_text()
    # A recipe of C sources instead: nothing of the dependency's CMake is used.
    recipe_dep = {"short_name": "x", "url": "deps/x", "url_type": "mlf_path",
                  "recipe": {"sources": ["*.c"]}}  # fmt: skip
    files = {**members([recipe_dep]), "deps/x/CMakeLists.txt": EVIL_CMAKE, "deps/x/lib.c": LIB_C}
    archive = write_dir(tmp_path / "arch2", files)
    status, err = generate(capsys, archive, tmp_path / "q")
    assert status == 0, err
    fragment = (tmp_path / "q" / "deps.cmake").read_text()
    assert "add_subdirectory(" not in fragment and "lib.c" in fragment


def test_symlink_tricks_in_mlf_path_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, clean_env: Path, no_fetch: None
) -> None:
    secret = tmp_path / "home"
    secret.mkdir()
    (secret / "id_rsa").write_text("secret")
    dep = [{"short_name": "x", "url": "deps/x", "url_type": "mlf_path"}]
    # A directory archive whose dependency directory is a link out of it.
    files = members(dep)
    archive = write_dir(tmp_path / "arch", files)
    (archive / "deps").mkdir()
    (archive / "deps" / "x").symlink_to(secret)
    assert_refused(capsys, tmp_path, archive, ["link"])
    # A link inside the dependency directory.
    (archive / "deps" / "x").unlink()
    (archive / "deps" / "x").mkdir()
    (archive / "deps" / "x" / "key.c").symlink_to(secret / "id_rsa")
    assert_refused(capsys, tmp_path, archive, ["link"])
    # A tar whose member is a link out; an mlf_path climbing out by name.
    raw = write_raw_tar(
        tmp_path / "links.tar",
        [member("./deps", tarfile.DIRTYPE), member("./deps/x", tarfile.SYMTYPE, str(secret))],
        {},
    )
    with tarfile.open(raw, "a") as tar:
        for name, data in members(dep).items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert_refused(capsys, tmp_path, raw, ["deps/x"])
    climbing = [{"short_name": "x", "url": "deps/../../home", "url_type": "mlf_path"}]
    assert_refused(
        capsys, tmp_path, archive_tar(tmp_path / "m.tar", climbing), ["inside the archive"]
    )


@pytest.mark.parametrize(
    "dep",
    [
        {"url": "file:///etc", "url_type": "git", "version_spec": "v1"},
        {"url": "/srv/repos/x.git", "url_type": "git", "version_spec": "v1"},
        {"url": "file:///etc/passwd", "url_type": "url"},
        {"url": "file:///home", "url_type": "path"},
    ],
)
def test_file_urls_are_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    clean_env: Path,
    no_fetch: None,
    dep: Dict[str, str],
) -> None:
    archive = archive_tar(tmp_path / "m.tar", [{"short_name": "x", **dep}])
    assert_refused(capsys, tmp_path, archive, ["names a local path", "--allow-archive-paths"])


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("ssh://git@github.com/ARM-software/CMSIS-NN.git", "ssh url"),
        ("git+ssh://evil.example/x.git", "ssh url"),
        ("git@github.com:ARM-software/CMSIS-NN.git", "ssh url"),
        ("ext::sh -c touch% PWNED", "'<transport>::' syntax"),
        ("fd::3", "'<transport>::' syntax"),
    ],
)
def test_ssh_and_transport_git_urls_are_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    clean_env: Path,
    no_fetch: None,
    url: str,
    fragment: str,
) -> None:
    dep = {"short_name": "x", "url": url, "url_type": "git", "version_spec": "v4.1.0"}
    assert_refused(capsys, tmp_path, archive_tar(tmp_path / "m.tar", [dep]), [fragment])


@pytest.mark.parametrize(
    "url",
    [
        "--upload-pack=touch PWNED",
        "-oProxyCommand=touch PWNED",
        "--config=core.sshCommand=touch PWNED",
    ],
)
def test_git_urls_with_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, clean_env: Path, no_fetch: None, url: str
) -> None:
    dep = {"short_name": "x", "url": url, "url_type": "git", "version_spec": "v4.1.0"}
    archive = archive_tar(tmp_path / "m.tar", [dep])
    assert_refused(capsys, tmp_path, archive, ["starts with '-'"])


def test_the_project_api_holds_the_same_rule(
    tmp_path: Path, clean_env: Path, no_fetch: None
) -> None:
    from project_api.resources import template_dir
    from project_api.serve.handler import ProjectApiHandler

    deps = [{"short_name": "x", "url": str(tmp_path), "url_type": "path"}]
    archive = archive_tar(tmp_path / "m.tar", deps)
    before = tree(tmp_path)
    handler = ProjectApiHandler(template_dir())
    options = {"board": "host", "project_type": "host_driven", "cmsis_path": ""}
    with pytest.raises(DependencyError, match="--allow-archive-paths"):
        handler.generate_project(str(archive), "", str(tmp_path / "p"), options)
    assert tree(tmp_path) == before
    deps = [{"short_name": "x", "url": "https://evil.example/x.git", "url_type": "git",
             "version_spec": "v1"}]  # fmt: skip
    archive = archive_tar(tmp_path / "m.tar", deps)
    with pytest.raises(DependencyError, match="--allow-host evil.example"):
        handler.generate_project(str(archive), "", str(tmp_path / "p"), options)
    assert not (tmp_path / "p").exists()


# --- what the user allows, or names, still works -------------------------------------------


def test_info_shows_each_dependency_and_its_verdict_before_fetching(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    clean_env: Path,
    no_fetch: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deps = [
        {"short_name": "cmsis-nn", "url": "https://github.com/ARM-software/CMSIS-NN.git",
         "url_type": "git", "version_spec": "v4.1.0"},
        {"short_name": "evil", "url": "https://evil.example/x.git", "url_type": "git",
         "version_spec": "v1"},
        {"short_name": "local", "url": "/srv/lib", "url_type": "path"},
    ]  # fmt: skip
    archive = archive_tar(tmp_path / "m.tar", deps)
    assert main(["info", str(archive)]) == 0
    out = capsys.readouterr().out
    assert (
        "cmsis-nn: git from https://github.com/ARM-software/CMSIS-NN.git at v4.1.0: allowed" in out
    )
    assert "allowed host github.com/arm-software/cmsis-nn" in out
    assert "evil: git from https://evil.example/x.git at v1: REFUSED" in out
    assert "--allow-host evil.example" in out
    assert "local: path from /srv/lib: REFUSED" in out
    monkeypatch.setenv(ENV_HOSTS, "evil.example")
    assert main(["info", str(archive), "--json", "--allow-archive-paths"]) == 0
    verdicts = {d["short_name"]: d for d in json.loads(capsys.readouterr().out)["dependencies"]}
    assert all(d["allowed"] and d["from_archive"] for d in verdicts.values())
    assert verdicts["evil"]["reason"] == "allowed host evil.example"
    assert not (tmp_path / "cache").exists()


def test_allowed_hosts_from_flag_environment_and_config_file(
    tmp_path: Path, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "https://git.example.org/team/lib.git"
    assert TrustPolicy.from_options({}).allowed_host(url) is None
    assert TrustPolicy.from_options({"allowed_hosts": "git.example.org"}).allowed_host(url)
    narrow = TrustPolicy.from_options({"allowed_hosts": "git.example.org/team/lib"})
    assert narrow.allowed_host(url) and not narrow.allowed_host(url.replace("lib", "lib2"))
    monkeypatch.setenv(ENV_HOSTS, "elsewhere.example, git.example.org/team")
    assert TrustPolicy.from_options({}).allowed_host(url) == "git.example.org/team"
    monkeypatch.delenv(ENV_HOSTS)
    config = tmp_path / "config" / "mlf-project-api" / "allowed_hosts"
    config.parent.mkdir(parents=True)
    config.write_text("# our mirror\nhttps://git.example.org/team/\n")
    assert TrustPolicy.from_options({}).allowed_host(url) == "git.example.org/team"
    config.write_text("not a host!\n")
    with pytest.raises(DependencyError, match="is not a host to allow"):
        TrustPolicy.from_options({})
    for default in DEFAULT_HOSTS:
        assert TrustPolicy().allowed_host(f"https://{default}.git")


def test_an_allowed_host_serves_the_archives_url_dependency(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    clean_env: Path,
    http_root: Tuple[Path, str],
) -> None:
    www, base = http_root
    with tarfile.open(www / "lib.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("lib-1/src/lib.c")
        info.size = len(LIB_C)
        tar.addfile(info, io.BytesIO(LIB_C))
    deps = [{"short_name": "lib", "url": f"{base}/lib.tar.gz", "url_type": "url"}]
    archive = archive_tar(tmp_path / "m.tar", deps)
    status, err = generate(capsys, archive, tmp_path / "refused")
    assert status == 2 and "--allow-host 127.0.0.1" in err
    status, err = generate(capsys, archive, tmp_path / "p", "--allow-host", "127.0.0.1")
    assert status == 0, err
    assert (tmp_path / "p" / "deps" / "lib" / "src" / "lib.c").read_bytes() == LIB_C


def test_cmsis_nn_named_by_the_user_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture, clean_env: Path
) -> None:
    """The corpus' CMSIS-NN archive with CMSIS-NN from ../shared/deps/CMSIS-NN.git given by
    the user: trusted as before, even over an archive entry naming the same library."""
    dependency = cmsis_nn_dependency()  # skips without a CMSIS-NN repository
    archive = corpus_archive("kws_int8_cmsisnn")
    if archive is None:
        pytest.skip("needs the corpus archive kws_int8_cmsisnn.tar (../shared/mlf)")
    flag = ",".join(f"{k}={v}" for k, v in dependency.items())
    status, err = generate(capsys, archive, tmp_path / "p", "--dependency", flag)
    assert status == 0, err
    assert (tmp_path / "p" / "deps" / "cmsis-nn" / "Include" / "arm_nnfunctions.h").is_file()
    # An archive naming CMSIS-NN at its home, overridden by the user's own location.
    files = members(
        [{"short_name": "cmsis-nn", "url": "https://github.com/ARM-software/CMSIS-NN.git",
          "url_type": "git", "version_spec": "v4.1.0"}]
    )  # fmt: skip
    named = write_dir(tmp_path / "named", files)
    status, err = generate(capsys, named, tmp_path / "q", "--dependency", flag)
    assert status == 0, err
    lock = json.loads((tmp_path / "q" / "dependencies.lock.json").read_text())
    assert lock["dependencies"][0]["url"] == dependency["url"]


def test_an_archives_download_is_redirected_only_to_allowed_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture, clean_env: Path
) -> None:
    import functools
    import http.server
    import threading

    www = tmp_path / "www"
    www.mkdir()
    with tarfile.open(www / "lib.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("lib-1/src/lib.c")
        info.size = len(LIB_C)
        tar.addfile(info, io.BytesIO(LIB_C))

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/moved.tar.gz":  # to the same server under another host name
                self.send_response(302)
                self.send_header("Location", f"http://localhost:{port}/lib.tar.gz")
                self.end_headers()
                return
            super().do_GET()

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(www))
    )
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{port}/moved.tar.gz"
        archive = archive_tar(
            tmp_path / "m.tar", [{"short_name": "lib", "url": url, "url_type": "url"}]
        )
        status, err = generate(capsys, archive, tmp_path / "p", "--allow-host", "127.0.0.1")
        assert status == 2 and "refused (not an allowed host)" in err, err
        assert not (tmp_path / "p").exists()
        flags = ["--allow-host", "127.0.0.1", "--allow-host", "localhost"]
        status, err = generate(capsys, archive, tmp_path / "p", *flags)
        assert status == 0, err
        # Named by the user, the same redirect is followed as before.
        spec = f"short_name=lib,url={url},url_type=url"
        status, err = generate(capsys, archive, tmp_path / "q", "--dependency", spec)
        assert status == 0, err
    finally:
        server.shutdown()
        server.server_close()


def test_a_path_inside_a_directory_archive_and_consent_over_the_project_api(
    tmp_path: Path, capsys: pytest.CaptureFixture, clean_env: Path
) -> None:
    from project_api.resources import template_dir
    from project_api.serve.handler import ProjectApiHandler

    # A directory archive whose path entry lies inside it: no consent needed.
    files = members([{"short_name": "x", "url": "vendor/x", "url_type": "path"}])
    archive = write_dir(tmp_path / "arch", {**files, "vendor/x/lib.c": LIB_C})
    status, err = generate(capsys, archive, tmp_path / "p")
    assert status == 0, err
    assert "named by the archive; inside the archive" in err
    # A path outside, allowed by the Project API's option (tvmc sends strings).
    outside = tmp_path / "vendor" / "y"
    outside.mkdir(parents=True)
    (outside / "lib.c").write_bytes(LIB_C)
    tar = archive_tar(
        tmp_path / "m.tar", [{"short_name": "y", "url": "vendor/y", "url_type": "path"}]
    )
    handler = ProjectApiHandler(template_dir())
    options = {"board": "host", "project_type": "host_driven", "allow_archive_paths": "true"}
    handler.generate_project(str(tar), "", str(tmp_path / "q"), options)
    assert (tmp_path / "q" / "deps" / "y" / "lib.c").read_bytes() == LIB_C
