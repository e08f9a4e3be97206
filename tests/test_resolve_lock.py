"""Lock files when a project is regenerated (``--lock FILE`` exactly; the project's own lock
for what did not change), and the dependency options and flags of generate/run. No builds."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import List

import pytest

from project_api.cli import main
from project_api.cli.generate import add_generate_arguments, dependency_options
from project_api.errors import DependencyError, GenerateError
from project_api.generate import normalize_options
from project_api.modelgen import Network, catalog
from project_api.resolve import (
    DependencySpec,
    install_dependencies,
    parse_dependency,
    read_lock,
    resolve_dependencies,
    reusable_lock,
    specs_from_lock,
)


def library(root: Path, value: int) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "lib.c").write_text(f"int lib_value(void) {{ return {value}; }}\n")
    return root


def path_spec(name: str, url: Path, origin: str = "") -> DependencySpec:
    return parse_dependency(
        {"short_name": name, "url": str(url), "url_type": "path", "version_spec": ""}, origin
    )


def locked_project(tmp_path: Path, specs: List[DependencySpec]) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    resolved = resolve_dependencies(
        specs, archive_root=None, base_dir=tmp_path, cache_dir=tmp_path / "cache"
    )
    install_dependencies(resolved, project)
    return project / "dependencies.lock.json"


def test_a_lock_supplies_what_only_it_lists_and_wins_over_the_archive(tmp_path: Path) -> None:
    a, b, c = (library(tmp_path / n, i) for i, n in enumerate("abc"))
    lock = read_lock(locked_project(tmp_path, [path_spec("a", b), path_spec("extra", c)]))
    # The archive still says a=a: the lock (written with an override a=b) decides.
    specs = specs_from_lock([path_spec("a", a, "model 'm'")], lock)
    assert [(s.short_name, s.url) for s in specs] == [("a", str(b)), ("extra", str(c))]
    assert all(s.origin.startswith("lock file") for s in specs)


def test_a_lock_refuses_what_it_does_not_pin(tmp_path: Path) -> None:
    a, b = library(tmp_path / "a", 1), library(tmp_path / "b", 2)
    lock = read_lock(locked_project(tmp_path, [path_spec("a", a)]))
    with pytest.raises(DependencyError, match="new .* is not in it"):
        specs_from_lock([path_spec("a", a), path_spec("new", b)], lock)
    with pytest.raises(DependencyError, match="differs from the locked") as caught:
        specs_from_lock([path_spec("a", b, "--dependency #1")], lock, user_names=["a"])
    assert str(a) in str(caught.value) and str(b) in str(caught.value)


def test_own_lock_keeps_what_is_declared_as_before(tmp_path: Path) -> None:
    a, b = library(tmp_path / "a", 1), library(tmp_path / "b", 2)
    lock = read_lock(locked_project(tmp_path, [path_spec("a", a), path_spec("b", b)]))
    assert lock.entries["a"].tree_sha256 is not None
    kept, fresh = reusable_lock([path_spec("a", a), path_spec("b", a)], lock)
    assert list(kept.entries) == ["a"] and [s.short_name for s in fresh] == ["b"]
    # A local directory is used as it is now: no digest to insist on.
    assert kept.entries["a"].tree_sha256 is None
    library(a, 42)
    resolved = resolve_dependencies(
        [path_spec("a", a), path_spec("b", a)],
        archive_root=None,
        base_dir=tmp_path,
        lock=kept,
        partial_lock=True,
    )
    placed = install_dependencies(resolved, tmp_path / "again", lock=kept)
    assert [d.short_name for d in placed] == ["a", "b"]
    # Without partial_lock, a dependency missing from the lock is an error, as before.
    with pytest.raises(DependencyError, match="b is not in the lock file"):
        resolve_dependencies(
            [path_spec("a", a), path_spec("b", a)], archive_root=None, base_dir=tmp_path, lock=kept
        )


# --- options and flags -------------------------------------------------------------------

FLAG = "short_name=foo,url=https://example.invalid/foo.git,url_type=git,version_spec=v1"


@pytest.mark.parametrize(
    "value, want",
    [
        (FLAG, [FLAG]),
        ('{"short_name": "foo"}', [{"short_name": "foo"}]),
        ('[{"short_name": "a"}, {"short_name": "b"}]', [{"short_name": "a"}, {"short_name": "b"}]),
        ({"short_name": "foo"}, [{"short_name": "foo"}]),
        ([FLAG, '[{"short_name": "b"}]'], [FLAG, {"short_name": "b"}]),
        ("", None),
    ],
)
def test_dependencies_option_forms(value: object, want: object) -> None:
    assert normalize_options({"dependencies": value})["dependencies"] == want


@pytest.mark.parametrize("value, words", [("[1", "not valid JSON"), ("3", None), ([3], "want")])
def test_bad_dependencies_option(value: object, words: object) -> None:
    if words is None:  # a bare word is the --dependency form; the resolver judges it
        assert normalize_options({"dependencies": value})["dependencies"] == [value]
        return
    with pytest.raises(GenerateError, match=str(words)):
        normalize_options({"dependencies": value})


def test_lock_and_refresh_options() -> None:
    opts = normalize_options({"lock_file": "x.json", "refresh_dependencies": "yes"})
    assert opts["lock_file"] == "x.json" and opts["refresh_dependencies"] is True
    assert normalize_options({})["refresh_dependencies"] is False


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_generate_arguments(parser, board_default="host")
    return parser.parse_args(list(argv))


def test_dependency_flags_become_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = parse(
        "--dependency", FLAG, "--dependency", "{}", "--cmsis-path", "nn", "--cache-dir", "~/c",
        "--offline", "--lock", "l.json", "--refresh-dependencies",
    )  # fmt: skip
    options = dependency_options(args, {"graph_format": "json"})
    assert options == {
        "graph_format": "json",
        "dependencies": [FLAG, "{}"],
        "cmsis_path": str(tmp_path / "nn"),
        "cache_dir": str(Path("~/c").expanduser()),
        "lock_file": str(tmp_path / "l.json"),
        "offline": "true",
        "refresh_dependencies": "true",
    }
    assert dependency_options(parse(), {}) == {}


@pytest.mark.parametrize(
    "argv, options",
    [
        (["--dependency", FLAG], {"dependencies": "[]"}),
        (["--cmsis-path", "x"], {"cmsis_path": "y"}),
        (["--lock", "x"], {"lock_file": "y"}),
    ],
)
def test_a_flag_and_the_same_option_are_refused(argv: List[str], options: dict) -> None:
    with pytest.raises(GenerateError, match="given twice|not both"):
        dependency_options(parse(*argv), options)


def test_dependency_flags_on_a_generated_project_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    archive = catalog()["mlp"]().write(tmp_path / "mlp.tar")
    assert main(["generate", str(archive), str(tmp_path / "p")]) == 0
    capsys.readouterr()
    status = main(["run", str(tmp_path / "p"), "--dependency", FLAG])
    err = capsys.readouterr().err
    assert status == 2 and "option dependencies changes generation" in err


def test_bad_dependency_flag_names_itself(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    archive = catalog()["mlp"]().write(tmp_path / "mlp.tar")
    status = main(
        ["generate", str(archive), str(tmp_path / "p"), "--dependency", "short_name=x,nope=1"]
    )
    err = capsys.readouterr().err
    assert status == 2 and "--dependency #1: unknown key 'nope'" in err
    assert not (tmp_path / "p").exists()


def test_a_damaged_own_lock_is_replaced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    library(tmp_path / "mylib", 1)
    net = Network("callsit")
    x = net.input("x", (4,), "int32")
    net.output(net.extern_call(x, "lib_scale", reference=lambda a: a))
    archive = net.build().write(
        tmp_path / "m.tar",
        external_dependencies=[{"short_name": "mylib", "url": "mylib", "url_type": "path"}],
    )
    project = tmp_path / "p"
    # The archive names a directory beside it: the user's consent (docs/security.md).
    allow = "--allow-archive-paths"
    assert main(["generate", str(archive), str(project), allow]) == 0
    (project / "dependencies.lock.json").write_text("{broken")
    capsys.readouterr()
    assert main(["generate", str(archive), str(project), "--force", allow]) == 0
    assert "ignoring the project's damaged lock file" in capsys.readouterr().err
    assert read_lock(project / "dependencies.lock.json").entries["mylib"].placed == "deps/mylib"
