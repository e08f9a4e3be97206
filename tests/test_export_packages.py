"""The export folder as each ecosystem's package (issue 35), checked with that ecosystem's own
tools where Debian or PyPI has them: arduino-builder builds and links the library against the
test's minimal Cortex-M platform (run on an386); PlatformIO packs library.json (`pio pkg
pack`, its licence list fed locally); Zephyr's module.yml against the module schema's keys
(pykwalify), its Kconfig (kconfiglib), its CMakeLists.txt under a CMake harness defining the
zephyr_* functions; ESP-IDF's `compote manifest lint` and `compote component pack`. No
Zephyr, arduino-cli or ESP-IDF build happens here (none of them is installable offline).

The Python tools live in a venv of their own (.ci/setup makes it: tests/export_tools.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import corpus_archive, requires_arm
from export_tools import tool, tools_python
from export_user import HERE, Exported, check_outputs, linker_script, run_firmware, user_main

from project_api.board import load_board
from project_api.generate.export import export_library


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """KWS exported once for an386's CPU, every format."""
    import numpy as np

    archive = corpus_archive("kws_int8")
    if archive is None:
        pytest.skip("corpus archive kws_int8.tar is absent (set MLF_PROJECT_CORPUS)")
    target = tmp_path_factory.mktemp("export") / "kws"
    export_library(archive, target, board="qemu-mps2-an386")
    base = str(archive)[: -len(".tar")]
    with np.load(f"{base}.inputs.npz") as ins, np.load(f"{base}.outputs.npz") as outs:
        return Exported(target, "kws", {k: ins[k] for k in ins.files}, [outs["output0"]])


def _run(argv, cwd=None, timeout=600):
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv[0]}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


# --- Arduino ----------------------------------------------------------------------------------


@requires_arm
@pytest.mark.qemu
@pytest.mark.skipif(
    shutil.which("arduino-builder") is None,
    reason="needs Debian's arduino-builder (apt-get install arduino-builder; .ci/setup does)",
)
def test_arduino_builder_links_and_runs(exported: Exported, tmp_path: Path) -> None:
    board = load_board("qemu-mps2-an386")
    platform = tmp_path / "hardware" / "mlftest" / "arm"
    shutil.copytree(HERE / "arduino", platform)
    core = platform / "cores" / "mlftest"
    shutil.copyfile(HERE / "startup.c", core / "startup.c")
    linker_script(board, core / "user.ld")
    libraries = tmp_path / "libraries"
    libraries.mkdir()
    shutil.copytree(exported.dir, libraries / "kws")
    sketch = tmp_path / "kws_sketch" / "kws_sketch.ino"
    sketch.parent.mkdir()
    text = user_main([exported]).replace("int main(void) {", "static int run_models(void) {")
    sketch.write_text(
        text + '\nextern "C" void user_exit(int status);\n'
        "void setup() { if (run_models() != 0) user_exit(1); }\nvoid loop() {}\n"
    )
    build = tmp_path / "build"
    build.mkdir()
    _run(
        ["arduino-builder", "-compile", "-hardware", tmp_path / "hardware",
         "-hardware", "/usr/share/arduino-builder", "-tools", "/usr/share/arduino-builder",
         "-libraries", libraries, "-fqbn", "mlftest:arm:an386", "-ide-version", "10813",
         "-build-path", build, sketch]
    )  # fmt: skip
    elf = build / "kws_sketch.ino.elf"
    assert elf.is_file()
    check_outputs(run_firmware(elf, board), [exported])


# --- PlatformIO -------------------------------------------------------------------------------

_PACK = """
import sys
from platformio.package.manifest.schema import ManifestSchema
# PlatformIO checks "license" against SPDX's list, which it downloads: fed here instead.
ManifestSchema.load_spdx_licenses = staticmethod(
    lambda: {"licenses": [{"licenseId": "Apache-2.0"}]}
)
from platformio.__main__ import main
sys.argv = ["pio", "pkg", "pack", sys.argv[1], "-o", sys.argv[2]]
sys.exit(main())
"""


