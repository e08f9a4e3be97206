"""The advertised option table and how values (strings from tvmc, JSON from others) are coerced."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from project_api.errors import ProjectApiError
from project_api.serve import options as options_module
from project_api.serve.options import (
    ProjectOption,
    coerce_options,
    coerce_value,
    options_by_name,
    parse_compile_definitions,
    project_options,
)

TVM_STANDARD = [
    "verbose",
    "project_type",
    "board",
    "cmsis_path",
    "compile_definitions",
    "extra_files_tar",
    "warning_as_error",
]
OURS = [
    "serial_port",
    "serial_number",
    "workspace_size_bytes",
    "qemu_icount",
    "model",
    "graph_format",
    "memory_plan",
    "cache_dir",
    "offline",
    "dependencies",
    "allow_archive_paths",
    "allowed_hosts",
    "allow_dependency_cmake",
    "build_dir",
    "timeout_sec",
    "sandbox",
    "mlperftiny_model",
    "mlperftiny_name",
    "mlperftiny_profile",
    "mlperftiny_energy",
    "output_scale",
    "output_zero_point",
    "device_protocol",
    "device_memory_bytes",
    "device_graph_executor",
    "cmsis_nn",
]
METHODS = {"generate_project", "build", "flash", "open_transport"}


@pytest.fixture
def table() -> Dict[str, ProjectOption]:
    return options_by_name()


def gen(**raw: Any) -> Dict[str, Any]:
    base: Dict[str, Any] = {"board": "host", "project_type": "host_driven"}
    base.update(raw)
    return coerce_options("generate_project", base)


# --- the table ------------------------------------------------------------------------------


def test_table_lists_tvm_options_then_ours() -> None:
    assert [o.name for o in project_options()] == TVM_STANDARD + OURS


def test_every_option_is_well_formed() -> None:
    for option in project_options():
        as_json = option.to_json()
        assert list(as_json) == [
            "name",
            "choices",
            "default",
            "type",
            "required",
            "optional",
            "help",
        ]
        json.dumps(as_json)
        assert option.type in ("bool", "str", "int"), option.name
        assert option.help and option.help[0].isupper(), option.name
        assert "%" not in option.help, "tvmc puts help into argparse, which formats '%'"
        methods = (option.required or []) + (option.optional or [])
        assert methods and set(methods) <= METHODS, option.name
        if option.choices is not None:
            assert all(isinstance(c, str) for c in option.choices)
            assert option.default is None or option.default in option.choices


def test_standard_option_types_and_requirements(table: Dict[str, ProjectOption]) -> None:
    assert table["verbose"].type == "bool"
    assert table["warning_as_error"].type == "bool"
    assert table["project_type"].required == ["generate_project"]
    assert table["project_type"].choices == ["host_driven", "standalone", "mlperftiny", "library"]
    assert table["board"].required == ["generate_project"]
    for name in ("cmsis_path", "compile_definitions", "extra_files_tar"):
        assert table[name].type == "str"
        assert table[name].optional and "generate_project" in table[name].optional
    assert table["graph_format"].choices == ["tables", "json"]
    assert table["graph_format"].default == "tables"
    assert table["workspace_size_bytes"].type == "int"
    assert table["timeout_sec"].type == "int"


def test_board_choices_come_from_the_board_list(monkeypatch: pytest.MonkeyPatch) -> None:
    class Board:
        def __init__(self, name: str) -> None:
            self.name = name

    class FakeBoards:
        @staticmethod
        def list_boards() -> Any:
            return [Board("qemu-mps2-an385"), "host"]

    real_import = options_module.importlib.import_module

    def fake_import(name: str, *args: Any) -> Any:
        if name == "project_api.board":
            return FakeBoards
        return real_import(name, *args)

    monkeypatch.setattr(options_module.importlib, "import_module", fake_import)
    assert options_by_name()["board"].choices == ["host", "qemu-mps2-an385"]


def test_board_choices_fall_back_when_listing_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    def broken(name: str, *args: Any) -> Any:
        raise RuntimeError("bad toml")

    (tmp_path / "zeta.toml").write_text("")
    (tmp_path / "alpha.toml").write_text("")
    # resources first: monkeypatch resolves string targets with importlib.import_module
    monkeypatch.setattr("project_api.resources.boards_dir", lambda: tmp_path)
    monkeypatch.setattr(options_module.importlib, "import_module", broken)
    assert options_module.board_names() == ["alpha", "zeta"]


def test_board_choices_none_when_nothing_is_known(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    def missing(name: str, *args: Any) -> Any:
        raise ModuleNotFoundError("no", name="project_api.board")

    monkeypatch.setattr("project_api.resources.boards_dir", lambda: tmp_path)
    monkeypatch.setattr(options_module.importlib, "import_module", missing)
    assert options_module.board_names() is None


# --- coercion -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("0", False),
        ("no", False),
        ("off", False),
        ("", False),
        (" false ", False),
        (False, False),
        (0, False),
        ("true", True),
        ("True", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        (True, True),
        (1, True),
    ],
)
def test_bool_coercion(value: Any, expected: bool) -> None:
    assert gen(verbose=value)["verbose"] is expected


@pytest.mark.parametrize("value", ["maybe", "2", 2, 1.5, [True], {"a": 1}])
def test_bad_bool_names_the_option(value: Any) -> None:
    with pytest.raises(ProjectApiError) as info:
        gen(warning_as_error=value)
    assert info.value.code == -32602
    assert "option warning_as_error: want a boolean" in str(info.value)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2048", 2048),
        (" 2048 ", 2048),
        ("0x800", 2048),
        ("010", 10),
        ("64_000", 64000),
        (2048, 2048),
        (2048.0, 2048),
        ("", None),
    ],
)
def test_int_coercion(value: Any, expected: Any) -> None:
    assert gen(workspace_size_bytes=value)["workspace_size_bytes"] == expected


@pytest.mark.parametrize("value", ["2k", "1.5", 1.5, True, "true", [1]])
def test_bad_int_names_the_option(value: Any) -> None:
    with pytest.raises(ProjectApiError) as info:
        gen(workspace_size_bytes=value)
    assert info.value.code == -32602
    assert "option workspace_size_bytes: want an integer" in str(info.value)


def test_str_options_accept_numbers_and_treat_empty_as_unset() -> None:
    assert "serial_number" not in gen(serial_number=12345)  # not a generate_project option
    opts = coerce_options("open_transport", {"serial_number": 12345, "serial_port": ""})
    assert opts["serial_number"] == "12345"
    assert opts["serial_port"] is None


def test_bad_str_names_the_option() -> None:
    with pytest.raises(ProjectApiError, match="option cmsis_path: want a string"):
        gen(cmsis_path=["a"])


def test_choices_are_enforced() -> None:
    with pytest.raises(ProjectApiError) as info:
        gen(project_type="aot_standalone_demo")
    assert info.value.code == -32602
    assert str(info.value) == (
        "option project_type: 'aot_standalone_demo' is not one of: "
        "host_driven, standalone, mlperftiny, library"
    )
    with pytest.raises(ProjectApiError, match="option graph_format"):
        gen(graph_format="xml")
    assert gen(graph_format="json")["graph_format"] == "json"


def test_defaults_fill_in_and_null_means_default() -> None:
    opts = gen(verbose=None, graph_format=None)
    assert opts["verbose"] is False
    assert opts["graph_format"] == "tables"
    assert opts["workspace_size_bytes"] is None


def test_required_options_for_generate_project() -> None:
    with pytest.raises(ProjectApiError) as info:
        coerce_options("generate_project", {"project_type": "host_driven"})
    assert info.value.code == -32602
    assert str(info.value).startswith("generate_project: option board is required")
    with pytest.raises(ProjectApiError, match="option project_type is required"):
        coerce_options("generate_project", {"board": "host", "project_type": ""})
    # Not required elsewhere: the same options sent to build are just ignored.
    assert "board" not in coerce_options("build", {})


def test_unknown_and_inapplicable_options_are_ignored() -> None:
    opts = coerce_options(
        "build", {"frobnicate": "x", "board": "nonsense", "serial_port": 3, "verbose": "true"}
    )
    assert opts == {"verbose": True, "build_dir": None, "sandbox": None}
    # A value that would be invalid is not even looked at where it does not apply.
    assert coerce_options("flash", {"workspace_size_bytes": "lots"})["serial_port"] is None


def test_what_tvmc_sends_every_option_as_a_string() -> None:
    everything = {o.name: "" if o.default is None else str(o.default) for o in project_options()}
    everything.update(board="host", project_type="standalone", verbose="false")
    opts = coerce_options("generate_project", everything)
    assert opts["verbose"] is False
    assert opts["warning_as_error"] is False
    assert opts["offline"] is False
    assert opts["project_type"] == "standalone"
    for method in ("build", "flash", "open_transport"):
        coerce_options(method, everything)


def test_options_must_be_an_object() -> None:
    with pytest.raises(ProjectApiError, match="options must be an object"):
        coerce_options("build", ["verbose"])  # type: ignore[arg-type]


def test_dependencies_json() -> None:
    deps = [{"name": "cmsis", "type": "git", "url": "https://x/y", "ref": "v1"}]
    assert gen(dependencies=json.dumps(deps))["dependencies"] == deps
    assert gen(dependencies={"a": 1})["dependencies"] == {"a": 1}
    assert gen(dependencies="  ")["dependencies"] is None
    with pytest.raises(ProjectApiError, match="option dependencies: not valid JSON"):
        gen(dependencies="{nope")
    with pytest.raises(ProjectApiError, match="want a JSON object or array"):
        gen(dependencies="3")


# --- compile_definitions --------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("-DX=1", ["X=1"]),
        ("X=1 Y", ["X=1", "Y"]),
        ("-DX=1 -DY -D Z=2", ["X=1", "Y", "Z=2"]),
        ('-DMSG="hello world" N=3', ["MSG=hello world", "N=3"]),
        ("'A=x=y' B=", ["A=x=y", "B="]),
        ('STR=\\"q\\"', ['STR="q"']),
        (["-DX=1", "Y=a b", "  Z  "], ["X=1", "Y=a b", "Z"]),
        ("TVM_CRT_LOG_VIRT_LEN=16", ["TVM_CRT_LOG_VIRT_LEN=16"]),
        ("", None),
        ([], None),
    ],
)
def test_compile_definitions(value: Any, expected: Any) -> None:
    assert parse_compile_definitions(value) == expected
    assert gen(compile_definitions=value)["compile_definitions"] == expected


@pytest.mark.parametrize(
    "value, message",
    [
        ("1X=2", "'1X=2' is not NAME or NAME=VALUE"),
        ("-O2", "'-O2' is not a definition"),
        ("X -D", "-D at the end"),
        ('X="unclosed', "cannot split"),
        ([1], "want strings"),
        (5, "want a string or a list"),
        ("A-B=1", "'A-B=1' is not NAME or NAME=VALUE"),
    ],
)
def test_bad_compile_definitions(value: Any, message: str) -> None:
    with pytest.raises(ProjectApiError) as info:
        gen(compile_definitions=value)
    assert info.value.code == -32602
    assert "option compile_definitions" in str(info.value)
    assert message in str(info.value)


def test_coerce_value_direct() -> None:
    table = options_by_name()
    assert coerce_value(table["qemu_icount"], "yes") is True
    assert coerce_value(table["timeout_sec"], "30") == 30
