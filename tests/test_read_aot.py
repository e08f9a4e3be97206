"""Reading AOT archives: the entry point, the order and shapes of inputs and outputs, USMP
pools; and one bad archive per rule, each refused with one line naming the member."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from mlf_builders import Files, aot_files, aot_header, with_json, write_dir

from project_api.cli import main
from project_api.errors import AotError
from project_api.read import TensorSpec, open_archive
from project_api.read.ctext import sanitize
from project_api.read.relay import main_signature

HEADER = "codegen/host/include/tvmgen_default.h"


def read(tmp_path: Path, files: Files):
    with open_archive(write_dir(tmp_path / "a", files)) as archive:
        return archive.model()


def test_c_interface(tmp_path: Path) -> None:
    model = read(tmp_path, aot_files())
    assert model.executor == "aot" and model.aot.interface == "c"
    assert model.aot.run_function == "tvmgen_default_run"
    assert model.aot.header_member == HEADER
    assert model.aot.input_fields == ("x",) and model.aot.output_fields == ("output",)
    assert model.aot.workspace_bytes == 96 and not model.aot.usmp
    assert model.inputs == [TensorSpec("x", (1, 4), "float32")]  # shapes from the Relay text
    assert model.outputs == [TensorSpec("output", (8,), "int8")]


def test_outputs_in_the_headers_order(tmp_path: Path) -> None:
    outputs = [("output0", 1), ("output1", 2), ("output10", 3), ("output2", 4)]
    model = read(tmp_path, aot_files(outputs=outputs))
    assert [spec.name for spec in model.outputs] == ["output0", "output1", "output10", "output2"]
    assert [spec.shape for spec in model.outputs] == [(1,), (2,), (3,), (4,)]


def test_packed_interface(tmp_path: Path) -> None:
    model = read(tmp_path, aot_files(interface="packed"))
    assert model.aot.interface == "packed" and model.aot.header_member is None
    assert model.aot.main_function == "tvmgen_default___tvm_main__"
    assert model.inputs == [TensorSpec("x", (1, 4), "float32")]


def test_usmp_pools(tmp_path: Path) -> None:
    model = read(tmp_path, aot_files(usmp=True))
    assert model.aot.usmp
    [pool] = model.aot.static_pools
    assert (pool.name, pool.size, pool.section) == ("global_workspace", 32, ".bss.noinit.tvm")
    assert model.summary()["aot"]["static_pools"][0]["bytes"] == 32


def test_flat_without_relay(tmp_path: Path) -> None:
    files = aot_files()
    del files["src/default.relay"]
    model = read(tmp_path, files)
    assert model.inputs == [TensorSpec("x", (4,), "float32")]


def test_names_as_tvm_sanitizes_them(tmp_path: Path) -> None:
    def rename(meta):
        main_fn = meta["modules"]["default"]["memory"]["functions"]["main"][0]
        main_fn["inputs"] = {"serving:0": main_fn["inputs"].pop("x")}

    files = with_json(aot_files(), "metadata.json", rename)
    files[HEADER] = files[HEADER].replace(b"void* x;", b"void* serving_0;")
    files[HEADER] = files[HEADER].replace(b"_X_SIZE", b"_SERVING_0_SIZE")
    model = read(tmp_path, files)
    assert model.inputs[0].name == "serving:0" and model.aot.input_fields == ("serving_0",)
    assert sanitize("a.b:0") == "a_b_0"


@pytest.mark.parametrize("written", ["(96)", "0x60", "96u", "((0x60UL))", "0140", "96 // bytes"])
def test_workspace_define_forms(tmp_path: Path, written: str) -> None:
    files = aot_files()
    files[HEADER] = files[HEADER].replace(
        b"WORKSPACE_SIZE 96", f"WORKSPACE_SIZE {written}".encode()
    )
    assert read(tmp_path, files).aot.workspace_bytes == 96


def test_main_signature_with_comments_and_tuples() -> None:
    text = (
        "def @main(%a: Tensor[(1, 2), int8] /* span=a:0:0 */, %w: Tensor[(3), float32], "
        'output_tensor_names=["A", "B"]) -> (Tensor[(2), int8], Tensor[(1, 1), float32]) {\n}\n'
    )
    params, results = main_signature(text)
    assert params == {"a": ((1, 2), "int8"), "w": ((3,), "float32")}
    assert results == [((2,), "int8"), ((1, 1), "float32")]


# --- one bad archive per rule ----------------------------------------------------------------


def _drop_header(files: Files) -> None:
    del files[HEADER]


def _header_member_renamed(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(b"void* output;", b"void* Identity;")


def _header_size_differs(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(b"_OUTPUT_SIZE 8", b"_OUTPUT_SIZE 9")


def _header_without_workspace(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(b"#define TVMGEN_DEFAULT_WORKSPACE_SIZE 96", b"")


def _workspace_too_big(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(
        b"WORKSPACE_SIZE 96", b"WORKSPACE_SIZE 99999999999999999999"
    )


def _workspace_unreadable(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(b"WORKSPACE_SIZE 96", b"WORKSPACE_SIZE (96 + x)")


def _workspace_pools_option(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(
        b"struct tvmgen_default_outputs* outputs\n",
        b"struct tvmgen_default_outputs* outputs,\n  struct tvmgen_default_workspace_pools* p\n",
    )


def _unknown_parameter(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(
        b"struct tvmgen_default_outputs* outputs\n",
        b"struct tvmgen_default_outputs* outputs,\n  int flags\n",
    )


def _member_not_a_pointer(files: Files) -> None:
    files[HEADER] = files[HEADER].replace(b"void* x;", b"void* x;\n  int count;")


def _run_never_defined(files: Files) -> None:
    files["codegen/host/src/default_lib0.c"] = b"/* empty */\n"


def _no_entry_point(files: Files) -> None:
    del files[HEADER]
    files["codegen/host/src/default_lib0.c"] = b"/* empty */\n"


def _relay_disagrees(files: Files) -> None:
    files["src/default.relay"] = b"def @main(%x: Tensor[(1, 5), float32]) {\n}\n"


def _metadata_lists_another_input(files: Files) -> None:
    header = aot_header("default", [("output", 8)], 96).replace("void* x;", "void* y;")
    files[HEADER] = header.replace("_X_SIZE", "_Y_SIZE").encode()


BAD = {
    "missing header": (_drop_header, HEADER, "missing: the model's C defines tvmgen_default_run"),
    "member renamed": (_header_member_renamed, HEADER, "has Identity but metadata.json lists"),
    "size differs": (_header_size_differs, "TVMGEN_DEFAULT_OUTPUT_SIZE", "is 9 bytes"),
    "no workspace define": (_header_without_workspace, "WORKSPACE_SIZE", "missing"),
    "workspace too big": (_workspace_too_big, "WORKSPACE_SIZE", "sizes in 32 bits"),
    "workspace unreadable": (
        _workspace_unreadable,
        "WORKSPACE_SIZE",
        "cannot read the value of TVMGEN_DEFAULT_WORKSPACE_SIZE: (96 + x)",
    ),
    "pools struct missing": (_workspace_pools_option, "workspace_pools", "missing"),
    "unknown parameter": (_unknown_parameter, "tvmgen_default_run", "unknown parameter"),
    "not a pointer": (_member_not_a_pointer, "struct tvmgen_default_inputs", "void* tensor"),
    "run undefined": (_run_never_defined, "codegen/host/src", "defined in none of the sources"),
    "no entry point": (_no_entry_point, "codegen/host/src", "no AOT entry point"),
    "relay disagrees": (_relay_disagrees, "src/default.relay", "is float32[1, 5]"),
    "other input": (_metadata_lists_another_input, HEADER, "has y but metadata.json lists"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_aot_archive(case: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    breaks, where, says = BAD[case]
    files = aot_files()
    breaks(files)
    with pytest.raises(AotError) as caught:
        read(tmp_path, files)
    assert where in str(caught.value) and says in str(caught.value)
    status = main(["info", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and says in err


def test_every_rule_has_a_fixture() -> None:
    fixtures: list[Callable[[Files], None]] = [entry[0] for entry in BAD.values()]
    assert len(set(fixtures)) == len(BAD)


def test_names_are_sanitized_bytewise_as_tvm_does() -> None:
    """TVM's SanitizeName turns every byte that is not an ASCII letter or digit into '_'."""
    from project_api.read.ctext import sanitize

    assert sanitize("my-model") == "my_model"
    assert sanitize("modèle") == "mod__le"  # è is two bytes of UTF-8
    assert sanitize("x_1") == "x_1"
