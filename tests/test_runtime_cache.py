"""The runtime library shared between projects (project_api.build.runtime_cache and the
project's runtime/mlf_runtime_cache.cmake): a hit links what an earlier project built and
runs the same; anything the library is built from changes the key; off means off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from conftest import requires_arm

from project_api.build import find_cmake, runtime_cache
from project_api.build.cmake import build as cmake_build
from project_api.driver import Project
from project_api.errors import BuildError
from project_api.modelgen import catalog, compare_outputs


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "runtime-cache"
    monkeypatch.setenv(runtime_cache.ENV, str(directory))
    return directory


@pytest.fixture(scope="module")
def mlp_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return catalog()["mlp"]().write(tmp_path_factory.mktemp("a") / "mlp.tar")


def build(archive: Path, where: Path, board: str = "host", **options: object) -> List[str]:
    seen: List[str] = []
    project = Project.generate(archive, where, board=board, options=dict(options))
    project.build(progress=seen.append)
    return seen


def hits(seen: List[str]) -> bool:
    return any(line.startswith("runtime library from the cache") for line in seen)


def compiled(seen: List[str]) -> int:
    return max((int(s.split()[1].split("/")[1]) for s in seen if s.startswith("compiling ")),
               default=0)  # fmt: skip


def test_second_project_links_the_first_ones_library(
    mlp_archive: Path, tmp_path: Path, cache: Path
) -> None:
    first = build(mlp_archive, tmp_path / "p1")
    assert not hits(first)
    assert len(list(cache.glob("*/libmlf_runtime.a"))) == 1
    second = build(mlp_archive, tmp_path / "p2")
    assert hits(second)
    assert compiled(second) < compiled(first)
    model = catalog()["mlp"]()
    inputs = model.sample_inputs()
    with Project.open(tmp_path / "p2").session() as session:
        assert compare_outputs(session.run(inputs), model.reference(inputs)) == []


def test_an_edited_runtime_file_is_compiled(mlp_archive: Path, tmp_path: Path, cache: Path) -> None:
    build(mlp_archive, tmp_path / "p1")
    project = Project.generate(mlp_archive, tmp_path / "p2")
    source = project.dir / "runtime" / "src" / "mlf_error.c"
    source.write_text(source.read_text() + "\nint mlf_test_edit(void) { return 1; }\n")
    seen: List[str] = []
    project.build(progress=seen.append)
    assert not hits(seen)
    assert len(list(cache.glob("*/libmlf_runtime.a"))) == 2


def test_edit_after_a_hit_configures_again(mlp_archive: Path, tmp_path: Path, cache: Path) -> None:
    build(mlp_archive, tmp_path / "p1")
    project = Project.generate(mlp_archive, tmp_path / "p2")
    assert hits(_build(project))
    source = project.dir / "runtime" / "src" / "mlf_error.c"
    source.write_text(source.read_text() + "\n#error the edit is compiled\n")
    with pytest.raises(Exception, match="the edit is compiled"):
        project.build()


def _build(project: Project) -> List[str]:
    seen: List[str] = []
    project.build(progress=seen.append)
    return seen


def test_other_options_are_another_key(mlp_archive: Path, tmp_path: Path, cache: Path) -> None:
    build(mlp_archive, tmp_path / "p1")
    seen = build(mlp_archive, tmp_path / "p2", compile_definitions=["MLF_TEST_KEY=1"])
    assert not hits(seen)
    assert len(list(cache.glob("*/libmlf_runtime.a"))) == 2


@requires_arm
def test_boards_do_not_share(mlp_archive: Path, tmp_path: Path, cache: Path) -> None:
    build(mlp_archive, tmp_path / "host")
    assert not hits(build(mlp_archive, tmp_path / "arm", board="qemu-mps2-an385"))
    assert hits(build(mlp_archive, tmp_path / "arm2", board="qemu-mps2-an385"))


def test_off_compiles_every_time(
    mlp_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(runtime_cache.ENV, "off")
    project = Project.generate(mlp_archive, tmp_path / "p0")
    assert runtime_cache.slot_for(project.dir, project.build_dir, {}) is None
    assert runtime_cache.configure_entries(None) == {runtime_cache.CACHE_ENTRY: ""}
    assert not hits(build(mlp_archive, tmp_path / "p1"))
    assert not hits(build(mlp_archive, tmp_path / "p2"))


def test_default_place_is_under_the_cache_root(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.delenv(runtime_cache.ENV, raising=False)
    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "root"))
    assert runtime_cache.cache_dir() == (tmp_path / "root" / "runtime").resolve()


def test_plain_cmake_caches_nothing(mlp_archive: Path, tmp_path: Path, cache: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "p")
    tool = find_cmake()
    build_dir = tmp_path / "b"
    for argv in ([tool.path, "-S", str(project.dir), "-B", str(build_dir)],
                 [tool.path, "--build", str(build_dir)]):  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    assert (build_dir / "libmlf_runtime.a").is_file()
    assert not cache.exists()


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    for i in range(5):
        entry = tmp_path / f"e{i}"
        entry.mkdir()
        (entry / "libmlf_runtime.a").write_bytes(b"!<arch>\n")
        os.utime(entry, (1000 + i, 1000 + i))
    runtime_cache.note_use(runtime_cache.Slot("e0", tmp_path, tmp_path / "build"))
    runtime_cache.prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e0", "e4"]


# --- the parent acts on no word of the build (issue 41) ----------------------------------------

# A project without a compiler: its "runtime library" is a file the build stages where the
# CMake module would, under the key the parent gave; its log forges the lines the parent once
# took places from.
_FAKE_CMAKE = """cmake_minimum_required(VERSION 3.20)
project(fake NONE)
message(STATUS "mlf-runtime-cache: hit @SECRET@")
message(STATUS "mlf-runtime-cache: miss @PWN@ staged @SECRETDIR@")
set(staged "${CMAKE_BINARY_DIR}/mlf-runtime-cache/${MLF_RUNTIME_CACHE_KEY}")
add_custom_target(stage ALL
  COMMAND "${CMAKE_COMMAND}" -E echo "mlf-runtime-cache: hit @SECRET@"
  COMMAND "${CMAKE_COMMAND}" -E echo "mlf-runtime-cache: miss @PWN@ staged @SECRETDIR@"
  COMMAND "${CMAKE_COMMAND}" -E make_directory "${staged}"
  @STAGE@
  COMMAND "${CMAKE_COMMAND}" -E touch "${CMAKE_BINARY_DIR}/firmware"
  VERBATIM)
