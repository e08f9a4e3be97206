"""Building generated projects: cmake choice, progress, incremental and moved builds,
compiler errors and linker overflows reported clearly, large params built quickly."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import List

import numpy as np
import pytest
from conftest import requires_arm

from project_api.build import find_cmake
from project_api.build.cmake import parse_memory_usage
from project_api.driver import Project
from project_api.errors import BuildError, FitError
from project_api.modelgen import catalog, compare_outputs, params_sized
from project_api.run.base import live_children


@pytest.fixture(scope="module")
def mlp_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return catalog()["mlp"]().write(tmp_path_factory.mktemp("a") / "mlp.tar")


def run_once(project: Project, model_name: str = "mlp") -> None:
    model = catalog()[model_name]()
    inputs = model.sample_inputs()
    with project.session() as session:
        outputs = session.run(inputs)
    assert compare_outputs(outputs, model.reference(inputs)) == []
    assert live_children() == []


def test_cmake_is_recent_enough() -> None:
    tool = find_cmake()
    assert tool.version[:2] >= (3, 20)


def test_cmake_option_that_does_not_run(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="does not run"):
        find_cmake(str(tmp_path / "no-cmake-here"))


def test_build_progress_and_incremental(mlp_archive: Path, tmp_path: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "p")
    seen: List[str] = []
    firmware = project.build(progress=seen.append)
    assert firmware == project.firmware and firmware.is_file()
    assert seen[0] == "configuring"
    assert any(s.startswith("compiling ") for s in seen) and "linking" in seen
    assert seen[-1].startswith("built ")
    again: List[str] = []
    project.build(progress=again.append)
    assert "configuring" not in again and "linking" not in again
    run_once(project)


def test_moved_project_still_builds(mlp_archive: Path, tmp_path: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "a" / "p")
    project.build()
    shutil.move(str(tmp_path / "a"), str(tmp_path / "b"))
    moved = Project.open(tmp_path / "b" / "p")
    seen: List[str] = []
    moved.build(progress=seen.append)
    assert "configuring" in seen  # the old cache pointed at the old place: started over
    run_once(moved)


def test_plain_cmake_builds_the_project(mlp_archive: Path, tmp_path: Path) -> None:
    """Nothing but CMake and a compiler: the generated project needs no Python to build."""
    import subprocess

    Project.generate(mlp_archive, tmp_path / "p")
    cmake = find_cmake().path
    subprocess.run([cmake, "-S", ".", "-B", "out"], cwd=tmp_path / "p", check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run([cmake, "--build", "out"], cwd=tmp_path / "p", check=True,
                   capture_output=True)  # fmt: skip
    assert (tmp_path / "p/out/firmware").is_file()


def test_compiler_error_is_reported(mlp_archive: Path, tmp_path: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "p")
    source = next((tmp_path / "p/model/mlp").rglob("*lib1.c"))
    source.write_text(source.read_text() + "\nthis is not C;\n")
    with pytest.raises(BuildError) as caught:
        project.build()
    assert "lib1.c" in str(caught.value) and "error" in str(caught.value)
    assert "$ " in caught.value.log and "FAILED" in caught.value.log


def test_werror_applies_to_our_code_only(mlp_archive: Path, tmp_path: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "p")
    main = tmp_path / "p/src/main.c"
    main.write_text(main.read_text() + "\nstatic int unused_helper(void) { return 1; }\n")
    with pytest.raises(BuildError, match="unused_helper"):
        project.build()
    relaxed = Project.generate(mlp_archive, tmp_path / "q", options={"warning_as_error": "false"})
    main = tmp_path / "q/src/main.c"
    main.write_text(main.read_text() + "\nstatic int unused_helper(void) { return 1; }\n")
    relaxed.build()


def test_large_params_build_and_run(tmp_path: Path) -> None:
    """4 MiB of params: .incbin keeps the build about as quick as for 1 KiB."""
    timings = {}
    for size in (1024, 4 << 20):
        model = params_sized(size)
        archive = model.write(tmp_path / f"p{size}.tar")
        started = time.monotonic()
        project = Project.generate(archive, tmp_path / f"proj{size}")
        project.build()
        timings[size] = time.monotonic() - started
        assert project.last_build is not None
        inputs = model.sample_inputs()
        with project.session() as session:
            outputs = session.run(inputs)
        assert compare_outputs(outputs, model.reference(inputs)) == []
    print(f"generate+build: 1 KiB params {timings[1024]:.2f} s, 4 MiB {timings[4 << 20]:.2f} s")
    assert timings[4 << 20] < 3 * timings[1024] + 10


def test_memory_usage_table_is_parsed() -> None:
    log = (
        "Memory region         Used Size  Region Size  %age Used\n"
        "           FLASH:       12345 B         4 MB      0.29%\n"
        "             RAM:          20 KB         4 MB      0.49%\n"
    )
    assert parse_memory_usage(log) == {
        "FLASH": {"used": 12345, "size": 4 << 20},
        "RAM": {"used": 20 << 10, "size": 4 << 20},
    }


@requires_arm
def test_linker_overflow_becomes_fit_error(mlp_archive: Path, tmp_path: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "p", board="qemu-lm3s6965evb")
    script = tmp_path / "p/board/linker.ld"
    text = script.read_text()
    script.write_text(text.replace("LENGTH = 0x00010000", "LENGTH = 0x00000800"))
    with pytest.raises(FitError, match=r"region RAM overflowed by \d+ bytes"):
        project.build()


@requires_arm
def test_cross_build_reports_memory_use(mlp_archive: Path, tmp_path: Path) -> None:
    project = Project.generate(mlp_archive, tmp_path / "p", board="qemu-mps2-an385")
    firmware = project.build()
    assert firmware.name == "firmware.elf"
    memory = project.last_build.memory
    assert memory is not None and memory["RAM"]["used"] > 0
    assert np.isclose(memory["RAM"]["size"], 4 << 20)


def mps2_objects(build_dir: Path) -> List[Path]:
    return [p for p in (build_dir / "CMakeFiles").rglob("*.obj") if "mps2" in p.parts]


@requires_arm
def test_regenerated_for_another_family_with_an_outside_build_dir(
    mlp_archive: Path, tmp_path: Path
) -> None:
    """A project regenerated in place for a board of another family holds exactly the new
    board's seam, and a build directory outside the project (option build_dir), which outlives
    the regeneration, starts over: no CPU flags, toolchain or seam objects of the old board."""
    outside = tmp_path / "outside-build"
    options = {"build_dir": str(outside)}
    first = Project.generate(mlp_archive, tmp_path / "p", board="qemu-mps3-an547", options=options)
    first.build()
    assert mps2_objects(outside)
    project = Project.generate(
        mlp_archive, tmp_path / "p", board="qemu-netduinoplus2", options=options, force=True
    )
    copied = {d.name: sorted(f.name for f in d.iterdir()) for d in (project.dir / "board").iterdir()
              if d.is_dir()}  # fmt: skip
    wanted = {d.name: sorted(f.name for f in d.iterdir() if f.suffix in (".c", ".h"))
              for d in project.board.seam_dirs()}  # fmt: skip
    assert copied == wanted and "mps2" not in copied
    project.build()
    cache = (outside / "CMakeCache.txt").read_text()
    assert "-mcpu=cortex-m4;" in cache and "cortex-m55" not in cache
    assert not mps2_objects(outside)
    run_once(project)


def test_makefiles_when_ninja_is_missing(
    mlp_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import project_api.build.cmake as cmake_module

    monkeypatch.setattr(cmake_module, "find_ninja", lambda: None)
    project = Project.generate(mlp_archive, tmp_path / "p")
    seen: List[str] = []
    project.build(progress=seen.append)
    assert (tmp_path / "p/build/Makefile").is_file()
    assert any(s.startswith("compiling ") and s.endswith("%") for s in seen)
    run_once(project)
