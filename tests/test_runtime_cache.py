"""The runtime library shared between projects (project_api.build.runtime_cache and the
project's runtime/mlf_runtime_cache.cmake): a hit links what an earlier project built and
runs the same; anything the library is built from changes the key; off means off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List

import pytest
from conftest import requires_arm

from project_api.build import find_cmake, runtime_cache
from project_api.driver import Project
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
    assert runtime_cache.configure_entries(tmp_path) == {runtime_cache.CACHE_ENTRY: ""}
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
        entry = tmp_path / f"key{i}"
        entry.mkdir()
        (entry / "libmlf_runtime.a").write_bytes(b"!<arch>\n")
        os.utime(entry, (1000 + i, 1000 + i))
    runtime_cache.note_use(tmp_path / "key0" / "libmlf_runtime.a")
    runtime_cache.prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key0", "key4"]
