"""TVM 0.14's CMSIS-NN calls on every covered CMSIS-NN release: bit-exact, never refused or wrong.

The tree side: each tag of the shared repository is named from its headers, checkouts between
releases by where they lie and what their API means (the commits that changed it), trees outside
the verified range are refused before building in one line. The archive side: TVM's calls are
found in its C. End to end, one firmware per tag and machine holds TVM's KWS graph archive, its
AOT + USMP archive and a model calling every kernel TVM offloads (tests/cmsis_nn_archive.py):
on the host (portable C) and the Cortex-M55 (MVE) every output equals TVM's reference (KWS) or
CMSIS-NN v4.1.0's (the call-coverage model), for every tag the code covers (``RELEASES`` marked
``in_ci``): a covered tag that is refused fails the test as much as one that differs. The M4's
DSP code on every tag is bench part cmsis_nn's (with instruction counts).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy as np
import pytest
from cmsis_nn_archive import NAME, combined_files, differences, inputs
from conftest import (
    CMSIS_NN_SKIP,
    REPO_ROOT,
    cmsis_nn,
    corpus_archive,
    corpus_case,
    requires_arm,
)
from mlf_builders import write_dir

from project_api.cmsis_nn.adapter import plan_adapter, scratch_bound
from project_api.cmsis_nn.calls import API_CMSIS5, API_V4, find_cmsis_nn_calls
from project_api.cmsis_nn.release import RELEASES, read_tree
from project_api.cmsis_nn.sources import called_functions, float_sources, needed_sources
from project_api.driver import Project
from project_api.errors import DependencyError
from project_api.run.base import live_children

# The tags the code claims to cover (the shared repository has each): each must run exactly.
TAGS = tuple(release.name for release in RELEASES if release.in_ci)
CRT = REPO_ROOT / "crt"
ADAPTER_C = CRT / "cmsis_nn"


def repository() -> Path:
    """The CMSIS-NN git repository tests take tags from (skips without one)."""
    source = cmsis_nn()
    if source.git_url is None or not source.git_url.startswith("file:"):
        pytest.skip(f"needs CMSIS-NN as a local git repository: {CMSIS_NN_SKIP}")
    return Path(source.git_url[len("file://") :])


def checkout(repo: Path, rev: str, into: Path, *paths: str) -> Path:
    """``paths`` (default: all) of revision ``rev``, without git metadata."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, *paths], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "x", "-C", str(into)], input=archive, check=True)
    return into


# --- the tree --------------------------------------------------------------------------------

# What each release's API means for TVM's calls: kernel sums, bias struct, native DW-as-conv.
FACTS = {
    "v4.1.0": (0, False, False),
    "23.08": (0, False, False),
    "v5.0.0": (1, False, False),
    "24.02": (1, False, False),
    "v6.0.0": (1, True, False),
    "v7.0.0": (2, True, True),
}


@pytest.mark.parametrize("tag", TAGS)
def test_each_tag_is_named_from_its_headers(tag: str, tmp_path: Path) -> None:
    tree = read_tree(checkout(repository(), tag, tmp_path / tag, "Include"))
    assert (tree.release, tree.covered) == (tag, True)
    api = tree.api
    assert (api.fc_sums, api.bias_data, api.dw_native_mve) == FACTS[tag]
    assert api.unknown == ()


# The commits that changed what TVM's calls mean: the checkout before is the old API, the
# commit the new one, named "between" the releases around them.
API_COMMITS = [
    ("58f1770", "23.08", "v5.0.0", "fc_sums", 0, 1),  # MVE: Move kernel sums from core loop
    ("15dbe7c", "24.02", "v6.0.0", "bias_data", False, True),  # int32 bias for int16 conv
    ("21a5bba", "v6.0.0", "v7.0.0", "fc_sums", 1, 2),  # Align kernel_sum/effective_bias
    ("e8db23a", "v6.0.0", "v7.0.0", "dw_native_mve", False, True),  # DW 1 input ch as conv
]


