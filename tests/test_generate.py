"""Project generation without compiling: layout, sizes, options, refusals (one per rule)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import numpy as np
import pytest
from mlf_builders import write_tar

from project_api.board import load_board
from project_api.errors import (
    BoardError,
    DependencyError,
    FitError,
    GenerateError,
    InputError,
    UnsupportedModelError,
)
from project_api.generate import (
    generate_project,
    is_generated_project,
    normalize_options,
    parse_option_assignments,
    read_project_info,
)
from project_api.generate.params_blob import aligned_params
from project_api.generate.plan import c_names
from project_api.generate.samples import from_arrays, random_samples
from project_api.generate.sizes import code_workspace, estimate_workspace, linker_overflow
from project_api.generate.table_sizes import json_parse_bytes, state_bytes
from project_api.generate.tables import compile_graph
from project_api.modelgen import catalog
from project_api.read import load_params, open_archive

# The runtime library's settings (sources, definitions, options, CPU flags).
RUNTIME_BUILD = Path("runtime", "mlf_runtime_build.cmake")


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    folder = tmp_path_factory.mktemp("archives")
    return {
        name: catalog()[name]().write(folder / f"{name}.tar")
        for name in ("mlp", "multi_model", "scalar", "cnn_int8")
    }


def generate(archive: Path, dest: Path, **kwargs: Any) -> Dict[str, Any]:
    return generate_project(archive, dest, **kwargs)


# --- layout --------------------------------------------------------------------------------


def test_layout_and_project_json(archives: Dict[str, Path], tmp_path: Path) -> None:
    info = generate(archives["mlp"], tmp_path / "p")
    root = tmp_path / "p"
    assert is_generated_project(root)
    for rel in (
        "model.tar",
        "microtvm_api_server.py",
        "project.json",
        "CMakeLists.txt",
        "src/main.c",
        "src/mlf_models.h",
        "src/model_mlp.c",
        "src/params_mlp.S",
        "src/params_mlp.bin",
        "runtime/include/mlf_runtime.h",
        "runtime/include/tvm/runtime/crt/module.h",
        "runtime/firmware/mlf_device.c",
        "board/host/mlf_platform_host.c",
    ):
        assert (root / rel).is_file(), rel
    assert (root / "model.tar").read_bytes() == archives["mlp"].read_bytes()
    assert info == read_project_info(root)
    model = info["models"][0]
    assert model["name"] == "mlp" and model["inputs"][0]["name"] == "x"
    sizes = model["sizes"]
    assert sizes["arena_bytes"] % 64 == 0 and sizes["arena_bytes"] > 0
    assert sizes["params_blob_bytes"] == (root / "src/params_mlp.bin").stat().st_size
    assert sizes["params_in_place"] == 4  # every weight and bias is used where it lies
    # With const tables the params are plain data, each tensor at a 64-byte boundary and
    # bound by the tables (no TVM headers, padding only up to the next boundary).
    data = (root / "src/params_mlp.bin").read_bytes()
    with open_archive(archives["mlp"]) as archive:
        params = archive.models[0].params
    for value in params.values():
        at = data.find(value.tobytes())
        assert at >= 0 and at % 64 == 0
    assert sizes["params_padding_bytes"] == len(data) - sum(v.nbytes for v in params.values())
    assert 0 <= sizes["params_padding_bytes"] < 64 * len(params)
    assert "mlf_params_mlp + " in (root / "src/model_mlp.c").read_text()


def test_json_graph_keeps_a_tvm_params_file(archives: Dict[str, Path], tmp_path: Path) -> None:
    generate(archives["mlp"], tmp_path / "p", options={"graph_format": "json"})
    blob = load_params((tmp_path / "p/src/params_mlp.bin").read_bytes())
    with open_archive(archives["mlp"]) as archive:
        for name, value in archive.models[0].params.items():
            np.testing.assert_array_equal(blob[name], value)


def test_paths_are_relative(archives: Dict[str, Path], tmp_path: Path) -> None:
    generate(archives["mlp"], tmp_path / "p")
    for name in ("CMakeLists.txt", "src/main.c", "src/model_mlp.c", "src/params_mlp.S"):
        text = (tmp_path / "p" / name).read_text()
        assert str(tmp_path) not in text, name
    assert "CMAKE_CURRENT_SOURCE_DIR" in (tmp_path / "p/CMakeLists.txt").read_text()


def test_project_opened_by_a_relative_path_builds_where_it_lies(
    archives: Dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from project_api.driver import Project

    generate(archives["mlp"], tmp_path / "p")
    monkeypatch.chdir(tmp_path)
    project = Project.open("p")
    assert project.build_dir == tmp_path / "p" / "build"
    assert project.firmware.parent == tmp_path / "p" / "build"


def test_params_are_incbin_not_c(archives: Dict[str, Path], tmp_path: Path) -> None:
    generate(archives["mlp"], tmp_path / "p")
    asm = (tmp_path / "p/src/params_mlp.S").read_text()
    assert '.incbin "params_mlp.bin"' in asm and ".balign 64" in asm
    assert "0x" not in (tmp_path / "p/src/model_mlp.c").read_text().split("mlf_graph_mlp =")[0]


def test_tables_are_in_the_model_file(archives: Dict[str, Path], tmp_path: Path) -> None:
    generate(archives["mlp"], tmp_path / "p")
    text = (tmp_path / "p/src/model_mlp.c").read_text()
    assert "static const mlf_graph mlf_graph_mlp" in text
    assert "MLF_EXECUTOR_STATE_BYTES(" in text
    assert "TVMSystemLibEntryPoint" in (tmp_path / "p/CMakeLists.txt").read_text()


def test_graph_format_json(archives: Dict[str, Path], tmp_path: Path) -> None:
    info = generate(archives["mlp"], tmp_path / "p", options={"graph_format": "json"})
    root = tmp_path / "p"
    assert (root / "src/graph_mlp.json").is_file() and (root / "src/graph_mlp.S").is_file()
    sizes = info["models"][0]["sizes"]
    assert sizes["graph_parse_bytes"] > 0 and sizes["graph_json_bytes"] > 0
    assert "mlf_graph_parse_json" in (root / "src/model_mlp.c").read_text()
    assert "runtime/src/mlf_graph_json.c" in (root / RUNTIME_BUILD).read_text()


def test_tables_project_does_not_compile_the_json_parser(
    archives: Dict[str, Path], tmp_path: Path
) -> None:
    generate(archives["mlp"], tmp_path / "p")
    cmake = (tmp_path / "p" / RUNTIME_BUILD).read_text()
    assert "mlf_graph_json.c" not in cmake and "mlf_tvm_compat.c" not in cmake
    assert "mlf_device.c" in cmake and "mlf_standalone.c" not in cmake
    # The generator checked the tables; the host checks them again at start-up too.
    assert 'option(MLF_CHECK_TABLES "check the generator' in cmake and 'of code)" ON)' in cmake
    text = (tmp_path / "p/src/model_mlp.c").read_text()
    assert "mlf_executor_init_linked(" in text and "mlf_graph_mlp_funcs" not in text


def test_cross_board_has_linker_script_and_toolchain(
    archives: Dict[str, Path], tmp_path: Path
) -> None:
    info = generate(archives["mlp"], tmp_path / "p", board="qemu-mps2-an385")
    root = tmp_path / "p"
    assert (root / "board/linker.ld").is_file() and (root / "board/toolchain.cmake").is_file()
    assert (root / "board/cortex_m/startup.c").is_file() and (root / "board/mps2").is_dir()
    cmake = (root / "CMakeLists.txt").read_text() + (root / RUNTIME_BUILD).read_text()
    assert "-mcpu=cortex-m3" in cmake and "board/linker.ld" in cmake
    assert 'of code)" OFF)' in cmake  # microcontrollers trust the generator's check
    assert info["firmware"] == "firmware.elf" and info["stack_bytes"] == 4096
    assert info["fit"]["ram"]["available"] == 4 << 20


def test_stack_bytes_option_reaches_the_linker_script(
    archives: Dict[str, Path], tmp_path: Path
) -> None:
    generate(
        archives["mlp"], tmp_path / "p", board="qemu-mps2-an385", options={"stack_bytes": "8192"}
    )
    assert "__mlf_stack_size = 8192;" in (tmp_path / "p/board/linker.ld").read_text()


# --- models of an archive ---------------------------------------------------------------------


def test_multi_model_needs_a_choice(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UnsupportedModelError, match=r"2 models: cnn_nchw, mlp.*--model"):
        generate(archives["multi_model"], tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_unknown_model_name_lists_the_models(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UnsupportedModelError, match="no model .nope.*cnn_nchw, mlp"):
        generate(archives["multi_model"], tmp_path / "p", model="nope")


def test_one_model_of_many(archives: Dict[str, Path], tmp_path: Path) -> None:
    info = generate(archives["multi_model"], tmp_path / "p", model="cnn_nchw")
    assert [m["name"] for m in info["models"]] == ["cnn_nchw"]
    assert not (tmp_path / "p/model/mlp").exists()


def test_all_models_keep_their_names_apart(archives: Dict[str, Path], tmp_path: Path) -> None:
    info = generate(archives["multi_model"], tmp_path / "p", model="*")
    assert sorted(m["name"] for m in info["models"]) == ["cnn_nchw", "mlp"]
    cmake = (tmp_path / "p/CMakeLists.txt").read_text()
    assert "TVMSystemLibEntryPoint=mlf_mlp_system_lib" in cmake
    assert "TVMSystemLibEntryPoint=mlf_cnn_nchw_system_lib" in cmake
    main = (tmp_path / "p/src/main.c").read_text()
    assert "mlf_model_mlp_init" in main and "mlf_model_cnn_nchw_init" in main


def test_c_names_are_identifiers_and_distinct() -> None:
    assert c_names(["a-b", "a_b", "9x", ""]) == ["a_b", "a_b_2", "m9x", "model"]


# --- destination ------------------------------------------------------------------------------


def test_non_empty_directory_is_refused(archives: Dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p/notes.txt").write_text("mine")
    with pytest.raises(GenerateError, match="not empty and is not a generated project"):
        generate(archives["mlp"], tmp_path / "p", force=True)
    assert (tmp_path / "p/notes.txt").read_text() == "mine"


def test_existing_project_needs_force(archives: Dict[str, Path], tmp_path: Path) -> None:
    generate(archives["mlp"], tmp_path / "p")
    with pytest.raises(GenerateError, match="already holds a generated project"):
        generate(archives["scalar"], tmp_path / "p")
    generate(archives["scalar"], tmp_path / "p", force=True)
    assert read_project_info(tmp_path / "p")["models"][0]["name"] == "scalar"
    assert not list(tmp_path.glob(".p.*"))  # no staging or old copies left behind


def test_failed_generation_leaves_nothing(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(FitError):
        generate(archives["cnn_int8"], tmp_path / "p", board="qemu-lm3s6965evb",
                 options={"workspace_size_bytes": 1 << 20})  # fmt: skip
    assert not (tmp_path / "p").exists() and not list(tmp_path.iterdir())


def test_extracted_directory_is_accepted(archives: Dict[str, Path], tmp_path: Path) -> None:
    import tarfile

    folder = tmp_path / "extracted"
    with tarfile.open(archives["mlp"]) as tar:
        tar.extractall(folder)  # noqa: S202 - our own archive
    generate(folder, tmp_path / "p")
    with open_archive(tmp_path / "p/model.tar") as archive:
        assert archive.models[0].name == "mlp"


# --- refusals: one per rule --------------------------------------------------------------------


def test_unknown_board(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(BoardError, match="unknown board 'nope'"):
        generate(archives["mlp"], tmp_path / "p", board="nope")


def test_unknown_project_type(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(GenerateError, match="unknown project type 'weird'"):
        generate(archives["mlp"], tmp_path / "p", project_type="weird")


def test_unknown_option(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(GenerateError, match="unknown option 'grpah_format'"):
        generate(archives["mlp"], tmp_path / "p", options={"grpah_format": "json"})


def test_bad_graph_format(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(GenerateError, match="graph_format: 'xml'"):
        generate(archives["mlp"], tmp_path / "p", options={"graph_format": "xml"})


def test_bad_option_values() -> None:
    with pytest.raises(GenerateError, match="option workspace_size_bytes: want an integer"):
        normalize_options({"workspace_size_bytes": "lots"})
    with pytest.raises(GenerateError, match="option warning_as_error: want a boolean"):
        normalize_options({"warning_as_error": "maybe"})
    with pytest.raises(GenerateError, match="compile_definitions"):
        normalize_options({"compile_definitions": "1X=2"})
    with pytest.raises(GenerateError, match="KEY=VALUE"):
        parse_option_assignments(["novalue"])


def test_option_strings_become_types() -> None:
    opts = normalize_options(
        {
            "workspace_size_bytes": "0x100",
            "warning_as_error": "false",
            "compile_definitions": '-DX=1 Y "Z=a b"',
            "board": "ignored: TVM sends every option",
        }
    )
    assert opts["workspace_size_bytes"] == 256 and opts["warning_as_error"] is False
    assert opts["compile_definitions"] == ["X=1", "Y", "Z=a b"]


def test_compile_definitions_reach_cmake(archives: Dict[str, Path], tmp_path: Path) -> None:
    generate(archives["mlp"], tmp_path / "p", options={"compile_definitions": "-DMY_FLAG=3"})
    assert '"MY_FLAG=3"' in (tmp_path / "p" / RUNTIME_BUILD).read_text()


def test_fit_refusal_gives_the_numbers(archives: Dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(FitError) as caught:
        generate(
            archives["mlp"],
            tmp_path / "p",
            board="qemu-lm3s6965evb",
            options={"workspace_size_bytes": 200_000},
        )
    text = str(caught.value)
    assert "does not fit board qemu-lm3s6965evb" in text
    # Each operator's window (here the option's 200,000 B) lies in the arena, with the tensors.
    assert re.search(r"arena 200\d{3}\b", text) and "the board has 65536" in text
    assert re.search(r"RAM: needs \d+ bytes", text)


def test_fit_refusal_for_flash(tmp_path: Path) -> None:
    from project_api.modelgen import params_sized

    archive = params_sized(300 * 1024).write(tmp_path / "big.tar")
    with pytest.raises(FitError, match=r"flash: needs \d+ bytes before code .*262144"):
        generate(archive, tmp_path / "p", board="qemu-lm3s6965evb")


def test_real_corpus_model_refused_on_small_board(mlf_corpus: Path, tmp_path: Path) -> None:
    # The liveness plan's arena: tensors and every operator's workspace window in one.
    with pytest.raises(FitError, match=r"arena 88768, executor state \d+.*has 65536"):
        generate(mlf_corpus / "kws_int8.tar", tmp_path / "p", board="qemu-lm3s6965evb")


def test_kws_fits_96_kib_with_the_liveness_plan(mlf_corpus: Path, tmp_path: Path) -> None:
    """TVM's plan (storage ids side by side plus the largest workspace) needed 111,162 B on
    the nucleo-f401re, 12,858 too many; the liveness plan's arena fits its 96 KiB."""
    info = generate(mlf_corpus / "kws_int8.tar", tmp_path / "p", board="nucleo-f401re")
    fit = info["fit"]["ram"]
    assert fit["needed"] <= fit["available"] == 96 * 1024
    (model,) = info["models"]
    # 88,704 B before the workspace kept a link for each block below the last (issue 41): the
    # depthwise convolutions' two-block windows grew by one 64-byte block.
    assert model["sizes"]["arena_bytes"] == model["memory_plan"]["planned_bytes"] == 88768
    assert model["sizes"]["tvm_plan_bytes"] == 49728 + 56320


