"""The CMake fragment: dependencies placed in a project, configured, built and run on the host;
fake CMSIS-NN trees of both layouts (and one cross-compiled for a Cortex-M4); the real
CMSIS-NN when MLF_PROJECT_CMSIS_NN points at one."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest
from conftest import CMSIS_NN_TAG, cmsis_nn, corpus_dir, git

from project_api.errors import DependencyError
from project_api.resolve import (
    FRAGMENT_NAME,
    LOCK_FILE_NAME,
    DependencySpec,
    ResolvedDependency,
    cmake_fragment,
    collect_dependencies,
    cpu_flags,
    install_dependencies,
    parse_dependency,
    plan_build,
    read_lock,
    resolve_dependencies,
)

CMAKE = shutil.which("cmake")
NINJA = shutil.which("ninja")
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
ARM_GCC = shutil.which("arm-none-eabi-gcc")

needs_cmake = pytest.mark.skipif(
    CMAKE is None or CC is None, reason="needs cmake and a host C compiler"
)
needs_arm = pytest.mark.skipif(
    CMAKE is None or ARM_GCC is None or shutil.which("arm-none-eabi-readelf") is None,
    reason="needs cmake and arm-none-eabi-gcc/readelf (apt-get install gcc-arm-none-eabi)",
)


def write(root: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# As in CMSIS-NN v4.1.0: the public header includes stdint.h, but the library's own sources
# include a compiler header that uses uint32_t first; their host build works only because the
# recipe force-includes stdint.h into them (and only into them).
NN_COMPILER = "static inline uint32_t fake_clz(uint32_t v) { return v ? 0u : 32u; }\n"
NN_SOURCE = (
    '#include "arm_nnsupportfunctions.h"\n'
    "#if defined(__ARM_FEATURE_DSP)\nint arm_fake_dsp_path = 1;\n#endif\n"
    "int arm_fake_{tag}_s8(int x) {{ return x + (int)fake_clz(1u) + {value}; }}\n"
)


def fake_cmsis_nn_v4(root: Path) -> Path:
    return write(
        root,
        {
            "Include/arm_nnfunctions.h": "#include <stdint.h>\nint arm_fake_v4_s8(int x);\n",
            "Include/arm_nnsupportfunctions.h": '#include "Internal/arm_nn_compiler.h"\n'
            '#include "arm_nnfunctions.h"\n',
            "Include/Internal/arm_nn_compiler.h": NN_COMPILER,
            "Source/ConvolutionFunctions/arm_fake_v4_s8.c": NN_SOURCE.format(tag="v4", value=40),
            "Source/NNSupportFunctions/arm_nn_support.c": "int arm_nn_support_unused;\n",
            "Source/CMakeLists.txt": "this file must not be used by the cmsis-nn recipe\n",
            "Tests/huge_test_data.c": "#error tests are not part of the library\n",
            "LICENSE": "Apache-2.0\n",
        },
    )


def fake_cmsis_5(root: Path) -> Path:
    return write(
        root,
        {
            "CMSIS/NN/Include/arm_nnfunctions.h": '#include <stdint.h>\n#include "arm_math.h"\n'
            "int arm_fake_v5_s8(int x);\n",
            "CMSIS/NN/Include/arm_nnsupportfunctions.h": '#include "cmsis_compiler.h"\n'
            '#include "arm_nnfunctions.h"\n',
            "CMSIS/DSP/Include/arm_math.h": '#include "cmsis_compiler.h"\n',
            "CMSIS/Core/Include/cmsis_compiler.h": "#pragma once\n" + NN_COMPILER,
            "CMSIS/NN/Source/ConvolutionFunctions/arm_fake_v5_s8.c": NN_SOURCE.format(
                tag="v5", value=50
            ),
            "CMSIS/DSP/Source/BasicMathFunctions/arm_dsp_unused.c": "#error not NN\n",
            "LICENSE.txt": "Apache-2.0\n",
        },
    )


def path_spec(name: str, url: Path, **extra: object) -> DependencySpec:
    return parse_dependency({"short_name": name, "url": str(url), "url_type": "path", **extra})


def resolve_here(specs: Sequence[DependencySpec], tmp_path: Path) -> List[ResolvedDependency]:
    return resolve_dependencies(
        specs, archive_root=None, base_dir=tmp_path, cache_dir=tmp_path / "cache"
    )


def host_project(project: Path, main_c: str) -> None:
    write(
        project,
        {
            "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\n"
            "project(check C)\n"
            "add_executable(firmware main.c)\n"
            "target_compile_options(firmware PRIVATE -Wall -Werror)\n"
            f"include(${{CMAKE_CURRENT_LIST_DIR}}/{FRAGMENT_NAME})\n",
            "main.c": main_c,
        },
    )


def cmake_build(project: Path, *configure: str) -> None:
    assert CMAKE is not None
    build = project / "build"
    generator = ["-G", "Ninja"] if NINJA else []
    for command in (
        [CMAKE, "-S", str(project), "-B", str(build), *generator, *configure],
        [CMAKE, "--build", str(build)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def run_firmware(project: Path) -> str:
    done = subprocess.run(
        [str(project / "build" / "firmware")], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


# --- unit ---------------------------------------------------------------------------------


def test_cpu_flags() -> None:
    assert cpu_flags(None) == []
    assert cpu_flags({"mcpu": "host"}) == []
    assert cpu_flags({"mcpu": "cortex-m3"}) == ["-mcpu=cortex-m3", "-mthumb"]
    assert cpu_flags({"mcpu": "cortex-m4", "fpu": True}) == [
        "-mcpu=cortex-m4",
        "-mthumb",
        "-mfpu=fpv4-sp-d16",
        "-mfloat-abi=hard",
    ]
    assert cpu_flags({"mcpu": "cortex-m4", "fpu": "fpv4-sp-d16", "float_abi": "softfp"})[-1] == (
        "-mfloat-abi=softfp"
    )
    assert cpu_flags({"mcpu": "cortex-m4", "fpu": None, "float_abi": "soft"})[-1] == (
        "-mfloat-abi=soft"
    )
    assert cpu_flags({"cflags": ["-mcpu=cortex-m7", "-mthumb"]}) == ["-mcpu=cortex-m7", "-mthumb"]
    with pytest.raises(DependencyError, match="not a plain compiler option"):
        cpu_flags({"mcpu": "cortex-m4 -o /etc/passwd"})


def test_cpu_flags_from_a_board_cpu() -> None:
    boards = pytest.importorskip("project_api.board")
    cpu = boards.ArmCpu(mcpu="cortex-m4", float_abi="hard", fpu="fpv4-sp-d16", dsp=True)
    assert cpu_flags(cpu) == [
        "-mcpu=cortex-m4",
        "-mthumb",
        "-mfpu=fpv4-sp-d16",
        "-mfloat-abi=hard",
    ]


def test_cmsis_nn_plans_for_both_layouts(tmp_path: Path) -> None:
    v4 = fake_cmsis_nn_v4(tmp_path / "nn")
    recipe = path_spec("cmsis-nn", v4).effective_recipe()
    plan = plan_build(v4, recipe)
    assert plan.layout == "CMSIS-NN >= 4"
    assert plan.sources == (
        "Source/ConvolutionFunctions/arm_fake_v4_s8.c",
        "Source/NNSupportFunctions/arm_nn_support.c",
    )
    assert plan.include_dirs == ("Include",) and "Tests" not in plan.copy
    five = fake_cmsis_5(tmp_path / "CMSIS_5")
    plan5 = plan_build(five, recipe)
    assert plan5.layout == "CMSIS 5"
    assert plan5.sources == ("CMSIS/NN/Source/ConvolutionFunctions/arm_fake_v5_s8.c",)
    assert plan5.include_dirs == ("CMSIS/NN/Include", "CMSIS/DSP/Include", "CMSIS/Core/Include")
    with pytest.raises(DependencyError, match="is not a CMSIS-NN tree"):
        plan_build(write(tmp_path / "other", {"x.c": ""}), recipe)


def test_cmsis_path_option_accepts_the_nn_folder_of_cmsis_5(tmp_path: Path) -> None:
    five = fake_cmsis_5(tmp_path / "CMSIS_5")
    specs = collect_dependencies([], cmsis_path=str(five / "CMSIS" / "NN"))
    [dep] = resolve_here(specs, tmp_path)
    assert dep.path == five.resolve()


def test_fragment_names_the_target_and_refuses_an_empty_list(tmp_path: Path) -> None:
    lib = write(tmp_path / "lib", {"include/l.h": ""})
    deps = resolve_here([path_spec("lib", lib)], tmp_path)
    text = cmake_fragment(deps, project_dir=tmp_path, target_name=["firmware", "model"])
    assert "target_link_libraries(firmware PRIVATE mlf_dep_lib)" in text
    assert "target_link_libraries(model PRIVATE mlf_dep_lib)" in text
    assert "add_library(mlf_dep_lib INTERFACE)" in text
    with pytest.raises(DependencyError, match="no target"):
        cmake_fragment(deps, project_dir=tmp_path, target_name=[])


# --- host builds ----------------------------------------------------------------------------

MAIN_ALL = r"""
#if defined(INT32_MAX)
#error the cmsis-nn recipe's forced stdint.h leaked into the firmware's own sources
#endif
#include <stdio.h>
#include <arm_nnfunctions.h>
#include "dep.h"
#include "hdr.h"
#include "ovr.h"
#include "sub.h"
int main(void) {
  printf("%d %d %d %d %d\n", arm_fake_v4_s8(1), dep_answer(), HDR_VALUE, ovr_value(), sub_value());
  return 0;
}
"""


@needs_cmake
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_project_builds_and_runs_with_every_recipe(tmp_path: Path) -> None:
    # A git dependency at a tag (conventional src/ + include/ layout).
    repo = write(
        tmp_path / "deprepo",
        {
            "include/dep.h": "int dep_answer(void);\n",
            "src/dep.c": '#include "dep.h"\nint dep_answer(void) { return 1; }\n',
        },
    )
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "tag", "v1")
    (repo / "src" / "dep.c").write_text('#include "dep.h"\nint dep_answer(void) { return 2; }\n')
    git(repo, "commit", "-q", "-am", "two")
    header_only = write(tmp_path / "hdr", {"hdr.h": "#define HDR_VALUE 5\n"})
    override = write(
        tmp_path / "ovr",
        {
            "code/ovr.c": "int ovr_value(void) { return OVR_BASE + 1; }\n",
            "code/broken.c": "#error not selected by the recipe\n",
            "headers/ovr.h": "int ovr_value(void);\n",
        },
    )
    own_cmake = write(
        tmp_path / "sub",
        {
            "CMakeLists.txt": "add_library(sublib STATIC sub.c)\n"
            "target_include_directories(sublib PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})\n",
            "sub.c": "int sub_value(void) { return 9; }\n",
            "sub.h": "int sub_value(void);\n",
        },
    )
    nn = fake_cmsis_nn_v4(tmp_path / "CMSIS-NN")
    specs = collect_dependencies(
        [[{"short_name": "dep", "url": repo.as_uri(), "url_type": "git", "version_spec": "v1"}]],
        overrides=[
            f"short_name=hdr,url={header_only},url_type=path",
            f"short_name=ovr,url={override},url_type=path,sources=code/ovr.c,"
            "include_dirs=headers,defines=OVR_BASE=10",
            f"short_name=sub,url={own_cmake},url_type=path,targets=sublib",
        ],
        cmsis_path=str(nn),
    )
    project = tmp_path / "project"
    host_project(project, MAIN_ALL)
    placed = install_dependencies(resolve_here(specs, tmp_path), project)
    assert [d.placed for d in placed] == [
        "deps/dep",
        "deps/hdr",
        "deps/ovr",
        "deps/sub",
        "deps/cmsis-nn",
    ]
    assert not (project / "deps" / "cmsis-nn" / "Tests").exists()
    fragment = (project / FRAGMENT_NAME).read_text()
    assert str(tmp_path) not in fragment  # self-contained: everything is relative
    started = time.monotonic()
    cmake_build(project)
    assert run_firmware(project) == "41 1 5 11 9"
    assert time.monotonic() - started < 120

    # The project stays buildable when moved: nothing outside it is referenced.
    moved = tmp_path / "moved"
    shutil.copytree(project, moved, ignore=shutil.ignore_patterns("build"))
    for source in (repo, header_only, override, own_cmake, nn):
        shutil.rmtree(source)
    cmake_build(moved)
    assert run_firmware(moved) == "41 1 5 11 9"
    lock = read_lock(moved / LOCK_FILE_NAME)
    assert lock.entries["dep"].resolved is not None and lock.entries["cmsis-nn"].resolved is None


@needs_cmake
def test_cmsis_5_layout_builds_on_the_host(tmp_path: Path) -> None:
    five = fake_cmsis_5(tmp_path / "CMSIS_5")
    project = tmp_path / "project"
    host_project(
        project,
        "#include <stdio.h>\n#include <arm_nnfunctions.h>\n"
        'int main(void) { printf("%d\\n", arm_fake_v5_s8(2)); return 0; }\n',
    )
    specs = collect_dependencies([], cmsis_path=str(five))
    install_dependencies(resolve_here(specs, tmp_path), project)
    assert not (project / "deps" / "cmsis-nn" / "CMSIS" / "DSP" / "Source").exists()
    cmake_build(project)
    assert run_firmware(project) == "52"


@needs_cmake
def test_missing_cmake_target_of_a_dependency_fails_at_configure(tmp_path: Path) -> None:
    sub = write(tmp_path / "sub", {"CMakeLists.txt": "add_library(other STATIC s.c)\n", "s.c": ""})
    project = tmp_path / "project"
    host_project(project, "int main(void) { return 0; }\n")
    install_dependencies(resolve_here([path_spec("sub", sub)], tmp_path), project)
    with pytest.raises(AssertionError) as info:
        cmake_build(project)
    message = " ".join(str(info.value).split())
    assert "defines no target sub; give its recipe targets=<names>" in message


# --- cross build ----------------------------------------------------------------------------

ARM_TOOLCHAIN = """
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
"""


def arm_project(project: Path, source: str) -> None:
    write(
        project,
        {
            "arm.cmake": ARM_TOOLCHAIN,
            "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\nproject(check C)\n"
            "add_library(firmware STATIC model.c)\n"
            f"include(${{CMAKE_CURRENT_LIST_DIR}}/{FRAGMENT_NAME})\n",
            "model.c": source,
        },
    )


def arm_attributes(library: Path) -> str:
    return subprocess.run(
        ["arm-none-eabi-readelf", "-A", str(library)], capture_output=True, text=True, check=True
    ).stdout


def nm_tool(arm: bool) -> str:
    return (shutil.which("arm-none-eabi-nm") if arm else None) or "nm"


def defined_symbols(library: Path, arm: bool = True) -> List[str]:
    nm = nm_tool(arm)
    out = subprocess.run(
        [nm, "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return [line.split()[-1] for line in out.splitlines() if len(line.split()) == 3]


@needs_arm
@pytest.mark.parametrize(
    "cpu, arch, dsp",
    [({"mcpu": "cortex-m4", "fpu": True}, "7E-M", True), ({"mcpu": "cortex-m3"}, "7-M", False)],
)
def test_cmsis_nn_is_built_with_the_board_cpu_flags(
    tmp_path: Path, cpu: Dict[str, object], arch: str, dsp: bool
) -> None:
    nn = fake_cmsis_nn_v4(tmp_path / "CMSIS-NN")
    project = tmp_path / "project"
    arm_project(
        project, "#include <arm_nnfunctions.h>\nint f(void) { return arm_fake_v4_s8(1); }\n"
    )
    specs = collect_dependencies([], cmsis_path=str(nn))
    install_dependencies(resolve_here(specs, tmp_path), project, cpu=cpu)
    cmake_build(project, f"-DCMAKE_TOOLCHAIN_FILE={project / 'arm.cmake'}")
    library = project / "build" / "libmlf_dep_cmsis_nn.a"
    attributes = arm_attributes(library)
    assert f"Tag_CPU_arch: v{arch}" in attributes or f'Tag_CPU_name: "{arch}"' in attributes
    assert ("Tag_ABI_VFP_args: VFP registers" in attributes) == (cpu.get("fpu") is True)
    # CMSIS-NN picks its DSP code from __ARM_FEATURE_DSP, which -mcpu decides.
    assert ("arm_fake_dsp_path" in defined_symbols(library)) == dsp


# --- the real CMSIS-NN ---------------------------------------------------------------------


def real_cmsis_spec() -> DependencySpec:
    source = cmsis_nn()
    if source.git_url is None:
        return parse_dependency(
            {"short_name": "cmsis-nn", "url": str(source.tree), "url_type": "path"}
        )
    return parse_dependency(
        {
            "short_name": "cmsis-nn",
            "url": source.git_url,
            "url_type": "git",
            "version_spec": CMSIS_NN_TAG,
        }
    )


def kws_sources(tmp_path: Path) -> Optional[List[Path]]:
    archive = corpus_dir() / "kws_int8_cmsisnn.tar"
    if not archive.is_file():
        return None
    out = []
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".c"):
                stream = tar.extractfile(member)
                assert stream is not None
                path = tmp_path / "model" / Path(member.name).name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(stream.read())
                out.append(path)
    return out


def crt_include() -> Path:
    from project_api.resources import crt_dir

    return crt_dir() / "include"


@needs_cmake
@pytest.mark.parametrize("target", ["host", "cortex-m4"])
def test_real_cmsis_nn_builds_with_the_cmsisnn_model(tmp_path: Path, target: str) -> None:
    spec = real_cmsis_spec()
    if target != "host" and ARM_GCC is None:
        pytest.skip("needs arm-none-eabi-gcc")
    deps = resolve_dependencies(
        [spec], archive_root=None, base_dir=tmp_path, cache_dir=tmp_path / "cache"
    )
    if spec.url_type == "git":
        assert deps[0].resolved is not None
    sources = kws_sources(tmp_path) or []
    project = tmp_path / "project"
    model = "\n".join(f'  "{s}"' for s in sources) or '  "${CMAKE_CURRENT_LIST_DIR}/none.c"'
    write(
        project,
        {
            "arm.cmake": ARM_TOOLCHAIN,
            "none.c": "int nothing;\n",
            "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\nproject(check C)\n"
            f"add_library(firmware STATIC\n{model}\n)\n"
            f'target_include_directories(firmware PRIVATE "{crt_include()}")\n'
            "target_compile_options(firmware PRIVATE -w)\n"
            f"include(${{CMAKE_CURRENT_LIST_DIR}}/{FRAGMENT_NAME})\n",
        },
    )
    cpu = None if target == "host" else {"mcpu": "cortex-m4", "fpu": True}
    install_dependencies(deps, project, cpu=cpu)
    configure = [] if target == "host" else [f"-DCMAKE_TOOLCHAIN_FILE={project / 'arm.cmake'}"]
    cmake_build(project, *configure)
    library = project / "build" / "libmlf_dep_cmsis_nn.a"
    defined = set(defined_symbols(library, arm=cpu is not None))
    if sources:  # every CMSIS-NN kernel the model calls is in the library
        undefined = subprocess.run(
            [nm_tool(cpu is not None), "-u", str(project / "build" / "libfirmware.a")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        kernels = {s for s in undefined if s.startswith("arm_")}
        assert kernels and kernels <= defined
