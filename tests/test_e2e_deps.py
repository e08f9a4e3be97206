"""External dependencies end to end through ``mlf-project``: a factory model whose operator
calls ``mylib_scale`` from a C library that only a dependency provides, generated, built and
run on the host with the library resolved from git (a repository made here: tags v1.0.0 and
v2.0.0 scale by 2 and 3, branches by 5 and more), a url (an HTTP server on 127.0.0.1) and a
path; overrides by flag, lock files, offline mode, hostile input. Then the real CMSIS-NN:
``kws_int8_cmsisnn`` must match TVM's reference on the host and on Cortex-M3/M4F/M7F under
QEMU when ``MLF_PROJECT_CMSIS_NN`` names a CMSIS-NN git repository or checkout.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
from conftest import CMSIS_NN_TAG, cmsis_nn, corpus_case, git, requires_arm

from project_api.cli import main
from project_api.modelgen import GeneratedModel, Network
from project_api.run.base import live_children

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake"),
]

HEADER = "#include <stdint.h>\nint32_t mylib_scale(const int32_t* in, int32_t* out, int32_t n);\n"


def library_source(factor: int) -> str:
    return (
        '#include "mylib.h"\n'
        "int32_t mylib_scale(const int32_t* in, int32_t* out, int32_t n) {\n"
        f"  for (int32_t i = 0; i < n; ++i) out[i] = in[i] * {factor};\n"
        "  return 0;\n}\n"
    )


def write_library(root: Path, factor: int) -> Path:
    (root / "include").mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(exist_ok=True)
    (root / "include" / "mylib.h").write_text(HEADER)
    (root / "src" / "mylib.c").write_text(library_source(factor))
    return root


def commit_factor(repo: Path, factor: int) -> str:
    write_library(repo, factor)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"scale by {factor}")
    return git(repo, "rev-parse", "HEAD")


# The archive names its library by a file: url (a repository made here), which only the user's
# consent lets it use (docs/security.md); tests/test_dependency_trust.py checks the refusal.
ALLOW = "--allow-archive-paths"


def git_flag(repo: Path, version: str) -> str:
    return f"short_name=mylib,url={repo.as_uri()},url_type=git,version_spec={version}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, object]:
    """The library's repository, the model's archive (its metadata names v1.0.0), inputs."""
    root = tmp_path_factory.mktemp("deps")
    repo = root / "mylib.git"
    repo.mkdir()
    git(repo, "init", "-q")
    commits = {"v1.0.0": commit_factor(repo, 2)}
    git(repo, "tag", "-a", "v1.0.0", "-m", "scale by 2")
    commits["v2.0.0"] = commit_factor(repo, 3)
    git(repo, "tag", "v2.0.0")
    git(repo, "checkout", "-q", "-b", "feature")
    commits["feature"] = commit_factor(repo, 5)
    git(repo, "checkout", "-q", "main")

    net = Network("scaler")
    x = net.input("x", (2, 8), "int32")
    scaled = net.extern_call(
        x,
        "mylib_scale",
        reference=lambda a: a * 2,  # v1.0.0; other versions are checked with expected()
        dependency={
            "short_name": "mylib",
            "url": repo.as_uri(),
            "url_type": "git",
            "version_spec": "v1.0.0",
        },
    )
    net.output(net.add(scaled, np.full((2, 8), 1, dtype=np.int32)))
    model = net.build()
    archive = model.write(root / "scaler.tar")
    inputs = model.sample_inputs()
    np.savez(root / "in.npz", **inputs)  # type: ignore[arg-type]
    return {
        "root": root,
        "repo": repo,
        "commits": commits,
        "model": model,
        "archive": archive,
        "inputs": inputs,
        "cache": root / "cache",
    }


def expected(world: Dict[str, object], factor: int) -> np.ndarray:
    inputs = world["inputs"]
    assert isinstance(inputs, dict)
    return (inputs["x"] * factor + 1).astype(np.int32)


def cli(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_scaler(
    capsys: pytest.CaptureFixture, world: Dict[str, object], project: Path, *flags: object
) -> np.ndarray:
    """``mlf-project run`` of the archive into ``project``; the output tensor."""
    out = project.parent / f"{project.name}.out.npz"
    status, _, err = cli(
        capsys,
        "run",
        world["archive"],
        "--project-dir",
        project,
        "--cache-dir",
        world["cache"],
        "--input",
        Path(str(world["root"])) / "in.npz",
        "--output",
        out,
        ALLOW,
        *flags,
    )
    assert status == 0, err
    assert live_children() == []
    return np.load(out)["output0"]


def locked(project: Path) -> Dict[str, Dict[str, object]]:
    data = json.loads((project / "dependencies.lock.json").read_text())
    return {entry["short_name"]: entry for entry in data["dependencies"]}


def tree(root: Path) -> List[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# --- git ---------------------------------------------------------------------------------


def test_git_tag_from_the_archive_metadata(
    world: Dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    project = tmp_path / "v1"
    assert np.array_equal(run_scaler(capsys, world, project), expected(world, 2))
    entry = locked(project)["mylib"]
    assert entry["resolved"] == {"commit": world["commits"]["v1.0.0"]}  # type: ignore[index]
    assert entry["version_spec"] == "v1.0.0" and entry["placed"] == "deps/mylib"
    info = json.loads((project / "project.json").read_text())
    assert info["dependencies"][0]["resolved"] == world["commits"]["v1.0.0"]  # type: ignore[index]


def test_dependency_flag_overrides_the_version(
    world: Dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    repo = world["repo"]
    assert isinstance(repo, Path)
    project = tmp_path / "v2"
    output = run_scaler(capsys, world, project, "--dependency", git_flag(repo, "v2.0.0"))
    assert np.array_equal(output, expected(world, 3))
    assert locked(project)["mylib"]["resolved"] == {"commit": world["commits"]["v2.0.0"]}  # type: ignore[index]
    # The JSON form, at a branch (generation only: the lock names what would be built).
    as_json = json.dumps(
        {"short_name": "mylib", "url": repo.as_uri(), "url_type": "git", "version_spec": "feature"}
    )
    branch = tmp_path / "feature"
    status, _, err = cli(
        capsys, "generate", world["archive"], branch,
        "--cache-dir", world["cache"], "--dependency", as_json,
    )  # fmt: skip
    assert status == 0, err
    assert locked(branch)["mylib"]["resolved"] == {"commit": world["commits"]["feature"]}  # type: ignore[index]
    assert "* 5;" in (branch / "deps" / "mylib" / "src" / "mylib.c").read_text()


def test_regenerating_from_a_lock_reproduces_it_exactly(
    world: Dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    repo = world["repo"]
    assert isinstance(repo, Path)
    first = tmp_path / "first"
    status, _, err = cli(
        capsys, "generate", world["archive"], first, "--cache-dir", world["cache"],
        "--dependency", git_flag(repo, "v2.0.0"),
    )  # fmt: skip
    assert status == 0, err
    lock = first / "dependencies.lock.json"
    # Elsewhere, without the override: the lock alone brings v2.0.0 back, byte for byte.
    again = tmp_path / "again"
    status, _, err = cli(
        capsys, "generate", world["archive"], again, "--cache-dir", world["cache"],
        "--lock", lock,
    )  # fmt: skip
    assert status == 0, err
    for name in ("dependencies.lock.json", "deps.cmake"):
        assert (again / name).read_bytes() == (first / name).read_bytes(), name
    assert tree(again / "deps") == tree(first / "deps")
    assert locked(again)["mylib"]["resolved"] == {"commit": world["commits"]["v2.0.0"]}  # type: ignore[index]
    output = run_scaler(capsys, world, again, "--lock", lock)
    assert np.array_equal(output, expected(world, 3))
    # In place (--force): the project's own lock is reused, same bytes again.
    status, _, err = cli(
        capsys, "generate", world["archive"], first, "--force", "--cache-dir", world["cache"],
        "--dependency", git_flag(repo, "v2.0.0"),
    )  # fmt: skip
    assert status == 0, err
    assert "reusing the pins of" in err
    assert (first / "dependencies.lock.json").read_bytes() == lock.read_bytes()
    # A lock and a --dependency that contradicts it: refused, naming both.
    status, _, err = cli(
        capsys, "generate", world["archive"], tmp_path / "conflict", "--cache-dir",
        world["cache"], "--lock", lock, "--dependency", git_flag(repo, "v1.0.0"),
    )  # fmt: skip
    assert status == 2
    assert "differs from the locked" in err and "v1.0.0" in err and "v2.0.0" in err
    assert not (tmp_path / "conflict").exists()


def test_own_lock_pins_a_moving_branch_until_refreshed(
    world: Dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    repo = tmp_path / "moving.git"
    shutil.copytree(str(world["repo"]), repo)
    git(repo, "checkout", "-q", "-b", "moving")
    first_commit = commit_factor(repo, 7)
    project = tmp_path / "p"
    flags = ["--cache-dir", tmp_path / "cache", "--dependency", git_flag(repo, "moving")]
    status, _, err = cli(capsys, "generate", world["archive"], project, *flags)
    assert status == 0, err
    assert locked(project)["mylib"]["resolved"] == {"commit": first_commit}
    second_commit = commit_factor(repo, 11)
    status, _, err = cli(capsys, "generate", world["archive"], project, "--force", *flags)
    assert status == 0, err
    assert locked(project)["mylib"]["resolved"] == {"commit": first_commit}
    status, _, err = cli(
        capsys, "generate", world["archive"], project, "--force", "--refresh-dependencies", *flags
    )
    assert status == 0, err
    assert locked(project)["mylib"]["resolved"] == {"commit": second_commit}
    assert "* 11;" in (project / "deps" / "mylib" / "src" / "mylib.c").read_text()


def test_offline_uses_a_warm_cache_and_names_what_a_cold_one_lacks(
    world: Dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    status, _, err = cli(
        capsys,
        "generate",
        world["archive"],
        tmp_path / "warm",
        "--cache-dir",
        world["cache"],
        ALLOW,
    )
    assert status == 0, err  # fills the shared cache if no other test did
    warm = tmp_path / "offline"
    output = run_scaler(capsys, world, warm, "--offline")
    assert np.array_equal(output, expected(world, 2))
    cold = tmp_path / "cold-cache"
    status, _, err = cli(
        capsys, "generate", world["archive"], tmp_path / "nothing", "--cache-dir", cold,
        "--offline", ALLOW,
    )  # fmt: skip
    assert status == 2
    assert "offline: 1 dependency is not in the cache" in err
    assert f"mylib (git {Path(str(world['repo'])).as_uri()} at v1.0.0" in err
    assert not (tmp_path / "nothing").exists()
    assert not cold.exists() or tree(cold) == []


def test_project_api_options_override_and_cache(
    world: Dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TVM's client sends every option as a string: dependencies (JSON), cache_dir, offline."""
    from project_api.resources import template_dir
    from project_api.serve.handler import ProjectApiHandler

    monkeypatch.delenv("CMSIS_PATH", raising=False)
    repo = world["repo"]
    assert isinstance(repo, Path)
    entry = {"short_name": "mylib", "url": repo.as_uri(), "url_type": "git"}
    handler = ProjectApiHandler(template_dir())
    options = {
        "board": "host",
        "project_type": "host_driven",
        "dependencies": json.dumps([dict(entry, version_spec="v2.0.0")]),
        "cache_dir": str(world["cache"]),
        "offline": "false",
        "cmsis_path": "",
    }
    handler.generate_project(str(world["archive"]), "", str(tmp_path / "p"), options)
    assert locked(tmp_path / "p")["mylib"]["resolved"] == {"commit": world["commits"]["v2.0.0"]}  # type: ignore[index]
    info = json.loads((tmp_path / "p" / "project.json").read_text())
    assert info["options"]["cache_dir"] == str(world["cache"])