def test_fit_refusals_on_the_issue_29_machines(mlf_corpus: Path, tmp_path: Path) -> None:
    """KWS fits the netduinoplus2's 128 KiB of RAM with 33 KiB to spare, not with a 48 KiB
    stack; the an547's code goes to its 512 KiB ITCM."""
    from project_api.modelgen import params_sized

    with pytest.raises(FitError, match=r"stack 49152\) but the board has 131072"):
        generate(
            mlf_corpus / "kws_int8.tar",
            tmp_path / "p",
            board="qemu-netduinoplus2",
            options={"stack_bytes": 49152},
        )
    archive = params_sized(600 * 1024).write(tmp_path / "big.tar")
    with pytest.raises(FitError, match=r"does not fit board qemu-mps3-an547: flash: .*524288"):
        generate(archive, tmp_path / "q", board="qemu-mps3-an547")


def test_cmsis_nn_code_needs_cmsis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CMSIS_PATH", raising=False)
    members = catalog()["mlp"]().members()
    source = next(k for k in members if k.endswith("lib1.c"))
    members[source] = b"#include <arm_nnfunctions.h>\n" + members[source]
    archive = write_tar(tmp_path / "cmsis.tar", members)
    with pytest.raises(DependencyError, match="cmsis_path"):
        generate(archive, tmp_path / "p")
    assert not (tmp_path / "p").exists()


