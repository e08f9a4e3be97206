"""The summary of a failed configure or build (project_api.build.summary): the lines that say
why, from real output. Each log below is an excerpt of what CMake, Ninja, Make, gcc, GNU ld and
arm-none-eabi-ld printed for a generated project (mlp_default.tar, or an audit case) with a
source removed, emptied, duplicated or broken; long command lines are cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import corpus_archive

from project_api.build.summary import MAX_ENTRIES, summarise
from project_api.cli import main
from project_api.driver import Project
from project_api.errors import BuildError

PROJECT = "/tmp/bcap/p"

# lib1.c emptied: every fused function is undefined, referenced from two objects each.
UNDEFINED = """\
[17/17] Linking C executable firmware
FAILED: firmware 
: && /usr/bin/cc   CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib0.c.o
/usr/bin/ld: CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib0.c.o:(.data.rel+0x0): undefined reference to `tvmgen_default_fused_nn_contrib_dense_pack'
/usr/bin/ld: CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib0.c.o:(.data.rel+0x8): undefined reference to `tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu'
/usr/bin/ld: CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib0.c.o:(.data.rel+0x10): undefined reference to `tvmgen_default_fused_nn_softmax'
/usr/bin/ld: CMakeFiles/firmware.dir/src/model_default.c.o:(.data.rel.ro+0x30): undefined reference to `tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu'
/usr/bin/ld: CMakeFiles/firmware.dir/src/model_default.c.o:(.data.rel.ro+0x38): undefined reference to `tvmgen_default_fused_nn_contrib_dense_pack'
/usr/bin/ld: CMakeFiles/firmware.dir/src/model_default.c.o:(.data.rel.ro+0x40): undefined reference to `tvmgen_default_fused_nn_softmax'
collect2: error: ld returned 1 exit status
ninja: build stopped: subcommand failed.
"""  # noqa: E501, W291

# audit case a_src_lib1_missing (AOT): the reference comes after an "in function" line.
UNDEFINED_AOT = """\
FAILED: firmware 
/usr/bin/ld: CMakeFiles/mlf_model_mnist.dir/model/mnist/codegen/host/src/mnist_lib0.c.o: in function `tvmgen_mnist_run':
mnist_lib0.c:(.text+0x7): undefined reference to `tvmgen_mnist___tvm_main__'
collect2: error: ld returned 1 exit status
ninja: build stopped: subcommand failed.
"""  # noqa: E501, W291

# audit case x_dup_source: lib2.c a copy of lib1.c.
MULTIPLE = """\
/usr/bin/ld: CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib2.c.o: in function `tvmgen_default_fused_nn_contrib_dense_pack':
default_lib2.c:(.text+0x0): multiple definition of `tvmgen_default_fused_nn_contrib_dense_pack'; CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib1.c.o:default_lib1.c:(.text+0x0): first defined here
/usr/bin/ld: CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib2.c.o: in function `tvmgen_default_fused_nn_softmax':
default_lib2.c:(.text+0x120): multiple definition of `tvmgen_default_fused_nn_softmax'; CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib1.c.o:default_lib1.c:(.text+0x120): first defined here
collect2: error: ld returned 1 exit status
"""  # noqa: E501

# audit case x_bogus_object: a lib/*.o that is not an object file.
BOGUS_OBJECT = """\
FAILED: firmware 
/tmp/bcap/p/model/default/codegen/host/lib/default_lib2.o: file not recognized: file format not recognized
collect2: error: ld returned 1 exit status
ninja: build stopped: subcommand failed.
"""  # noqa: E501, W291

# The same emptied lib1.c cross-compiled for qemu-lm3s6965evb (LTO, so a temporary object).
UNDEFINED_ARM = """\
/usr/lib/gcc/arm-none-eabi/12.2.1/../../../arm-none-eabi/bin/ld: /tmp/cc5RhTJf.ltrans0.ltrans.o:(.rodata.mlf_default_func_ptrs+0x0): undefined reference to `tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu'
/usr/lib/gcc/arm-none-eabi/12.2.1/../../../arm-none-eabi/bin/ld: warning: firmware.elf has a LOAD segment with RWX permissions
Memory region         Used Size  Region Size  %age Used
           FLASH:        9344 B       256 KB      3.56%
collect2: error: ld returned 1 exit status
"""  # noqa: E501

# "this is not C;" appended to lib1.c: gcc's errors with their excerpt and caret lines.
COMPILE = """\
[1/17] Building C object CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib1.c.o
FAILED: CMakeFiles/mlf_model_default.dir/model/default/codegen/host/src/default_lib1.c.o 
/usr/bin/cc -DMLF_BOARD_MAX_PAYLOAD=65535 -I/tmp/bcap/p/src -O2 -w -c /tmp/bcap/p/model/default/codegen/host/src/default_lib1.c
/tmp/bcap/p/model/default/codegen/host/src/default_lib1.c:142:1: error: unknown type name ‘this’
  142 | this is not C;
      | ^~~~
/tmp/bcap/p/model/default/codegen/host/src/default_lib1.c:142:9: error: expected ‘=’, ‘,’, ‘;’, ‘asm’ or ‘__attribute__’ before ‘not’
  142 | this is not C;
      |         ^~~
/tmp/bcap/p/model/default/codegen/host/src/default_lib1.c:142:9: error: unknown type name ‘not’
ninja: build stopped: subcommand failed.
"""  # noqa: E501, W291

# audit case a_header_ws_huge: the model's workspace size overflows in our generated C.
WERROR = """\
FAILED: CMakeFiles/firmware.dir/src/model_mnist.c.o 
/tmp/bcap/p/src/model_mnist.c:88:33: error: integer constant is too large for its type [-Werror]
   88 | static uint8_t workspace_memory[WORKSPACE_BYTES] __attribute__((aligned(MLF_STORAGE_ALIGN)));
      |                                 ^~~~~~~~~~~~~~~
cc1: all warnings being treated as errors
ninja: build stopped: subcommand failed.
"""  # noqa: E501, W291

# lib1.c deleted after generating: configure fails, two errors at the same line.
CMAKE_MISSING_SOURCE = """\
-- Configuring done
CMake Error at CMakeLists.txt:55 (add_library):
  Cannot find source file:

    model/default/codegen/host/src/default_lib1.c


CMake Error at CMakeLists.txt:55 (add_library):
  No SOURCES given to target: mlf_model_default


CMake Generate step failed.  Build files cannot be regenerated correctly.
"""

# Unix Makefiles instead of Ninja: make's "*** [...] Error 1" lines say nothing.
MAKE_UNDEFINED = """\
/usr/bin/ld: CMakeFiles/firmware.dir/src/model_default.c.o:(.data.rel.ro+0x40): undefined reference to `tvmgen_default_fused_nn_softmax'
collect2: error: ld returned 1 exit status
gmake[2]: *** [CMakeFiles/firmware.dir/build.make:150: firmware] Error 1
gmake[1]: *** [CMakeFiles/Makefile2:140: CMakeFiles/firmware.dir/all] Error 2
gmake: *** [Makefile:91: all] Error 2
"""  # noqa: E501


def lines(text: str) -> list:
    return text.split(";\n")


def test_undefined_references_once_per_symbol() -> None:
    summary = summarise(UNDEFINED, PROJECT)
    assert lines(summary) == [
        "ld: model/default/codegen/host/src/default_lib0.c.o:(.data.rel+0x0): undefined "
        "reference to `tvmgen_default_fused_nn_contrib_dense_pack'",
        "ld: model/default/codegen/host/src/default_lib0.c.o:(.data.rel+0x8): undefined "
        "reference to `tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu'",
        "ld: model/default/codegen/host/src/default_lib0.c.o:(.data.rel+0x10): undefined "
        "reference to `tvmgen_default_fused_nn_softmax'",
    ]  # collect2's "ld returned 1 exit status" adds nothing to these


def test_undefined_reference_after_in_function_line() -> None:
    assert summarise(UNDEFINED_AOT, PROJECT) == (
        "mnist_lib0.c:(.text+0x7): undefined reference to `tvmgen_mnist___tvm_main__'"
    )


def test_multiple_definitions() -> None:
    shown = lines(summarise(MULTIPLE, PROJECT).replace("; model/", " | model/"))
    assert len(shown) == 2
    assert shown[0].startswith(
        "default_lib2.c:(.text+0x0): multiple definition of "
        "`tvmgen_default_fused_nn_contrib_dense_pack' | model/default/codegen/host/src/"
        "default_lib1.c.o:default_lib1.c:(.text+0x0): first defined here"
    )
    assert "multiple definition of `tvmgen_default_fused_nn_softmax'" in shown[1]


def test_object_file_not_recognized() -> None:
    assert summarise(BOGUS_OBJECT, PROJECT) == (
        "model/default/codegen/host/lib/default_lib2.o: file not recognized: "
        "file format not recognized"
    )


def test_cross_linker_path_shortened_and_warnings_left_out() -> None:
    assert summarise(UNDEFINED_ARM, PROJECT) == (
        "ld: /tmp/cc5RhTJf.ltrans0.ltrans.o:(.rodata.mlf_default_func_ptrs+0x0): undefined "
        "reference to `tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu'"
    )


def test_compiler_errors_with_file_and_line() -> None:
    assert lines(summarise(COMPILE, PROJECT)) == [
        "model/default/codegen/host/src/default_lib1.c:142:1: error: unknown type name ‘this’",
        "model/default/codegen/host/src/default_lib1.c:142:9: error: expected ‘=’, ‘,’, ‘;’, "
        "‘asm’ or ‘__attribute__’ before ‘not’",
        "model/default/codegen/host/src/default_lib1.c:142:9: error: unknown type name ‘not’",
    ]


def test_werror_in_generated_code() -> None:
    assert summarise(WERROR, PROJECT) == (
        "src/model_mnist.c:88:33: error: integer constant is too large for its type [-Werror]"
    )


def test_without_project_dir_paths_stay_absolute() -> None:
    assert summarise(WERROR).startswith("/tmp/bcap/p/src/model_mnist.c:88:33: error: ")


def test_cmake_error_with_its_reasons() -> None:
    assert lines(summarise(CMAKE_MISSING_SOURCE, PROJECT)) == [
        "CMake Error at CMakeLists.txt:55 (add_library):\n"
        "    Cannot find source file:\n"
        "    model/default/codegen/host/src/default_lib1.c",
        "CMake Error at CMakeLists.txt:55 (add_library):\n"
        "    No SOURCES given to target: mlf_model_default",
    ]


def test_cmake_error_repeated_once() -> None:
    twice = CMAKE_MISSING_SOURCE + CMAKE_MISSING_SOURCE
    assert summarise(twice, PROJECT) == summarise(CMAKE_MISSING_SOURCE, PROJECT)


def test_make_error_lines_left_out() -> None:
    assert summarise(MAKE_UNDEFINED, PROJECT) == (
        "ld: src/model_default.c.o:(.data.rel.ro+0x40): undefined reference to "
        "`tvmgen_default_fused_nn_softmax'"
    )


def test_many_errors_capped() -> None:
    log = "".join(
        f"/tmp/bcap/p/src/main.c:{n}:1: error: unknown type name ‘t{n}’\n" for n in range(20)
    )
    shown = lines(summarise(log, PROJECT))
    assert len(shown) == MAX_ENTRIES + 1
    assert shown[0] == "src/main.c:0:1: error: unknown type name ‘t0’"
    assert shown[-1] == f"… and {20 - MAX_ENTRIES} more"


def test_linker_that_only_gave_up() -> None:
    log = "FAILED: firmware\ncollect2: error: ld returned 1 exit status\nninja: build stopped\n"
    assert summarise(log) == "collect2: error: ld returned 1 exit status"


def test_unknown_output_gives_the_tail() -> None:
    log = "".join(f"line {n}\n" for n in range(30))
    assert summarise(log) == "\n".join(f"line {n}" for n in range(20, 30))


# --- end to end -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_default() -> Path:
    archive = corpus_archive("mlp_default")
    if archive is None:
        pytest.skip("the corpus (../shared/mlf) is not here")
    return archive


def test_cli_names_the_undefined_function(
    mlp_default: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """lib1.c (the fused operators) emptied: the error names what the linker misses, and the
    file that holds the whole log."""
    project = Project.generate(mlp_default, tmp_path / "p")
    source = next((tmp_path / "p/model").rglob("*lib1.c"))
    source.write_text("/* removed */\n")
    with pytest.raises(BuildError) as caught:
        project.build()
    log_file = tmp_path / "p/build/build.log"
    assert caught.value.hint == f"full log: {log_file}"
    assert log_file.read_text() == caught.value.log
    capsys.readouterr()
    assert main(["build", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "undefined reference to `tvmgen_default_fused_nn_softmax'" in err
    assert "collect2" not in err and f"(full log: {log_file})" in err


def test_cli_names_the_missing_source(
    mlp_default: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    Project.generate(mlp_default, tmp_path / "p")
    next((tmp_path / "p/model").rglob("*lib1.c")).unlink()
    assert main(["build", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "CMake Error at CMakeLists.txt" in err and "Cannot find source file:" in err
    assert "default_lib1.c" in err