@pytest.mark.parametrize("commit, low, high, fact, before, after", API_COMMITS)
def test_checkouts_between_releases(
    commit: str, low: str, high: str, fact: str, before: object, after: object, tmp_path: Path
) -> None:
    repo = repository()
    for rev, want in ((f"{commit}^", before), (commit, after)):
        tree = read_tree(checkout(repo, rev, tmp_path / rev.replace("^", "-"), "Include"))
        # (a checkout whose headers are still the release's own is named as it)
        named = (
            (f"between {low} and {high}", low)
            if rev.endswith("^")
            else (f"between {low} and {high}",)
        )
        assert tree.covered and tree.release in named, tree.describe()
        assert getattr(tree.api, fact) == want, (rev, tree.api)


def _edited(tree: Path, header: str, old: str, new: str) -> None:
    path = tree / "Include" / header
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_trees_outside_the_verified_range(tmp_path: Path) -> None:
    v7 = checkout(repository(), "v7.0.0", tmp_path / "v7", "Include")
    cases = {
        "newer": ("arm_nnfunctions.h", "V.18.0.0", "V.99.0.0", "after v7.0.0"),
        "older": ("arm_nnsupportfunctions.h", "V.22.7.0", "V.1.0.0", "an unknown mix"),
        "unrevised": ("arm_nn_types.h", "$Revision:", "$Revised:", "an unknown CMSIS-NN"),
        "prototype": (
            "arm_nnfunctions.h",
            "arm_fully_connected_s8(const cmsis_nn_context *ctx,",
            "arm_fully_connected_s8(const cmsis_nn_context *ctx, int extra,",
            "v7.0.0",
        ),
    }
    for name, (header, old, new, release) in cases.items():
        tree = shutil.copytree(v7, tmp_path / name)
        _edited(tree, header, old, new)
        read = read_tree(tree)
        assert not read.covered and read.release.startswith(release), (name, read.describe())
    prototype = read_tree(tmp_path / "prototype")
    assert "unknown prototypes of arm_" in str(prototype.why_not)
    cmsis5 = tmp_path / "CMSIS_5" / "CMSIS" / "NN"
    shutil.copytree(v7 / "Include", cmsis5 / "Include")
    assert read_tree(tmp_path / "CMSIS_5").release.startswith("CMSIS 5's NN")
    assert [r.name for r in RELEASES][: len(TAGS)] == list(TAGS)