# --- sizes ---------------------------------------------------------------------------------------


def test_scalar_params_are_bound_in_place(archives: Dict[str, Path]) -> None:
    with open_archive(archives["scalar"]) as archive:
        model = archive.models[0]
    blob, offsets = aligned_params({"s": np.array(2.0, dtype=np.float32)})
    assert load_params(blob)["s"].shape == ()  # a 0-d param stays 0-d in the blob
    assert all(offset % 64 == 0 for offset in offsets.values())
    tables = compile_graph(model.graph)
    assert tables.arena_bytes(tables.bound_in_place(model.params)) <= tables.arena_bytes()


def test_state_and_parse_sizes_grow_with_pointers(archives: Dict[str, Path]) -> None:
    with open_archive(archives["mlp"]) as archive:
        graph = archive.models[0].graph
    tables = compile_graph(graph)
    assert state_bytes(tables, 8) > state_bytes(tables, 4) > 0
    assert json_parse_bytes(graph, tables, 8) > json_parse_bytes(graph, tables, 4) > 0


def _null_nodes_graph(storage_ids: List[int]) -> SimpleNamespace:
    """A graph of nothing but inputs, one entry each, of shape (i + 1,)."""
    n = len(storage_ids)
    return SimpleNamespace(
        nodes=[SimpleNamespace(op="null", name=f"x{i}") for i in range(n)],
        arg_nodes=list(range(n)),
        heads=[],
        node_row_ptr=list(range(n + 1)),
        shapes=[[i + 1] for i in range(n)],
        dtypes=["float32"] * n,
        storage_ids=storage_ids,
    )