# --- url and path ------------------------------------------------------------------------


def tar_gz(path: Path, members: Dict[str, bytes]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_url_dependency_with_right_and_wrong_sha256(
    world: Dict[str, object],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    http_root: Tuple[Path, str],
) -> None:
    www, base = http_root
    digest = tar_gz(
        www / "mylib-1.4.tar.gz",
        {
            "mylib-1.4/include/mylib.h": HEADER.encode(),
            "mylib-1.4/src/mylib.c": library_source(4).encode(),
        },
    )
    url = f"{base}/mylib-1.4.tar.gz"
    flag = f"short_name=mylib,url={url},url_type=url,version_spec=1.4"
    project = tmp_path / "url"
    output = run_scaler(capsys, world, project, "--dependency", f"{flag},sha256={digest}")
    assert np.array_equal(output, expected(world, 4))
    assert locked(project)["mylib"]["resolved"] == {"sha256": digest}

    cache = tmp_path / "fresh-cache"
    wrong = "0" * 64
    status, _, err = cli(
        capsys, "generate", world["archive"], tmp_path / "refused", "--cache-dir", cache,
        "--dependency", f"{flag},sha256={wrong}",
    )  # fmt: skip
    assert status == 2
    assert f"has sha256 {digest}, expected {wrong}" in err
    assert not (tmp_path / "refused").exists()
    assert not (cache / "entries").exists() or tree(cache / "entries") == []

    # A download that tries to write outside: refused, nothing lands anywhere.
    tar_gz(www / "evil.tar.gz", {"../../escaped.c": b"int x;\n", "ok/src/a.c": b"int y;\n"})
    before = tree(tmp_path)
    status, _, err = cli(
        capsys, "generate", world["archive"], tmp_path / "evil", "--cache-dir", cache,
        "--dependency", f"short_name=mylib,url={base}/evil.tar.gz,url_type=url",
    )  # fmt: skip
    assert status == 2 and "unsafe" in err
    after = [p for p in tree(tmp_path) if not p.startswith("fresh-cache")]
    assert after == [p for p in before if not p.startswith("fresh-cache")]
    assert not list(tmp_path.rglob("escaped.c"))


def test_path_dependency_relative_to_the_archive(
    world: Dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    write_library(tmp_path / "vendor" / "mylib", 6)
    model = world["model"]
    assert isinstance(model, GeneratedModel)
    archive = model.write(
        tmp_path / "scaler_path.tar",
        external_dependencies=[
            {"short_name": "mylib", "url": "vendor/mylib", "url_type": "path", "version_spec": ""}
        ],
    )
    out = tmp_path / "out.npz"
    status, _, err = cli(
        capsys, "run", archive, "--project-dir", tmp_path / "p", "--input",
        Path(str(world["root"])) / "in.npz", "--output", out, ALLOW,
    )  # fmt: skip
    assert status == 0, err
    assert np.array_equal(np.load(out)["output0"], expected(world, 6))
    entry = locked(tmp_path / "p")["mylib"]
    assert entry["resolved"] is None and entry["url"] == "vendor/mylib"


# --- hostile input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "short_name=mylib,url=--upload-pack=touch PWNED,url_type=git,version_spec=v1.0.0",
        "short_name=mylib,url=ext::sh -c touch% PWNED,url_type=git,version_spec=v1.0.0",
        "short_name=mylib,url=REPO,url_type=git,version_spec=--output=PWNED",
        "short_name=mylib,url=REPO,url_type=git,version_spec=-b",
        "short_name=mylib,url=-oPWNED,url_type=url",
        "short_name=../../PWNED,url=REPO,url_type=git,version_spec=v1.0.0",
    ],
)
def test_hostile_dependency_flags_write_nothing_outside_the_cache(
    world: Dict[str, object],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    spec: str,
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    spec = spec.replace("REPO", Path(str(world["repo"])).as_uri())
    before = tree(tmp_path)
    status, _, err = cli(
        capsys, "generate", world["archive"], tmp_path / "p", "--cache-dir",
        tmp_path / "cache", "--dependency", spec,
    )  # fmt: skip
    assert status == 2, err
    assert "mlf-project generate: error:" in err
    assert tree(tmp_path) == before
    assert not list(tmp_path.rglob("PWNED*"))


# --- the real CMSIS-NN -------------------------------------------------------------------


def cmsis_nn_flags() -> List[str]:
    """How to hand $MLF_PROJECT_CMSIS_NN to mlf-project: a git repository as a dependency at
    tag v4.1.0, a checked-out tree through --cmsis-path."""
    source = cmsis_nn()
    if source.git_url is None:
        return ["--cmsis-path", str(source.tree)]
    return [
        "--dependency",
        f"short_name=cmsis-nn,url={source.git_url},url_type=git,version_spec={CMSIS_NN_TAG}",
    ]


@pytest.fixture(scope="module")
def cmsis_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cmsis-cache")


# Every tag on the host and the M55 (MVE): test_cmsis_nn_releases.py; here v4.1.0 on the
# Cortex-M3 (portable C), the M4F and the M7F (DSP).
CMSIS_BOARDS = [
    pytest.param(board, id=board, marks=[pytest.mark.qemu, requires_arm])
    for board in ("qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps2-an500")
]
# What CMSIS-NN is compiled for on each board: its own DSP (no -mcpu in the archive's target, so
# TVM passed empty contexts: the adapter supplies the memory).
CMSIS_LEVEL = {"qemu-mps2-an386": "dsp", "qemu-mps2-an500": "dsp"}


@pytest.mark.parametrize("board", CMSIS_BOARDS)
def test_kws_cmsisnn_matches_its_reference(
    board: str,
    mlf_corpus: Path,
    cmsis_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    flags = cmsis_nn_flags()
    case = corpus_case(mlf_corpus / "kws_int8_cmsisnn.tar")
    project = tmp_path / "p"
    out = tmp_path / "out.npz"
    status, stdout, err = cli(
        capsys, "run", case["archive"], "--board", board, "--project-dir", project,
        "--cache-dir", cmsis_cache, "--input", case["inputs_npz"], "--output", out, "--json",
        *flags,
    )  # fmt: skip
    assert status == 0, err
    want = np.load(str(case["outputs_npz"]))["output0"]
    got = np.load(out)["output0"]
    assert np.array_equal(got, want), f"{board}: {got} != {want}"
    info = json.loads((project / "project.json").read_text())
    (cmsis,) = [d for d in info["dependencies"] if d["short_name"] == "cmsis-nn"]
    # TVM generated the calls for 'c -keys=cpu -model=host' (empty contexts); boards with DSP
    # still get those kernels, their scratch memory from the adapter.
    level = CMSIS_LEVEL.get(board, "portable")
    assert cmsis["cpu_features"] == level
    assert cmsis["release"] == CMSIS_NN_TAG and cmsis["release_covered"]
    raised = level != "portable"
    deps = (project / "deps.cmake").read_text()
    assert "-U__ARM_FEATURE" not in deps
    assert "mlf_cmsis_nn_memory.c" in deps
    assert "arm_depthwise_conv_wrapper_s8=mlf_cmsis_nn_depthwise_conv_wrapper_s8" in deps
    assert (cmsis["cpu_features_note"] is not None) == raised
    assert "through the adapter" in err and f"CMSIS-NN {CMSIS_NN_TAG}" in err
    # The adapter's scratch lies in the operators' workspace windows, in the arena: no RAM of
    # its own beside the kernel sums it keeps (MVE only).
    items = info["fit"]["ram"]["items"]
    assert "cmsis-nn scratch" not in items
    (model,) = info["models"]
    assert model["sizes"]["workspace_window_bytes"] >= cmsis["adapter"]["scratch_bytes"] > 0
    assert model["sizes"]["workspace_cmsis_nn_bytes"] >= cmsis["adapter"]["scratch_bytes"]
    assert live_children() == []
