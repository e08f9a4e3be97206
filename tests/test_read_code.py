"""A model's generated code: present, defining what the graph and the AOT entry point call, and
never macOS's AppleDouble twins. One bad archive per rule (built from the test builders, and
from the real corpus where it is there), each refused at read time with one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import corpus_archive
from mlf_builders import (
    C_STUB,
    Files,
    aot_files,
    mlf_files,
    tar_files,
    with_json,
    write_dir,
    write_tar,
)

from project_api.cli import main
from project_api.errors import AotError, GraphError, MetadataError, ValidationError
from project_api.generate import generate_project
from project_api.read import open_archive
from project_api.read.code import defined_functions, is_junk
from project_api.read.ctext import search_at_word_start

SRC = "codegen/host/src"
GRAPH = "executor-config/graph/default.graph"
FUSED_ADD = "tvmgen_default_fused_add"

# What TVM 0.14 writes in <mod>_lib0.c for the system library: prototypes and a registry
# that name the functions without defining them.
REGISTRY_C = f"""#include "tvm/runtime/c_runtime_api.h"
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t {FUSED_ADD}(TVMValue* args, int* type_code, int num_args, TVMValue* out_value, \
int* out_type_code, void* resource_handle);
static TVMBackendPackedCFunc _tvm_func_array[] = {{
    (TVMBackendPackedCFunc){FUSED_ADD},
}};
static const TVMFuncRegistry _tvm_func_registry = {{
    "\\001\\000{FUSED_ADD}\\000",    _tvm_func_array,
}};
""".encode()


def refused(tmp_path: Path, files: Files, error: type, *fragments: str) -> ValidationError:
    """``files`` is refused by open_archive and by ``mlf-project info`` (one line)."""
    path = write_dir(tmp_path / "a", files)
    with pytest.raises(error) as caught:
        open_archive(path)
    for fragment in fragments:
        assert fragment in str(caught.value), str(caught.value)
    assert main(["info", str(path)]) == 2
    return caught.value


def corpus_files(stem: str) -> Files:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"no {stem}.tar in the corpus (MLF_PROJECT_CORPUS)")
    return tar_files(archive)


# --- definitions -----------------------------------------------------------------------------


def test_definitions_as_tvm_writes_them() -> None:
    text = (
        "TVM_DLL int32_t tvmgen_default_fused_add(void* args, int32_t* arg_type_ids, "
        "int32_t num_args, void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {\n"
        "int32_t tvmgen_m_run(struct tvmgen_m_inputs* inputs,struct tvmgen_m_outputs* outputs) "
        "{return tvmgen_m___tvm_main__(inputs->x,outputs->y);\n}\n"
    )
    found = defined_functions([text, REGISTRY_C.decode()])
    assert {"tvmgen_default_fused_add", "tvmgen_m_run"} <= found
    assert "tvmgen_m___tvm_main__" not in found  # called, not defined
    assert defined_functions([REGISTRY_C.decode()]) == set()  # the registry defines nothing


def test_definitions_around_long_stretches_without_braces() -> None:
    """Only the text within reach before each brace is searched (a 60 MiB comment once took
    the reader 4 s): definitions on either side of such a stretch, and a text made of braces,
    are still read, the same as by a whole-text search."""
    definition = "int32_t f{0}(int32_t* a, void (*cb)(int)) {{ return 0; }}\n"
    text = definition.format(1) + "/*" + " " * (3 << 20) + "*/\n" + definition.format(2)
    text += "int32_t far(int32_t a,\n" + "\n" * (2 << 20) + "  int32_t b) {}\n"
    # a parameter list longer than the reach (1 MiB; TVM's are a few hundred bytes) is not seen
    assert {"f1", "f2"} <= defined_functions([text]) and "far" not in defined_functions([text])
    braces = "{" * (4 << 20) + definition.format(3) + "{" * (4 << 20)
    assert "f3" in defined_functions([braces])


def test_a_name_is_matched_only_where_a_word_starts() -> None:
    pattern = re.compile(r"m_run\s*\(([^()]*)\)\s*;")
    text = "int32_t xm_run(int a);\nint32_t _m_run(int b);\nint32_t m_run(struct m_inputs* i);\n"
    match = search_at_word_start(pattern, text)
    assert match is not None and match.group(1) == "struct m_inputs* i"
    assert search_at_word_start(pattern, "xm_run(int a);") is None
    assert search_at_word_start(pattern, "m_run(void);") is not None  # at the very start


@pytest.mark.parametrize(
    "name, junk",
    [("._default_lib0.c", True), ("__MACOSX/x.c", True), (".DS_Store", True), ("lib0.c", False)],
)
def test_macos_junk_names(name: str, junk: bool) -> None:
    assert is_junk(name) == junk


# --- one bad archive per rule ------------------------------------------------------------------


def test_model_without_code(tmp_path: Path) -> None:
    files = {k: v for k, v in mlf_files(7).items() if not k.startswith(SRC)}
    refused(tmp_path, files, MetadataError, "model 'default' needs its generated C", "nothing")


def test_model_of_a_multi_model_archive_without_code(tmp_path: Path) -> None:
    files = {k: v for k, v in mlf_files(7, ["a", "b"]).items() if not k.startswith(f"{SRC}/b_")}
    refused(tmp_path, files, MetadataError, "modules.b.model_name", "a_lib0.c, a_lib1.c")


def test_graph_function_not_defined(tmp_path: Path) -> None:
    files = mlf_files(7)
    files[f"{SRC}/default_lib0.c"] = REGISTRY_C  # named by the registry: not a definition
    files[f"{SRC}/default_lib1.c"] = C_STUB % 1
    error = refused(tmp_path, files, GraphError, f"'{FUSED_ADD}' is defined in none")
    assert error.member == GRAPH and error.location == "nodes[2].attrs.func_name"


def test_graph_function_that_names_no_function(tmp_path: Path) -> None:
    def rename(graph: dict) -> None:
        graph["nodes"][3]["attrs"]["func_name"] = "tvmgen_default_nonexistent"

    files = with_json(mlf_files(7), GRAPH, rename)
    refused(tmp_path, files, GraphError, "nodes[3].attrs.func_name", "nonexistent")


def test_objects_are_not_second_guessed(tmp_path: Path) -> None:
    files = mlf_files(7)
    files[f"{SRC}/default_lib1.c"] = C_STUB % 1
    files["codegen/host/lib/default_lib2.o"] = b"\x7fELF" + bytes(60)
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        assert [p.name for p in archive.model().objects] == ["default_lib2.o"]


def test_aot_main_not_defined(tmp_path: Path) -> None:
    files = aot_files()
    del files[f"{SRC}/default_lib1.c"]  # lib0's tvmgen_default_run calls __tvm_main__
    error = refused(tmp_path, files, AotError, "tvmgen_default___tvm_main__", "defined in none")
    assert error.member == f"{SRC}/default_lib0.c"


def test_macos_junk_is_not_code(tmp_path: Path) -> None:
    files = mlf_files(7)
    junk = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X"
    files[f"{SRC}/._default_lib0.c"] = junk
    files["codegen/host/include/._tvmgen_default.h"] = junk
    files["__MACOSX/codegen/host/src/._default_lib1.c"] = junk
    files["parameters/._default.params"] = junk
    path = write_tar(tmp_path / "a.tar", files)
    with open_archive(path) as archive:
        assert [p.name for p in archive.model().sources] == ["default_lib0.c", "default_lib1.c"]
    generate_project(path, tmp_path / "p")
    copied = sorted(p.name for p in (tmp_path / "p/model").rglob("*") if p.is_file())
    assert not [name for name in copied if is_junk(name)], copied
    assert "._" not in (tmp_path / "p/CMakeLists.txt").read_text()


# --- the same rules on the real corpus ---------------------------------------------------------


def test_corpus_graph_without_its_operators(tmp_path: Path) -> None:
    files = corpus_files("mlp_default")
    del files[f"{SRC}/default_lib1.c"]
    refused(tmp_path, files, GraphError, "attrs.func_name", "tvmgen_default_fused_nn")


def test_corpus_aot_without_its_main(tmp_path: Path) -> None:
    files = corpus_files("mnist8_aot")
    del files[f"{SRC}/mnist_lib1.c"]
    refused(tmp_path, files, AotError, f"{SRC}/mnist_lib0.c", "tvmgen_mnist___tvm_main__")


def test_corpus_multi_model_without_one_models_code(tmp_path: Path) -> None:
    files = corpus_files("multi_module")
    files = {k: v for k, v in files.items() if not k.startswith(f"{SRC}/mlp_")}
    refused(tmp_path, files, MetadataError, "model 'mlp' needs its generated C")


def test_corpus_retarred_on_macos(tmp_path: Path) -> None:
    files = corpus_files("mlp_default")
    files[f"{SRC}/._default_lib0.c"] = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X"
    files["__MACOSX/._metadata.json"] = b"\x00\x05\x16\x07"
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        assert [p.name for p in archive.model().sources] == ["default_lib0.c", "default_lib1.c"]