def test_tables_refuse_more_pools_than_the_runtime_holds() -> None:
    with pytest.raises(GenerateError, match="65536 storage pools; the runtime's limit is 65535"):
        compile_graph(_null_nodes_graph([0, 65535]))
    assert len(compile_graph(_null_nodes_graph([0, 65534])).storage_bytes) == 65535


def test_tables_refuse_more_views_than_the_runtime_holds() -> None:
    with pytest.raises(GenerateError, match="65536 tensor views; the runtime's limit is 65535"):
        compile_graph(_null_nodes_graph([0] * 65536))


def test_workspace_from_code(tmp_path: Path) -> None:
    source = tmp_path / "lib1.c"
    source.write_text(
        "TVM_DLL int32_t f(void* args) {\n"
        "  void* a = TVMBackendAllocWorkspace(1, dev_id, (uint64_t)100, 0, 8);\n"
        "  void* b = TVMBackendAllocWorkspace(1, dev_id, (uint64_t)64, 0, 8);\n"
        "  return 0;\n}\n"
        "TVM_DLL int32_t g(void* args) {\n"
        "  void* c = TVMBackendAllocWorkspace(1, dev_id, (uint64_t)1000, 0, 8);\n"
        "  return 0;\n}\n"
    )
    assert code_workspace([source]) == {"bytes": 1024, "allocations": 2}
    source.write_text("void* a = TVMBackendAllocWorkspace(1, dev_id, n, 0, 8);\n")
    assert code_workspace([source]) is None


