"""external_dependencies entries: parsing, merging, overrides, CLI strings, CMSIS-NN detection."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from project_api.errors import DependencyError, MlfProjectError
from project_api.resolve import (
    CMSIS_NN_DEPENDENCY_FLAG,
    Recipe,
    collect_dependencies,
    detect_cmsis_nn,
    find_cmsis_nn_uses,
    parse_dependency,
    parse_dependency_string,
    require_cmsis_nn,
)

CMSIS = {
    "short_name": "cmsis-nn",
    "url": "https://github.com/ARM-software/CMSIS-NN.git",
    "url_type": "git",
    "version_spec": "v4.1.0",
}
CRT = {
    "short_name": "tvm_standalone_crt",
    "url": "./runtime",
    "url_type": "mlf_path",
    "version_spec": "0.14.0",
}


def test_parse_pre_rfc_entry() -> None:
    spec = parse_dependency(CMSIS, "m")
    assert (spec.short_name, spec.url_type, spec.version_spec) == ("cmsis-nn", "git", "v4.1.0")
    assert spec.is_cmsis_nn and spec.effective_recipe().kind == "cmsis-nn"
    assert parse_dependency(CRT).effective_recipe().kind == "none"
    assert parse_dependency({**CMSIS, "short_name": "foo"}).effective_recipe().kind == "generic"


def test_error_is_an_mlf_project_error() -> None:
    assert issubclass(DependencyError, MlfProjectError)


# One bad-input test per validation rule: (entry, words the message must contain).
BAD_ENTRIES = [
    ("not a dict", "must be a JSON object"),
    ({**CMSIS, "sha265": "00"}, "unknown key(s) sha265"),
    ({k: v for k, v in CMSIS.items() if k != "short_name"}, "'short_name' is missing"),
    ({**CMSIS, "short_name": "../x"}, "'short_name' '../x'"),
    ({**CMSIS, "short_name": 7}, "'short_name' must be a string"),
    ({**CMSIS, "url_type": "svn"}, "'url_type' 'svn' is not one of"),
    ({k: v for k, v in CMSIS.items() if k != "url"}, "'url' is missing"),
    ({**CMSIS, "url": "  "}, "'url' is empty"),
    ({**CMSIS, "url": "https://x/\ny"}, "control characters"),
    ({**CMSIS, "version_spec": ""}, "'version_spec' is required for a git dependency"),
    ({**CMSIS, "url_type": "url", "sha256": "abc"}, "is not 64 hexadecimal digits"),
    ({**CMSIS, "sha256": "a" * 64}, "applies to url_type 'url' only"),
    (
        {
            **CMSIS,
            "url_type": "url",
            "url": "https://x/a.tgz#sha256=" + "b" * 64,
            "sha256": "a" * 64,
        },
        "disagrees with the url's #sha256",
    ),
    ({**CMSIS, "recipe": "magic"}, "unknown recipe kind 'magic'"),
    ({**CMSIS, "recipe": {"sauce": 1}}, "unknown recipe key(s) sauce"),
    ({**CMSIS, "recipe": {"sources": ["../*.c"]}}, "must be a path inside the dependency"),
    ({**CMSIS, "recipe": {"sources": "/abs/*.c"}}, "must be a path inside the dependency"),
    ({**CMSIS, "recipe": {"defines": ["A B"]}}, "is not NAME or NAME=VALUE"),
    ({**CMSIS, "recipe": {"targets": ["a;b"]}}, "is not a CMake target name"),
    ({**CMSIS, "recipe": 3}, "'recipe' must be a name or an object"),
    # hostile git urls and refs
    ({**CMSIS, "url": "--upload-pack=touch /tmp/pwned"}, "starts with '-'"),
    ({**CMSIS, "url": "-uhttps://x"}, "starts with '-'"),
    ({**CMSIS, "url": "ext::sh -c touch% /tmp/pwned"}, "'<transport>::' syntax"),
    ({**CMSIS, "url": "fd::17"}, "'<transport>::' syntax"),
    ({**CMSIS, "url": "ftp://host/repo.git"}, "scheme 'ftp' is not allowed"),
    ({**CMSIS, "version_spec": "--upload-pack=touch /tmp/pwned"}, "starts with '-'"),
    ({**CMSIS, "version_spec": "-b"}, "starts with '-'"),
    ({**CMSIS, "version_spec": "a..b"}, "is not a valid git tag, branch or commit"),
    ({**CMSIS, "version_spec": "v1:refs/heads/x"}, "is not a valid git tag, branch or commit"),
    ({**CRT, "url_type": "url", "url": "-o/etc/passwd"}, "starts with '-'"),
]


@pytest.mark.parametrize("raw, words", BAD_ENTRIES)
def test_bad_entry_is_refused_precisely(raw: object, words: str) -> None:
    with pytest.raises(DependencyError) as info:
        parse_dependency(raw, "model 'kws' external_dependencies[0]")
    assert words in str(info.value)
    assert "model 'kws' external_dependencies[0]" in str(info.value)


def test_sha256_from_url_suffix_or_field() -> None:
    digest = "Ab" * 32
    from_suffix = parse_dependency(
        {"short_name": "z", "url": f"https://h/z.tgz#sha256={digest}", "url_type": "url"}
    )
    from_field = parse_dependency(
        {"short_name": "z", "url": "https://h/z.tgz", "url_type": "url", "sha256": digest}
    )
    assert from_suffix == from_field
    assert from_field.sha256 == digest.lower() and from_field.url == "https://h/z.tgz"


def test_merge_exact_duplicates_across_models() -> None:
    specs = collect_dependencies([[CMSIS, CRT], None, [dict(CMSIS)]], model_names=["a", "b", "c"])
    assert [s.short_name for s in specs] == ["cmsis-nn", "tvm_standalone_crt"]


def test_conflict_names_both_entries() -> None:
    other = {**CMSIS, "version_spec": "v5.0.0"}
    with pytest.raises(DependencyError) as info:
        collect_dependencies([[CMSIS], [other]], model_names=["mlp", "mnist"])
    message = str(info.value)
    assert "model 'mlp' external_dependencies[0]" in message
    assert "model 'mnist' external_dependencies[0]" in message
    assert "version_spec" in message and "v4.1.0" in message and "v5.0.0" in message


def test_external_dependencies_must_be_a_list() -> None:
    with pytest.raises(DependencyError, match="must be a list"):
        collect_dependencies([{"short_name": "x"}])  # type: ignore[list-item]


def test_overrides_replace_by_short_name_and_add() -> None:
    local = {"short_name": "cmsis-nn", "url": "/opt/CMSIS-NN", "url_type": "path"}
    specs = collect_dependencies(
        [[CMSIS, CRT]],
        overrides=[local, "short_name=extra,url=https://h/e.tgz,url_type=url"],
    )
    assert [(s.short_name, s.url_type) for s in specs] == [
        ("cmsis-nn", "path"),
        ("tvm_standalone_crt", "mlf_path"),
        ("extra", "url"),
    ]


def test_two_different_overrides_conflict() -> None:
    with pytest.raises(DependencyError, match="declared twice"):
        collect_dependencies(
            [], overrides=["short_name=a,url=/x,url_type=path", "short_name=a,url=/y,url_type=path"]
        )


def test_cmsis_path_becomes_a_path_dependency_and_wins_over_the_archive() -> None:
    specs = collect_dependencies([[CMSIS]], cmsis_path="/opt/CMSIS_5")
    assert len(specs) == 1
    assert (specs[0].short_name, specs[0].url_type, specs[0].url) == (
        "cmsis-nn",
        "path",
        "/opt/CMSIS_5",
    )
    assert specs[0].origin == "option cmsis_path"


def test_cmsis_path_and_a_different_cmsis_override_conflict() -> None:
    with pytest.raises(DependencyError, match="CMSIS-NN is given twice"):
        collect_dependencies([], overrides=[CMSIS], cmsis_path="/opt/CMSIS-NN")


def test_cli_string_form() -> None:
    spec = parse_dependency_string(
        "short_name=foo, url=https://h/a,b.tgz, url_type=url, sha256="
        + "0" * 64
        + ",sources=src/*.c;lib/*.c,include_dirs=include,defines=FOO=1"
    )
    assert spec.url == "https://h/a,b.tgz"  # a comma not followed by key= stays in the value
    assert spec.recipe == Recipe(
        kind="generic",
        sources=("src/*.c", "lib/*.c"),
        include_dirs=("include",),
        defines=("FOO=1",),
    )
    flag = parse_dependency_string(CMSIS_NN_DEPENDENCY_FLAG.split(" ", 1)[1])
    assert flag == parse_dependency(CMSIS)
    assert (
        parse_dependency_string('{"short_name": "j", "url": "/j", "url_type": "path"}').url == "/j"
    )
    assert parse_dependency_string("short_name=n,url=/n,url_type=path,recipe=none").recipe.kind == (
        "none"
    )


@pytest.mark.parametrize(
    "text, words",
    [
        ("short_name=x,url", "'short_name' 'x,url' must be"),
        ("short_name=x,colour=red,url=/x,url_type=path", "unknown key 'colour'"),
        ("url=/x,url_type=path", "'short_name' is missing"),
        ("short_name=x,url=/x,url_type=path,short_name=y", "given twice"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_cli_string(text: str, words: str) -> None:
    with pytest.raises(DependencyError, match=words):
        parse_dependency_string(text)


def test_unknown_cli_key() -> None:
    with pytest.raises(DependencyError, match="unknown key 'colour'"):
        parse_dependency_string("colour=red,short_name=x,url=/x,url_type=path")


# --- CMSIS-NN detection ------------------------------------------------------------------


def _c(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_detect_cmsis_nn_by_include_or_call(tmp_path: Path) -> None:
    plain = _c(tmp_path, "plain.c", "#include <math.h>\nint f(void) { return arm_mat_mult_f32(); }")
    include = _c(tmp_path, "inc.c", '#include "arm_nnfunctions.h"\n')
    call = _c(tmp_path, "call.c", "void g(void) { arm_convolve_wrapper_s8 (0, 0); }\n")
    assert not detect_cmsis_nn([plain])
    assert detect_cmsis_nn([plain, include])
    assert detect_cmsis_nn([call])
    assert str(find_cmsis_nn_uses([call])[0]) == "call.c:1: arm_convolve_wrapper_s8 ("


def test_require_cmsis_nn_says_exactly_how_to_fix(tmp_path: Path) -> None:
    source = _c(tmp_path, "m_lib1.c", "#include <arm_nnfunctions.h>\narm_softmax_s8(x);\n")
    with pytest.raises(DependencyError) as info:
        require_cmsis_nn([source], collect_dependencies([[CRT]]))
    message = str(info.value)
    assert "--option cmsis_path=/path/to/CMSIS-NN" in message
    assert CMSIS_NN_DEPENDENCY_FLAG in message
    assert "m_lib1.c:1" in message
    assert require_cmsis_nn([source], collect_dependencies([[CMSIS]]))
    assert require_cmsis_nn([source], [], cmsis_path="/opt/CMSIS-NN")
    assert not require_cmsis_nn([_c(tmp_path, "p.c", "int x;")], [])


def _corpus_sources(archive: Path, dest: Path) -> list:
    out = []
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".c"):
                stream = tar.extractfile(member)
                assert stream is not None
                path = dest / Path(member.name).name
                path.write_bytes(stream.read())
                out.append(path)
    return out


def test_real_cmsis_nn_archive_is_detected(mlf_corpus: Path, tmp_path: Path) -> None:
    cmsis = sorted(mlf_corpus.glob("*_cmsisnn*.tar"))
    plain = mlf_corpus / "mlp_default.tar"
    if not cmsis or not plain.exists():
        pytest.skip("corpus has no *_cmsisnn*.tar or mlp_default.tar")
    for archive in cmsis:
        folder = tmp_path / archive.stem
        folder.mkdir()
        assert detect_cmsis_nn(_corpus_sources(archive, folder)), archive.name
    folder = tmp_path / "plain"
    folder.mkdir()
    assert not detect_cmsis_nn(_corpus_sources(plain, folder))
