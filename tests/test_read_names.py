"""Model names: what they may hold (they become file names, C identifiers and text in the
generated CMakeLists.txt), one refused name per kind of character, and the generated
CMakeLists.txt quoting the archive's paths whatever they hold."""

from __future__ import annotations

import pytest
from mlf_builders import mlf_files, write_dir, write_tar

from project_api.cli import main
from project_api.errors import MetadataError
from project_api.generate import generate_project
from project_api.generate.render import _comment
from project_api.read import open_archive

INJECTED = "x\nexecute_process(COMMAND touch PWNED_MLF)\n#"


@pytest.mark.parametrize(
    "name",
    [
        "my-model",
        "v1.2",
        "1model",
        "MyModel",
        "int",
        "-rf",
        "modèle_ü",
        "e\u0301t\u00e9",
        "m" * 200,
    ],
)
def test_names_that_work_are_accepted(tmp_path, name):
    with open_archive(write_dir(tmp_path / "a", mlf_files(7, [name]))) as archive:
        assert archive.model().name == name


@pytest.mark.parametrize(
    "name, shown",
    [
        (INJECTED, r"the control character '\n' (U+000A)"),
        ("a\tb", r"the control character '\t' (U+0009)"),
        ("my model", "the whitespace ' ' (U+0020)"),
        ("a\u00a0b", r"the whitespace '\xa0' (U+00A0)"),
        ("a\u200bb", r"the invisible or unassigned character '\u200b' (U+200B)"),
        ('a"b', "the character '\"' (U+0022)"),
        ("a$b", "the character '$' (U+0024)"),
        ("a{b}", "the character '{' (U+007B)"),
        ("a;b", "the character ';' (U+003B)"),
        ("a#b", "the character '#' (U+0023)"),
        ("a*b", "the character '*' (U+002A)"),
        ("a\\b", "the character '\\\\' (U+005C)"),
    ],
)
def test_name_with_a_refused_character(tmp_path, name, shown):
    with pytest.raises(MetadataError) as info:
        open_archive(write_dir(tmp_path / "a", mlf_files(7, [name])))
    assert info.value.location == "modules"  # never the raw name in the location
    assert f"contains {shown}; it may hold only ASCII letters, digits" in info.value.problem
    assert "\n" not in str(info.value)


def test_name_with_a_refused_character_flat_metadata(tmp_path):
    with pytest.raises(MetadataError) as info:
        open_archive(write_dir(tmp_path / "a", mlf_files(6, INJECTED)))
    assert info.value.location == "model_name"
    assert "contains the control character '\\n'" in info.value.problem


@pytest.mark.parametrize("name, size", [("m" * 201, 201), ("é" * 101, 202)])
def test_name_too_long(tmp_path, name, size):
    with pytest.raises(MetadataError, match=f"is {size} bytes long; it may be at most 200"):
        open_archive(write_dir(tmp_path / "a", mlf_files(7, [name])))


def test_info_and_generate_refuse_a_cmake_injection(tmp_path, capsys):
    archive = write_tar(tmp_path / "evil.tar", mlf_files(7, [INJECTED]))
    assert main(["info", str(archive)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "contains the control character" in err
    project = tmp_path / "p"
    assert main(["generate", str(archive), str(project)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(
        "mlf-project generate: error: metadata.json: modules: model name"
    )
    assert not project.exists() and not list(tmp_path.rglob("PWNED_MLF"))


def test_cmake_quotes_the_archives_paths(tmp_path):
    files = mlf_files(7)
    files["codegen/host/src/default lib0;#$x.c"] = files.pop("codegen/host/src/default_lib0.c")
    generate_project(write_dir(tmp_path / "a", files), tmp_path / "p")
    cmake = (tmp_path / "p/CMakeLists.txt").read_text()
    assert '\n  "model/default/codegen/host/src/default lib0;#\\$x.c"\n' in cmake
    assert '\n  "model/default/codegen/host/src/default_lib1.c"\n' in cmake


def test_comments_cannot_be_left():
    assert _comment("a\nb\r*/c") == "a?b??c"
    assert _comment("modèle_ü") == "modèle_ü"