def test_workspace_option_overrides(archives: Dict[str, Path]) -> None:
    with open_archive(archives["cnn_int8"]) as archive:
        model = archive.models[0]
        estimate = estimate_workspace(model)
        assert estimate.bytes >= model.workspace_bytes > 0
        assert estimate_workspace(model, 12345).bytes == 12345


def test_linker_overflow_sentence() -> None:
    log = (
        "ld: firmware.elf section `.bss' will not fit in region `RAM'\n"
        "ld: region `RAM' overflowed by 1234 bytes\n"
    )
    assert linker_overflow(log) == "region RAM overflowed by 1234 bytes (sections .bss)"
    assert linker_overflow("all good") is None


# --- standalone samples -------------------------------------------------------------------------


def test_standalone_embeds_samples_beside_the_archive(tmp_path: Path) -> None:
    model = catalog()["mlp"]()
    archive = model.write(tmp_path / "m.tar")
    inputs = {"x": np.stack([model.sample_inputs(s)["x"] for s in range(3)])}
    np.savez(tmp_path / "m.samples.npz", **inputs)
    info = generate(archive, tmp_path / "p", project_type="standalone")
    samples = info["models"][0]["samples"]
    assert samples == {"source": "m.samples.npz", "count": 3, "expected_outputs": False}
    text = (tmp_path / "p/src/model_mlp.c").read_text()
    assert "sample2_inputs" in text and "mlf_standalone_sample samples[]" in text


