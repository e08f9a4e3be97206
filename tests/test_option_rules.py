"""Project options a generator would otherwise take and a compiler, a linker or the firmware
would refuse later in words that do not name the option: one bad value per rule, each refused
when the project is generated, naming the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest
from mlf_builders import aot_files, write_tar

from project_api.errors import GenerateError
from project_api.generate import generate_project
from project_api.modelgen import catalog
from project_api.options import normalize_options, parse_option_assignments


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    folder = tmp_path_factory.mktemp("archives")
    return {
        "cnn_int8": catalog()["cnn_int8"]().write(folder / "cnn_int8.tar"),
        "aot": write_tar(folder / "aot.tar", aot_files()),
    }


def refused(archive: Path, tmp_path: Path, message: str, **kwargs: Any) -> None:
    with pytest.raises(GenerateError, match=message):
        generate_project(archive, tmp_path / "p", **kwargs)
    assert not (tmp_path / "p").exists()  # nothing left behind


@pytest.mark.parametrize(
    "options, message",
    [
        ({"workspace_size_bytes": 1 << 32}, "workspace_size_bytes: .* sizes in 32 bits"),
        ({"stack_bytes": 1 << 40}, "stack_bytes: .* sizes in 32 bits"),
        ({"stack_bytes": 256}, "stack_bytes: 256 is below the 1024 bytes"),
        ({"stack_bytes": 0}, "stack_bytes: 0 is below"),
        ({"compile_definitions": "X=a;b"}, "holds ';'"),
        ({"compile_definitions": "X=$(rm)"}, r"holds '\$'"),
        ({"compile_definitions": "-DFOO=1 -DFOO=2"}, "FOO defined twice"),
    ],
)
def test_option_value_refused_on_its_own(options: Dict[str, Any], message: str) -> None:
    with pytest.raises(GenerateError, match=message):
        normalize_options(options)


def test_a_string_macro_is_still_a_definition() -> None:
    opts = normalize_options({"compile_definitions": ['NAME="kws"', "-DLEVEL=2"]})
    assert opts["compile_definitions"] == ['NAME="kws"', "LEVEL=2"]


@pytest.mark.parametrize("archive", ["cnn_int8", "aot"])
def test_workspace_below_what_the_code_allocates(
    archives: Dict[str, Path], tmp_path: Path, archive: str
) -> None:
    message = "workspace_size_bytes: 64 bytes is less than model .* allocates at once"
    refused(archives[archive], tmp_path, message, options={"workspace_size_bytes": 64})


def test_a_definition_the_generator_makes(archives: Dict[str, Path], tmp_path: Path) -> None:
    options = {"compile_definitions": "MLF_MAX_PAYLOAD=64"}
    refused(
        archives["cnn_int8"], tmp_path, "MLF_MAX_PAYLOAD is set by the generator", options=options
    )


def test_a_project_type_default_may_be_overridden(
    archives: Dict[str, Path], tmp_path: Path
) -> None:
    options = {"compile_definitions": "MLF_ERROR_TEXT=1"}
    generate_project(archives["cnn_int8"], tmp_path / "p", options=options)
    assert '"MLF_ERROR_TEXT=1"' in (tmp_path / "p/runtime/mlf_runtime_build.cmake").read_text()


def test_graph_format_json_for_an_aot_archive(archives: Dict[str, Path], tmp_path: Path) -> None:
    options = {"graph_format": "json"}
    refused(archives["aot"], tmp_path, "no graph.json to parse on the device", options=options)


def test_qemu_icount_on_a_board_that_is_not_qemu(archives: Dict[str, Path], tmp_path: Path) -> None:
    options = {"qemu_icount": "true"}
    refused(archives["cnn_int8"], tmp_path, "qemu_icount applies to QEMU boards", options=options)


def test_output_scale_beyond_float32(archives: Dict[str, Path], tmp_path: Path) -> None:
    for scale in ("1e40", "1e-50"):
        refused(
            archives["cnn_int8"],
            tmp_path,
            "output_scale: .* does not fit a float32",
            project_type="mlperftiny",
            options={"output_scale": scale},
        )


def test_output_scale_for_a_model_without_integer_outputs(tmp_path: Path) -> None:
    archive = catalog()["mlp"]().write(tmp_path / "mlp.tar")  # float32 outputs
    refused(
        archive,
        tmp_path,
        "output_scale dequantizes integer outputs; model 'mlp' has none",
        project_type="mlperftiny",
        options={"output_scale": "0.5"},
    )


@pytest.mark.parametrize(
    "items, message",
    [
        (["graph_format=xml", "graph_format=json"], "graph_format given twice"),
        (["model=mnist"], "use --model mnist"),
    ],
)
def test_command_line_options(items: list, message: str) -> None:
    with pytest.raises(GenerateError, match=message):
        parse_option_assignments(items)


def test_extra_files_tar_from_the_command_line(archives: Dict[str, Path], tmp_path: Path) -> None:
    """TVM's standard option: the tar is unpacked into the generated project, and a missing
    one is said before anything is generated."""
    import tarfile

    from project_api.cli import main

    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "hello.txt").write_text("hi")
    with tarfile.open(tmp_path / "x.tar", "w") as tar:
        tar.add(tmp_path / "extra", arcname="extra")
    argv = ["generate", str(archives["cnn_int8"]), str(tmp_path / "p")]
    assert main(argv + ["-o", f"extra_files_tar={tmp_path / 'x.tar'}"]) == 0
    assert (tmp_path / "p" / "extra" / "hello.txt").read_text() == "hi"
    argv[-1] = str(tmp_path / "q")
    assert main(argv + ["-o", f"extra_files_tar={tmp_path / 'none.tar'}"]) == 2
    assert not (tmp_path / "q").exists()
    # A member escaping the project: refused before anything is generated, in one place
    # (generate/extra_files.py) for every front end.
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        tar.add(tmp_path / "extra" / "hello.txt", arcname="../escaped.txt")
    argv[-1] = str(tmp_path / "r")
    assert main(argv + ["-o", f"extra_files_tar={evil}"]) == 2
    assert not (tmp_path / "r").exists() and not (tmp_path / "escaped.txt").exists()