"""
_COPY = (
    'COMMAND "${CMAKE_COMMAND}" -E copy "${CMAKE_SOURCE_DIR}/lib.a"\n'
    '          "${staged}/libmlf_runtime.a"'
)
_LINKS = (
    'COMMAND "${CMAKE_COMMAND}" -E create_symlink "@SECRET@" "${staged}/libmlf_runtime.a"\n'
    '  COMMAND "${CMAKE_COMMAND}" -E create_symlink "@VICTIM@" "${CMAKE_BINARY_DIR}/build.log"'
)
_LIBRARY = b"!<arch>\nthe runtime library this build made\n"


def _fake_project(root: Path, stage: str) -> Tuple[Path, Path, Path]:
    """(project, the 0600 secret, where the forged line asks for a copy)."""
    secret_dir = root / "secretdir"
    secret_dir.mkdir(parents=True)
    secret = secret_dir / "copied_secret"
    secret.write_bytes(b"!<arch>\nmlf-secret-7d2e\n")
    secret.chmod(0o600)
    os.utime(secret_dir, (1_000_000, 1_000_000))
    pwn = root / "pwn" / "copied_secret"
    project = root / "project"
    (project / "runtime").mkdir(parents=True)
    (project / "runtime" / "mlf_runtime_cache.cmake").write_text("# MLF_RUNTIME_CACHE_KEY\n")
    (project / "lib.a").write_bytes(_LIBRARY)
    text = _FAKE_CMAKE.replace("@STAGE@", stage)
    for name, value in (("@SECRET@", secret), ("@SECRETDIR@", secret_dir), ("@PWN@", pwn),
                        ("@VICTIM@", root / "victim")):  # fmt: skip
        text = text.replace(name, str(value))
    (project / "CMakeLists.txt").write_text(text)
    return project, secret, pwn


def test_forged_cache_lines_change_nothing(tmp_path: Path, cache: Path) -> None:
    project, secret, pwn = _fake_project(tmp_path, _COPY)
    result = cmake_build(project, project / "build", firmware_name="firmware")
    assert f"miss {pwn} staged {secret.parent}" in result.log  # the forgery was printed
    assert not pwn.parent.exists()
    assert secret.parent.stat().st_mtime == 1_000_000  # a forged hit touched nothing
    # Control: what the build staged where the parent looks is stored, mode 0644.
    slot = runtime_cache.slot_for(project, project / "build", {})
    assert slot is not None and slot.library.read_bytes() == _LIBRARY
    assert sorted(p.name for p in cache.iterdir()) == [slot.key]
    assert slot.library.stat().st_mode & 0o777 == 0o644


def test_links_the_build_plants_are_not_followed(tmp_path: Path, cache: Path) -> None:
    project, secret, pwn = _fake_project(tmp_path, _LINKS)
    victim = tmp_path / "victim"
    victim.write_text("the user's file\n")
    cmake_build(project, project / "build", firmware_name="firmware")
    assert victim.read_text() == "the user's file\n"  # build.log was replaced, not followed
    assert (project / "build" / "build.log").is_file()
    assert not (project / "build" / "build.log").is_symlink()
    assert not pwn.parent.exists() and not cache.exists()  # the staged link was refused
    with pytest.raises(BuildError, match="holds the project"):
        cmake_build(project, project, firmware_name="firmware")
    assert not (project / "build.log").exists()


def test_the_key_leaves_the_model_out(mlp_archive: Path, tmp_path: Path, cache: Path) -> None:
    """Projects of other models share a key; another board, definition or $CFLAGS do not."""
    other = catalog()["long_names"]().write(tmp_path / "other.tar")

    def key(archive: Path, name: str, environ: Optional[dict] = None, **options: object) -> str:
        project = Project.generate(archive, tmp_path / name, options=dict(options))
        return runtime_cache.runtime_key(project.dir, {}, ["cc"], environ)

    first = key(mlp_archive, "a")
    assert key(other, "b") == first
    assert key(mlp_archive, "c", compile_definitions=["MLF_TEST_KEY=1"]) != first
    assert key(mlp_archive, "d", {**os.environ, "CFLAGS": "-O0"}) != first