def test_standalone_random_samples_without_files(archives: Dict[str, Path], tmp_path: Path) -> None:
    info = generate(archives["mlp"], tmp_path / "p", project_type="standalone")
    assert info["models"][0]["samples"]["source"].startswith("random")


def test_sample_inputs_option_must_fit(archives: Dict[str, Path], tmp_path: Path) -> None:
    np.savez(tmp_path / "bad.npz", y=np.zeros((1, 16), np.float32))
    with pytest.raises(InputError, match=r"no sample for input 'x' .*x \[1, 16\] float32"):
        generate(
            archives["mlp"],
            tmp_path / "p",
            project_type="standalone",
            options={"sample_inputs": str(tmp_path / "bad.npz")},
        )


def test_samples_split_on_leading_dimension() -> None:
    model = catalog()["mlp"]()
    batch = np.zeros((4, 1, 16), np.float32)
    out = np.zeros((4, 1, 10), np.float32)
    samples = from_arrays(model, {"x": batch}, {"output0": out}, "t")
    assert samples.count == 4 and samples.expected[0] is not None
    blob = samples.to_blob()
    assert all(o % 64 == 0 for offsets in samples.offsets_in for o in offsets)
    assert len(blob) == 7 * 64 + 40  # 4 inputs, 4 outputs, each starting on 64 bytes
    assert random_samples(model).count == 1


def test_project_json_is_json(archives: Dict[str, Path], tmp_path: Path) -> None:
    generate(archives["mlp"], tmp_path / "p", board=load_board("host").name)
    json.loads((tmp_path / "p/project.json").read_text())


def test_registry_parsing(tmp_path: Path) -> None:
    from project_api.generate.registry import (
        defined_functions,
        function_pointers_c,
        registered_functions,
        render_registry,
        unregistered_functions,
    )

    lib0 = tmp_path / "lib0.c"
    lib0.write_text(
        "static TVMBackendPackedCFunc _tvm_func_array[] = {\n"
        "    (TVMBackendPackedCFunc)f_a,\n};\n"
        'static const TVMFuncRegistry _tvm_func_registry = {"\\001\\000f_a\\000", x};\n'
    )
    lib2 = tmp_path / "lib2.c"
    lib2.write_text(
        "TVM_DLL int32_t f_b(void* args, int32_t* ids, int32_t n, void* r, int32_t* t, void* h) {\n"
        "  return 0;\n}\n"
        "static int32_t f_c(void* args) {\n  return 0;\n}\n"
    )
    sources = [lib0, lib2]
    assert registered_functions(sources) == {"f_a"}
    assert defined_functions(sources) == {"f_b"}
    assert unregistered_functions(["f_a", "f_b", "f_c", "f_d"], sources) == ["f_b"]
    text = render_registry("lib", ["f_a", "f_b", "f_d"], sources)
    assert '"\\002\\000f_a\\000f_b\\000"' in text and "f_d" not in text
    # Const tables take the functions' addresses when every one has external linkage ...
    array = function_pointers_c("ptrs", ["f_b", "f_a"], sources, {"f_a": "m1_f_a"})
    assert array is not None
    assert "int m1_f_a(TVMValue*, int*, int, TVMValue*, int*, void*);" in array
    assert array.index("    f_b,") < array.index("    m1_f_a,")
    # ... and leave the lookup by name (and its error) to the runtime otherwise.
    assert function_pointers_c("ptrs", ["f_a", "f_c"], sources) is None
    assert function_pointers_c("ptrs", ["f_a", "f_d"], sources) is None