@pytest.mark.parametrize("tag, sums", [("v4.1.0", 1), ("v7.0.0", 2)])
def test_adapter_memory_under_sanitizers(tag: str, sums: int, tmp_path: Path) -> None:
    """The adapter's own C (scratch from the runtime's workspace, kept kernel sums, stops) on
    the host with ASan/UBSan."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    include = checkout(repository(), tag, tmp_path / tag, "Include") / "Include"
    program = tmp_path / "memory"
    subprocess.run(
        ["gcc", "-g", "-O1", "-std=gnu11", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror", "-include", "stdint.h",
         f"-I{ADAPTER_C}", f"-I{include}", f"-DMLF_CMSIS_NN_FC_SUMS={sums}",
         "-DMLF_CMSIS_NN_SUM_SLOTS=2",
         "-DMLF_CMSIS_NN_SUM_WORDS=16", f"-I{CRT / 'include'}", f"-I{CRT / 'src'}",
         str(REPO_ROOT / "tests/cmsis_nn_c/test_adapter_memory.c"),
         str(ADAPTER_C / "mlf_cmsis_nn_memory.c"), str(CRT / "src" / "mlf_workspace.c"),
         str(CRT / "src" / "mlf_error.c"), "-o", str(program)],
        check=True,
    )  # fmt: skip
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


# --- the archive -----------------------------------------------------------------------------


def _sources(archive: Path, into: Path) -> List[Path]:
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "xf", str(archive), "-C", str(into)], check=True)
    return sorted(into.glob("codegen/host/src/*.c"))


@pytest.mark.parametrize("stem", ["kws_int8_cmsisnn", "kws_int8_aot_cmsisnn_usmp"])
def test_tvm_calls_are_found_in_the_archive(stem: str, tmp_path: Path) -> None:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"no corpus archive {stem}")
    calls = find_cmsis_nn_calls(_sources(archive, tmp_path))
    assert calls.api == API_V4 and len(calls.sites) == 12
    assert calls.kernels == ["depthwise_conv_wrapper_s8", "convolve_wrapper_s8", "avgpool_s8",
                             "fully_connected_s8", "softmax_s8"]  # fmt: skip
    first = calls.sites[0]
    assert first.dim("input") == (1, 49, 10, 1) and first.dim("filter") == (1, 10, 4, 64)
    assert first.ch_mult == 64
    assert (first.tile("stride"), first.tile("padding"), first.input_offset) == (
        (2, 2),
        (1, 4),
        -83,
    )


def test_other_calls_are_not_tvms(tmp_path: Path) -> None:
    old = tmp_path / "old_lib2.c"
    old.write_text(
        "int32_t f(void* in) {\n  cmsis_nn_context context= {NULL,0};\n"
        "  arm_status status = arm_convolve_wrapper_s8(&context, 0, 0, 0, in, 0, 0, 0, 0, 0, 0);\n"
        "  return 0;\n}\n"
    )
    assert find_cmsis_nn_calls([old]).api == API_CMSIS5
    hand = tmp_path / "hand_lib1.c"
    hand.write_text("int32_t g(int8_t* a, int8_t* b) {\n  return arm_softmax_s8(a, b);\n}\n")
    assert find_cmsis_nn_calls([hand]).api is None


def test_scratch_plan_follows_the_cpu_level(tmp_path: Path) -> None:
    archive = corpus_archive("kws_int8_cmsisnn")
    if archive is None:
        pytest.skip("no corpus archive kws_int8_cmsisnn")
    calls = find_cmsis_nn_calls(_sources(archive, tmp_path / "a"))
    v7 = read_tree(checkout(repository(), "v7.0.0", tmp_path / "v7", "Include"))
    # MVE: the 3x3 depthwise code's 4 x 124 channels x 9 taps; the first layer as a
    # convolution: 4 x 48 im2col bytes + the 10x4x64 filter transposed.
    mve = plan_adapter([calls], v7, 2)
    assert mve is not None and (mve.scratch_bytes, mve.sum_slots, mve.sum_words) == (4464, 1, 12)
    assert scratch_bound(calls.sites[0], 2, v7.api, True) == 192 + 2560
    dsp = plan_adapter([calls], v7, 1)
    assert dsp is not None and (dsp.scratch_bytes, dsp.sum_slots) == (160 + 2560, 0)
    microtvm = plan_adapter([calls], v7, 2, keep_sums=False)
    assert microtvm is not None and microtvm.sum_slots == 0
    assert "MLF_CMSIS_NN_FC_SUMS=2" in mve.defines and mve.renames[0].startswith("arm_conv")


def _kws_plan(stem: str, board: str, **options: object):  # -> ModelPlan
    from project_api.board import load_board
    from project_api.generate.plan import plan_models
    from project_api.read import open_archive

    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"no corpus archive {stem}")
    with open_archive(archive) as opened:
        (plan,) = plan_models(opened, None, load_board(board), options=options)
    return plan


def test_windows_hold_the_adapters_scratch() -> None:
    """The adapter's scratch is planned into each CMSIS-NN operator's workspace window, on
    every path that serves TVMBackendAllocWorkspace: the liveness plan's windows, the
    separate workspace of memory_plan=tvm (and of a JSON graph), the AOT model's one window
    (with USMP TVM's code allocates nothing: the window is the adapter's), microTVM's
    workspace (kernel sums recomputed into it on MVE)."""
    from project_api.errors import GenerateError
    from project_api.generate.memory_plan import overlaps

    # Cortex-M55 (MVE): the first layer as a convolution 2,752 B; each 3x3 depthwise layer
    # 4 x 124 x 9 = 4,464 B (4,480 in 64-byte blocks); the 1x1 convolutions 256 B.
    plan = _kws_plan("kws_int8_cmsisnn", "qemu-mps3-an547")
    assert plan.memory is not None and overlaps(plan.memory) == []
    sizes = [size for _, size in plan.memory.windows]
    assert sizes == [2752, 4480, 256, 4480, 256, 4480, 256, 4480, 256, 0, 0, 0]
    assert plan.workspace.bytes == plan.workspace.adapter_bytes == 4480
    # The liveness bound is met: a depthwise layer's input and output with its scratch.
    assert plan.arena_bytes == 20992 and plan.memory.lower_bound == 490 + 2 * 8000 + 4480
    # Cortex-M4 (DSP): the depthwise layers take no scratch there, the pooling 256 B.
    dsp = _kws_plan("kws_int8_cmsisnn", "qemu-mps2-an386")
    assert dsp.memory is not None
    assert [size for _, size in dsp.memory.windows][:10] == [2752, 0, 256, 0, 256, 0, 256, 0,
                                                              256, 256]  # fmt: skip
    tvm = _kws_plan("kws_int8_cmsisnn", "qemu-mps3-an547", memory_plan="tvm")
    assert tvm.memory is None and tvm.separate_workspace_bytes == 4480
    json_graph = _kws_plan("kws_int8_cmsisnn", "qemu-mps2-an386", graph_format="json")
    assert json_graph.separate_workspace_bytes == 2752
    aot = _kws_plan("aot/kws_int8_aot_cmsisnn_usmp", "qemu-mps3-an547")
    assert aot.memory is not None and aot.memory.windows == [(0, 4480)]
    utvm = _kws_plan("kws_int8_cmsisnn", "qemu-mps3-an547", device_protocol="microtvm")
    assert dict(utvm.workspace.adapter)["tvmgen_kws_cmsis_nn_main_10"] == 64  # 12 sums
    with pytest.raises(GenerateError, match="4,480 bytes, from its code and the CMSIS-NN"):
        _kws_plan("kws_int8_cmsisnn", "qemu-mps3-an547", workspace_size_bytes=4096)


def test_only_the_called_sources_are_compiled(tmp_path: Path) -> None:
    tree = checkout(repository(), "v7.0.0", tmp_path / "v7")
    sources = sorted(p.relative_to(tree).as_posix() for p in tree.glob("Source/*/*.c"))
    roots = called_functions(["x = arm_fully_connected_s8(a); arm_softmax_s8(b);"])
    chosen = needed_sources(tree, sources, ["Include"], roots)
    assert chosen is not None and len(chosen) < 10 < len(sources)
    assert "Source/FullyConnectedFunctions/arm_fully_connected_s8.c" in chosen
    assert "Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_s8.c" in chosen  # what it calls
    assert needed_sources(tree, sources, ["Include"], {"arm_no_such_kernel_s8"}) is None
    files = ["a/arm_x_s8.c", "a/arm_x_f32.c", "a/arm_x_f16.c"]
    assert float_sources(files, fp16=False) == (files[:2], ("ARM_NN_ENABLE_F32=1",))
    assert float_sources(files, fp16=True)[1] == ("ARM_NN_ENABLE_F32=1", "ARM_NN_ENABLE_F16=1")


def test_an_uncovered_tree_is_refused_before_building(tmp_path: Path) -> None:
    archive = corpus_archive("kws_int8_cmsisnn")
    if archive is None:
        pytest.skip("no corpus archive kws_int8_cmsisnn")
    tree = checkout(repository(), "v7.0.0", tmp_path / "nn")
    _edited(tree, "arm_nnfunctions.h", "V.18.0.0", "V.30.0.0")
    with pytest.raises(DependencyError) as caught:
        options = {"cmsis_path": str(tree), "cache_dir": str(tmp_path / "c")}
        Project.generate(archive, tmp_path / "p", board="qemu-mps3-an547", options=options)
    message = str(caught.value)
    assert "\n" not in message and "after v7.0.0" in message, repr(message)
    assert "for v4.1.0's API" in message and "arm_depthwise_conv_wrapper_s8" in message
    assert all(tag in message for tag in TAGS)
    assert not (tmp_path / "p").exists()


def test_cmsis_nn_built_without_the_adapter_is_refused(tmp_path: Path) -> None:
    archive = corpus_archive("kws_int8_cmsisnn")
    if archive is None:
        pytest.skip("no corpus archive kws_int8_cmsisnn")
    tree = checkout(repository(), "v4.1.0", tmp_path / "nn")
    dependency = {"short_name": "cmsis-nn", "url": str(tree), "url_type": "path",
                  "recipe": "generic"}  # fmt: skip
    options = {"dependencies": [dependency], "cache_dir": str(tmp_path / "c")}
    with pytest.raises(DependencyError, match="needs the adapter of the cmsis-nn recipe"):
        Project.generate(archive, tmp_path / "p", board="host", options=options)
    assert not (tmp_path / "p").exists()


def test_a_stop_of_the_adapter_is_said(tmp_path: Path) -> None:
    """A workspace window smaller than a call's scratch stops the firmware with the bytes, in
    the run's error, before anything is written outside the window (here the plan's windows
    are cut to 100 bytes by hand); QEMU's exit is explained the same way."""
    from project_api.errors import MlfProjectError
    from project_api.run.qemu import EXIT_ABORT, describe_exit

    archive = corpus_archive("kws_int8_cmsisnn")
    if archive is None:
        pytest.skip("no corpus archive kws_int8_cmsisnn")
    dependency = {"short_name": "cmsis-nn", "url": repository().resolve().as_uri(),
                  "url_type": "git", "version_spec": "v4.1.0"}  # fmt: skip
    options = {"dependencies": [dependency], "cache_dir": str(tmp_path / "c")}
    project = Project.generate(archive, tmp_path / "p", board="host", options=options)
    # The first layer (run as a convolution: 160 B of im2col + its 2,560 B filter transposed)
    # gets its window from the plan, 2,752 B; every window is cut to 100 B.
    model_c = project.dir / "src" / "model_kws.c"
    head, windows = model_c.read_text().split("mlf_graph_kws_windows[] = {", 1)
    table, tail = windows.split("};", 1)
    assert "{8000u, 2752u}" in table, table
    cut = re.sub(r"\{(\d+)u, (\d+)u\}", lambda m: f"{{{m[1]}u, {min(int(m[2]), 100)}u}}", table)
    model_c.write_text(head + "mlf_graph_kws_windows[] = {" + cut + "};" + tail)
    project.build()
    feed = dict(np.load(str(corpus_case(archive)["inputs_npz"])))
    needs = "cmsis-nn: a kernel needs 0x00000aa0 bytes of scratch, more than the operator's"
    with pytest.raises(MlfProjectError, match=needs), project.session(timeout=60) as session:
        session.run(feed)
    assert live_children() == []
    log = "mlf: cmsis-nn: a kernel needs 0x00000ac0 bytes of scratch\nmlf: abort: code 0x00000ac0\n"
    assert "(mlf: cmsis-nn: a kernel needs" in describe_exit(EXIT_ABORT, log)