def test_platformio_packs(exported: Exported, tmp_path: Path) -> None:
    python = tools_python("platformio")
    out = tmp_path / "out"
    out.mkdir()
    env_home = tmp_path / "pio-home"
    done = subprocess.run(
        [python, "-c", _PACK, str(exported.dir), str(out)],
        capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PLATFORMIO_CORE_DIR": str(env_home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    packed = list(out.glob("*.tar.gz"))
    assert len(packed) == 1, done.stdout


# --- Zephyr -----------------------------------------------------------------------------------

# The module file's schema as Zephyr documents it (scripts/zephyr_module.py: name, build:
# cmake, kconfig, cmake-ext, kconfig-ext, depends, settings), in pykwalify's language.
_MODULE_SCHEMA = """
type: map
mapping:
  name: {type: str, required: true}
  build:
    type: map
    required: true
    mapping:
      cmake: {type: str}
      kconfig: {type: str}
      cmake-ext: {type: bool}
      kconfig-ext: {type: bool}
      depends: {type: seq, sequence: [{type: str}]}
      settings:
        type: map
        mapping:
          board_root: {type: str}
          dts_root: {type: str}
          soc_root: {type: str}
          arch_root: {type: str}
          module_ext_root: {type: str}
"""

_KCONFIG = """
import sys
import kconfiglib
k = kconfiglib.Kconfig(sys.argv[1])
names = sorted(s.name for s in k.unique_defined_syms)
model = k.syms["MLF_MODEL_KWS"]
model.set_value(2)
assert k.syms["MLF_EXPORT_RUNTIME"].tri_value == 2, "the model selects the runtime"
print(" ".join(names))
"""

_ZEPHYR_HARNESS = """
cmake_minimum_required(VERSION 3.13)
project(zephyr_harness C)
# Zephyr's extension functions as the module's CMakeLists.txt uses them, recording what it asks.
set(ZEPHYR_CURRENT_LIBRARY "")
function(zephyr_library_named name)
  add_library(${name} STATIC)
  set(ZEPHYR_CURRENT_LIBRARY ${name} PARENT_SCOPE)
endfunction()
macro(zephyr_library_sources)
  target_sources(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endmacro()
add_library(zephyr_interface INTERFACE)
function(zephyr_include_directories)
  target_include_directories(zephyr_interface INTERFACE ${ARGN})
endfunction()
set(CONFIG_MLF_EXPORT_RUNTIME y)
set(CONFIG_MLF_MODEL_KWS y)
set(index 0)
foreach(module ${MODULES})
  math(EXPR index "${index} + 1")
  add_subdirectory(${module}/zephyr ${CMAKE_BINARY_DIR}/module${index})
endforeach()
get_property(targets DIRECTORY ${CMAKE_BINARY_DIR}/module1 PROPERTY BUILDSYSTEM_TARGETS)
get_property(second DIRECTORY ${CMAKE_BINARY_DIR}/module2 PROPERTY BUILDSYSTEM_TARGETS)
message(STATUS "module1: ${targets}; module2: ${second}")
"""


def test_zephyr_module(exported: Exported, tmp_path: Path) -> None:
    python = tools_python("pykwalify")
    schema = tmp_path / "module-schema.yml"
    schema.write_text(_MODULE_SCHEMA)
    _run([tool("pykwalify"), "-d", exported.dir / "zephyr" / "module.yml", "-s", schema])
    names = _run([python, "-c", _KCONFIG, exported.dir / "zephyr" / "Kconfig"])
    assert "MLF_MODEL_KWS" in names
    # Two modules (the same export twice, as two models would be): the runtime is one library.
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "CMakeLists.txt").write_text(_ZEPHYR_HARNESS)
    second = tmp_path / "second"
    shutil.copytree(exported.dir, second)
    text = (second / "zephyr" / "CMakeLists.txt").read_text().replace("mlf_kws", "mlf_kws2")
    (second / "zephyr" / "CMakeLists.txt").write_text(text)
    out = _run(
        ["cmake", "-S", harness, "-B", tmp_path / "hb", f"-DMODULES={exported.dir};{second}"]
    )
    assert "module1: mlf_runtime;mlf_kws; module2: mlf_kws2" in out, out


# --- ESP-IDF ----------------------------------------------------------------------------------


def test_espidf_component(exported: Exported, tmp_path: Path) -> None:
    compote = tool("compote")
    env_dir = tmp_path / "work"
    shutil.copytree(exported.dir, env_dir)
    _run([compote, "manifest", "lint"], cwd=env_dir)
    dest = tmp_path / "dist"
    _run(
        [compote, "component", "pack", "--name", "kws", "--dest-dir", dest],
        cwd=env_dir,
    )
    assert list(dest.glob("*.tgz")), "compote packed nothing"