@pytest.mark.parametrize("project_type", ["host_driven", "standalone", "mlperftiny"])
def test_aot_model_generates_an_entry_point_adapter(tmp_path: Path, project_type: str) -> None:
    from mlf_builders import aot_files

    archive = write_tar(tmp_path / "aot.tar", aot_files())
    info = generate(archive, tmp_path / "p", project_type=project_type)
    [model] = info["models"]
    assert model["executor"] == "aot" and model["interface"] == "c"
    assert model["graph_format"] == "tables"
    assert model["sizes"]["workspace_bytes"] >= 96 and model["sizes"]["arena_bytes"] >= 24
    text = (tmp_path / "p" / "src" / "model_default.c").read_text()
    assert '#include "tvmgen_default.h"' in text
    assert "return (int)tvmgen_default_run(&inputs, &outputs);" in text
    # The tables take the adapter's address: no registry to look it up in.
    assert "mlf_default_aot_func_ptrs[] = {mlf_default_aot_run};" in text
    assert "mlf_executor_init_linked(" in text and "_registry" not in text
    cmake = (tmp_path / "p" / "CMakeLists.txt").read_text()
    assert "model/default/codegen/host/include" in cmake
    assert "runtime/src/runtime" not in cmake  # TVM's CRT inside the archive is never built
    assert info["dependencies"][0]["short_name"] == "tvm_standalone_crt"
    assert info["dependencies"][0]["compiled"] is False


def test_aot_usmp_pools_count_in_the_fit_check(tmp_path: Path) -> None:
    from mlf_builders import aot_files

    archive = write_tar(tmp_path / "aot.tar", aot_files(usmp=True))
    info = generate(archive, tmp_path / "p", board="qemu-mps2-an385")
    assert info["fit"]["ram"]["items"]["model pools (USMP)"] == 32
    assert info["models"][0]["sizes"]["workspace_bytes"] == 0
    assert ".noinit (NOLOAD)" in (tmp_path / "p" / "board" / "linker.ld").read_text()


def test_missing_archive(tmp_path: Path) -> None:
    from project_api.errors import ArchiveError

    with pytest.raises(ArchiveError, match="no such file"):
        generate(tmp_path / "absent.tar", tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_shapes_are_shared_where_they_repeat() -> None:
    """Each view's shape is found whole in the one shapes table: reused where it already
    appears, overlapping its end where it can, and scalars take nothing."""
    from project_api.generate.tables import GraphTables, View
    from project_api.read.dtypes import parse_dtype

    f32 = parse_dtype("float32")
    shapes = [(1, 64), (1, 64, 3, 3), (64, 3), (3, 3, 7), (), (1, 64)]
    tables = GraphTables(num_nodes=0, views=[View(i, s, f32) for i, s in enumerate(shapes)])
    dims, offsets = tables.shape_layout()
    assert dims == [1, 64, 3, 3, 7]
    for shape, at in zip(shapes, offsets):
        assert tuple(dims[at : at + len(shape)]) == shape


def test_tables_leave_out_the_args_of_bound_params(
    archives: Dict[str, Path], tmp_path: Path
) -> None:
    """Const tables that bind the params (storage_data) list only the inputs as args, and
    the executor's state is sized for that one arg (the corpus runs prove the firmware)."""
    (model,) = generate(archives["mlp"], tmp_path / "p")["models"]
    text = (tmp_path / "p" / "src" / f"model_{model['c_name']}.c").read_text()
    args = re.search(r"mlf_arg \w+_args\[\] = \{(.*?)\};", text, re.S)
    assert args is not None and '"x"' in args.group(1) and '"p0"' not in args.group(1)
    assert "MLF_EXECUTOR_STATE_BYTES(" in text and ", 1u)" in text


def test_compiled_templates_are_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Templates compile once per cache (most of generating a small project); a cache that
    cannot be written only makes generating slower."""
    archive = catalog()["mlp"]().write(tmp_path / "mlp.tar")
    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "cache"))
    generate_project(archive, tmp_path / "p1")
    compiled = sorted((tmp_path / "cache" / "templates").iterdir())
    assert compiled
    generate_project(archive, tmp_path / "p2")
    assert sorted((tmp_path / "cache" / "templates").iterdir()) == compiled
    assert (tmp_path / "p1" / "CMakeLists.txt").read_text() == (
        tmp_path / "p2" / "CMakeLists.txt"
    ).read_text()
    (tmp_path / "blocked").write_text("a file where the cache directory would be")
    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "blocked"))
    generate_project(archive, tmp_path / "p3")
    assert (tmp_path / "p3" / "CMakeLists.txt").is_file()