# --- end to end: every covered tag, bit-exact ------------------------------------------------

MACHINES = [
    pytest.param("host", id="host"),
    pytest.param("qemu-mps3-an547", id="an547", marks=[pytest.mark.qemu, requires_arm]),
]


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    graph = corpus_archive("kws_int8_cmsisnn")
    aot = corpus_archive("kws_int8_aot_cmsisnn_usmp")
    if graph is None or aot is None:
        pytest.skip("needs the corpus's kws_int8_cmsisnn and kws_int8_aot_cmsisnn_usmp")
    return write_dir(tmp_path_factory.mktemp("combined") / "kws3.mlf", combined_files(graph, aot))


class Runs:
    """Outputs by (machine, tag), shared by the tests (the reference is host + v4.1.0), and
    what the runs that failed raised."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.done: Dict[Tuple[str, str], Outcome] = {}
        self.failed: Dict[Tuple[str, str], Exception] = {}


Outcome = Union[DependencyError, Dict[str, np.ndarray]]
REFERENCE = ("host", "v4.1.0")


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, combined: Path
) -> Runs:
    """The reference and every selected (machine, tag), run before the first case goes on
    (so no firmware outlives it), two at a time: a run's generate, configure, link and
    session are one core's work beside the other run's compiling."""
    cache = Runs(tmp_path_factory.mktemp("runs"))
    keys = [REFERENCE]
    for item in request.session.items:
        if (
            item.module is request.module
            and getattr(item, "originalname", "") == "test_every_covered_release_is_bit_exact"
        ):
            key = (item.callspec.params["machine"], item.callspec.params["tag"])
            keys += [key] if key not in keys else []

    def one(key: Tuple[str, str]) -> None:
        try:
            _run(combined, *key, cache)
        except Exception as err:  # noqa: BLE001 - raised by the cases that read this run
            cache.failed[key] = err

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(one, keys))
    return cache


def _run(combined: Path, machine: str, tag: str, cache: Runs) -> Outcome:
    """Generate, build and run the three models with CMSIS-NN at ``tag``: their outputs, or
    the refusal."""
    key = (machine, tag)
    if key in cache.failed:
        raise cache.failed[key]
    if key in cache.done:
        return cache.done[key]
    repo = repository()
    dependency = {"short_name": "cmsis-nn", "url": repo.resolve().as_uri(), "url_type": "git",
                  "version_spec": tag}  # fmt: skip
    work = cache.work
    try:
        project = Project.generate(
            combined, work / f"{machine}-{tag}", board=machine, model="*",
            options={"dependencies": [dependency], "cache_dir": str(work / "cache")},
        )  # fmt: skip
    except DependencyError as refused:
        cache.done[key] = refused
        return refused
    project.build()
    kws = corpus_case(corpus_archive("kws_int8_cmsisnn"))  # type: ignore[arg-type]
    feed = dict(np.load(str(kws["inputs_npz"])))
    with project.session(timeout=120) as session:
        outputs = {
            "kws": session.run(feed, model="kws")["output0"],
            "kwsa": session.run(feed, model="kwsa")["output0"],
            NAME: session.run(inputs(7), model=NAME)["output0"],
        }
    cache.done[key] = outputs
    return outputs


@pytest.mark.slow
@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("tag", TAGS)
def test_every_covered_release_is_bit_exact(
    tag: str, machine: str, combined: Path, runs: Runs
) -> None:
    got = _run(combined, machine, tag, runs)
    if isinstance(got, DependencyError):  # a covered tag must build and run, not be refused
        pytest.fail(f"CMSIS-NN {tag} is covered (RELEASES) but refused on {machine}: {got}")
    reference = _run(combined, "host", "v4.1.0", runs)
    if isinstance(reference, DependencyError):
        pytest.fail(f"the reference, CMSIS-NN v4.1.0 on the host, is refused: {reference}")
    case = corpus_case(corpus_archive("kws_int8_cmsisnn"))  # type: ignore[arg-type]
    want = np.load(str(case["outputs_npz"]))["output0"]
    assert np.array_equal(got["kws"], want), f"graph KWS {got['kws']} != {want}"
    assert np.array_equal(got["kwsa"], want), f"AOT KWS {got['kwsa']} != {want}"
    assert differences(got[NAME], reference[NAME]) == []
    assert live_children() == []
