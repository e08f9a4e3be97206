"""The C runtime (crt/): its CTest suite under ASan/UBSan, and every real TVM archive of the
corpus run on it (three ways: params bound at init, loaded later, and through the
TVMGraphExecutor_* compatibility layer) against TVM's own reference outputs.

One CMake build per session, in a temporary directory, shared by every test here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest
from conftest import CMSIS_NN_SKIP, REPO_ROOT, corpus_archives, corpus_case, requires_arm
from workspace_marks import over_window, planned_windows

CRT_DIR = REPO_ROOT / "crt"
CTEST_NAMES = ["test_graph_json", "test_executor", "test_plan", "test_params", "test_misc",
               "ram_chain", "test_utvm"]  # fmt: skip
# The runtime proper (what the code-size target counts) and what else the firmware may link.
CORE_SOURCES = [
    "mlf_executor.c",
    "mlf_graph_json.c",
    "mlf_json.c",
    "mlf_params.c",
    "mlf_workspace.c",
    "mlf_registry.c",
]
OTHER_SOURCES = ["mlf_error.c", "mlf_tvm_compat.c", "mlf_tvm_platform.c"]
ARM_FLAGS = ["-mthumb", "-mcpu=cortex-m3"]
# Regression ceilings for CORE_SOURCES on Cortex-M3 -Os (-ffunction-sections), in bytes: the
# measured figures plus ~2% slack. "text" is arm-none-eabi-size's text column (code and
# read-only data), "code" the .text sections alone. The target is 6 KiB
# (test_code_size_target, not met yet: 7.5 KiB of code, see crt/README.md). Raised by 200 B
# for params bound by the tables (storage_data, mlf_executor_init_bound), which takes the
# params reader out of such firmware: linked, the KWS firmware's runtime went from 6,160 B to
# 5,248 B. Raised by 40 B for mlf_executor_init_linked (tables binding every function), which
# takes the registry out of such firmware. Raised by 400 B for the generator's liveness plan
# (pools at planned offsets, each operator's workspace window, their checks): linked with
# link-time optimisation the KWS firmware's runtime grew by 70 B, its RAM shrank by 17 KB.
# Raised by 130 B for the workspace's checked frees (issue 41: the last block's start, a link
# per block below it, reset and watch; mlf_workspace.c 256 -> 384 B).
CORE_TEXT_CEILING = 8870
CORE_CODE_CEILING = 8670
CORE_TARGET = 6 * 1024
MODES = ["bind", "load", "compat"]


def _c_compiler() -> str:
    for name in (os.environ.get("CC", ""), "gcc", "cc", "clang"):
        if name and shutil.which(name):
            return name
    return ""


def _needs_cmsis_nn(case: Dict[str, object]) -> bool:
    return bool(case.get("cmsis_nn"))


def _model_sources(root: Path, case: Dict[str, object]) -> List[Path]:
    """The chosen model's generated C: in a multi-model archive every model defines
    TVMSystemLibEntryPoint, so only <model_name>_lib*.c files are taken."""
    src = root / "codegen" / "host" / "src"
    name = str(case["model_name"])
    sources = sorted(src.glob(f"{name}_lib*.c"))
    return sources or sorted(src.glob("*.c"))


def _graph_path(root: Path, model: str) -> Path:
    for candidate in (
        root / "executor-config" / "graph" / f"{model}.graph",
        root / "executor-config" / "graph" / "graph.json",
    ):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no graph for {model} under {root}")


def _params_path(root: Path, model: str) -> Path:
    for candidate in (
        root / "parameters" / f"{model}.params",
        root / "parameters" / "default.params",
    ):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no params for {model} under {root}")


def _registry_source(graph: Path) -> str:
    """C for a registry of every function the graph calls (for archives whose CMSIS-NN
    partitions are missing from TVM's registry, as the project generator also does)."""
    nodes = json.loads(graph.read_text())["nodes"]
    names = sorted(
        {n["attrs"]["func_name"] for n in nodes if n["op"] == "tvm_op"} - {"__nop", "__copy"}
    )
    blob = "".join(f"\\{b:03o}" for b in len(names).to_bytes(2, "little"))
    blob += "".join(f"{name}\\000" for name in names)
    decls = "".join(
        f"TVM_DLL int32_t {name}(TVMValue*, int*, int, TVMValue*, int*, void*);\n" for name in names
    )
    funcs = ", ".join(f"(TVMBackendPackedCFunc){name}" for name in names)
    return (
        "#include <tvm/runtime/crt/module.h>\n"
        f"{decls}"
        f"static const TVMBackendPackedCFunc funcs[] = {{{funcs}}};\n"
        f'static const TVMFuncRegistry registry = {{"{blob}", funcs}};\n'
        "static const TVMModule lib = {&registry};\n"
        "const TVMModule* mlf_test_registry(void) { return &lib; }\n"
    )


@pytest.fixture(scope="session")
def crt_build(tmp_path_factory: pytest.TempPathFactory, cmsis_nn_checkout: Optional[Path]) -> Path:
    """crt/tests configured and built (with a run_model_<archive> per usable corpus archive)."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not found (pip install cmake)")
    compiler = _c_compiler()
    if not compiler:
        pytest.skip("no C compiler found (apt-get install gcc)")
    work = tmp_path_factory.mktemp("crt")
    models = []
    cmsis = cmsis_nn_checkout
    for archive in corpus_archives():
        case = corpus_case(archive)
        if _needs_cmsis_nn(case) and cmsis is None:
            continue
        root = work / "archives" / archive.stem
        root.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(root)  # noqa: S202 - the corpus is trusted test data
        model_dir = work / "models" / archive.stem
        model_dir.mkdir(parents=True)
        for source in _model_sources(root, case):
            shutil.copy(source, model_dir / source.name)
        if _needs_cmsis_nn(case) and cmsis is not None:
            for index, source in enumerate(sorted(cmsis.glob("Source/**/*.c"))):
                shutil.copy(source, model_dir / f"cmsis_nn_{index}_{source.name}")
            graph = _graph_path(root, str(case["model_name"]))
            (model_dir / "zz_registry.c").write_text(_registry_source(graph))
        models.append(f"{archive.stem}={model_dir}")
    build = work / "build"
    configure = [
        "cmake",
        "-S",
        str(CRT_DIR / "tests"),
        "-B",
        str(build),
        f"-DCMAKE_C_COMPILER={compiler}",
        f"-DMLF_MODELS={';'.join(models)}",
        f"-DMLF_MODEL_INCLUDES={cmsis / 'Include' if cmsis else ''}",
    ]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    for command in (configure, ["cmake", "--build", str(build), "--parallel"]):
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout}\n{result.stderr}"
    return build


@pytest.mark.parametrize("name", CTEST_NAMES)
def test_ctest(crt_build: Path, name: str) -> None:
    result = subprocess.run(
        ["ctest", "--test-dir", str(crt_build), "-R", f"^{name}$", "--output-on-failure"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "100% tests passed" in result.stdout


def _archive_cases() -> List[object]:
    params: List[object] = []
    for archive in corpus_archives():
        for mode in MODES:
            params.append(pytest.param(archive.stem, mode, id=f"{archive.stem}-{mode}"))
    return params or [pytest.param("none", "bind", id="no-corpus")]


@pytest.mark.parametrize(("stem", "mode"), _archive_cases())
def test_real_archive(
    mlf_corpus: Path,
    crt_build: Path,
    cmsis_nn_checkout: Optional[Path],
    tmp_path: Path,
    stem: str,
    mode: str,
) -> None:
    archive = mlf_corpus / f"{stem}.tar"
    case = corpus_case(archive)
    if _needs_cmsis_nn(case) and cmsis_nn_checkout is None:
        pytest.skip(f"{stem} calls CMSIS-NN kernels: {CMSIS_NN_SKIP}")
    runner = crt_build / f"run_model_{stem}"
    assert runner.is_file(), f"run_model_{stem} was not built"
    root = crt_build.parent / "archives" / stem
    model = str(case["model_name"])

    inputs = np.load(Path(str(case["inputs_npz"])))
    arguments: List[str] = []
    for name in inputs.files:
        path = tmp_path / f"in_{len(arguments)}.bin"
        path.write_bytes(np.ascontiguousarray(inputs[name]).tobytes())
        arguments.append(f"{name}={path}")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    command = [
        str(runner),
        mode,
        str(_graph_path(root, model)),
        str(_params_path(root, model)),
        str(out_dir),
        *arguments,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    if mode == "bind":  # each call's workspace, unbounded by windows, within its planned one
        marks = [int(m) for m in result.stdout.splitlines()[1].split("=", 1)[1].split(",")]
        windows, funcs, _ = planned_windows(archive, model)
        assert over_window(marks, windows, funcs) == [], stem

    expected = np.load(Path(str(case["outputs_npz"])))
    outputs: Dict[str, List[object]] = case["outputs"]  # type: ignore[assignment]
    assert len(list(out_dir.iterdir())) == len(outputs)
    for index, (name, spec) in enumerate(outputs.items()):
        shape, dtype = spec
        raw = (out_dir / f"output{index}.bin").read_bytes()
        got = np.frombuffer(raw, dtype=np.dtype(str(dtype))).reshape([int(d) for d in shape])  # type: ignore[attr-defined]
        want = expected[name]
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{stem} {name}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{stem} {name}")


def test_run_model_reports_sizes(mlf_corpus: Path, crt_build: Path) -> None:
    """The runner's summary line: the figures a firmware would size its buffers with."""
    stems = [p.stem for p in corpus_archives() if not _needs_cmsis_nn(corpus_case(p))]
    if not stems:
        pytest.skip("no corpus archive runs without CMSIS-NN")
    stem = stems[0]
    case = corpus_case(mlf_corpus / f"{stem}.tar")
    root = crt_build.parent / "archives" / stem
    model = str(case["model_name"])
    inputs = np.load(Path(str(case["inputs_npz"])))
    arguments = []
    for name in inputs.files:
        path = crt_build.parent / f"{stem}_{name}.bin"
        path.write_bytes(np.ascontiguousarray(inputs[name]).tobytes())
        arguments.append(f"{name}={path}")
    out_dir = crt_build.parent / f"{stem}_out"
    out_dir.mkdir(exist_ok=True)
    result = subprocess.run(
        [
            str(crt_build / f"run_model_{stem}"),
            "bind",
            str(_graph_path(root, model)),
            str(_params_path(root, model)),
            str(out_dir),
            *arguments,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    sizes, marks = result.stdout.splitlines()
    fields = dict(item.split("=") for item in sizes.split())
    assert set(fields) == {"ops", "views", "tables", "state", "arena", "workspace"}
    assert len(marks.split("=", 1)[1].split(",")) == int(fields["ops"])
    assert all(int(value) >= 0 for value in fields.values())
    meta = json.loads((root / "metadata.json").read_text())
    assert meta  # the archive's own workspace figure is what a generator would use


def test_generator_mirrors_runtime_sizes(mlf_corpus: Path, crt_build: Path) -> None:
    """The generator's figures for a JSON-graph firmware (project_api/generate/tables.py) against
    the runtime's own on this host (64-bit pointers): the parser's memory is bounded by
    json_parse_bytes() and the executor state is exactly state_bytes()."""
    from project_api.generate.table_sizes import json_parse_bytes, state_bytes
    from project_api.generate.tables import compile_graph
    from project_api.read.graph import Graph

    checked = 0
    for archive in corpus_archives():
        case = corpus_case(archive)
        runner = crt_build / f"run_model_{archive.stem}"
        if not runner.is_file():
            continue
        root = crt_build.parent / "archives" / archive.stem
        model = str(case["model_name"])
        graph_path = _graph_path(root, model)
        out_dir = crt_build.parent / f"{archive.stem}_sizes"
        out_dir.mkdir(exist_ok=True)
        inputs = np.load(Path(str(case["inputs_npz"])))
        arguments = []
        for name in inputs.files:
            path = out_dir / f"{name}.bin"
            path.write_bytes(np.ascontiguousarray(inputs[name]).tobytes())
            arguments.append(f"{name}={path}")
        result = subprocess.run(
            [str(runner), "load", str(graph_path), str(_params_path(root, model)), str(out_dir)]
            + arguments,
            capture_output=True,
            text=True,
            check=True,
        )
        first = result.stdout.splitlines()[0]
        fields = {k: int(v) for k, v in (item.split("=") for item in first.split())}
        graph = Graph.from_json(graph_path.read_text())
        tables = compile_graph(graph)
        assert json_parse_bytes(graph, tables, 8) >= fields["tables"], archive.stem
        assert state_bytes(tables, 8) == fields["state"], archive.stem
        assert len(tables.views) == fields["views"], archive.stem
        checked += 1
    if checked == 0:
        pytest.skip("no corpus archive was built")


def test_generator_reads_the_runtime_workspace_rule() -> None:
    """The generator sizes windows and workspaces by the runtime's rule: the block alignment and
    the link kept for each block below the last, as crt/include/mlf_runtime.h defines them."""
    from project_api.cmsis_nn import adapter as cmsis_nn_adapter
    from project_api.generate import sizes, tables

    header = (CRT_DIR / "include" / "mlf_runtime.h").read_text()
    defined = dict(re.findall(r"^#define (MLF_\w+) (\d+)u\s*$", header, re.M))
    assert int(defined["MLF_STORAGE_ALIGN"]) == sizes.WORKSPACE_ALIGN == tables.STORAGE_ALIGN
    assert int(defined["MLF_STORAGE_ALIGN"]) == cmsis_nn_adapter.WORKSPACE_BLOCK
    assert int(defined["MLF_WORKSPACE_LINK_BYTES"]) == sizes.WORKSPACE_LINK_BYTES
    # Twenty nested 16-byte blocks: 19 padded to 64, the last as asked, 19 links.
    assert sizes.lifo_bytes([16] * 20) == 19 * 64 + 16 + 19 * 4


def test_no_malloc_in_runtime() -> None:
    """The runtime proper never allocates: only the compat layer asks the firmware's
    TVMPlatformMemoryAllocate, and only the host platform uses stdio."""
    for source in (CRT_DIR / "src").glob("*.c"):
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", source.read_text(), flags=re.S)
        calls = re.findall(r"\b(malloc|calloc|realloc|free)\s*\(", code)
        assert not calls, f"{source.name} calls {calls}"


def _arm_sizes(tmp_path: Path, defines: List[str]) -> Dict[str, Tuple[int, int]]:
    """(text column, .text sections) of every runtime source, built as the target asks."""
    sizes = {}
    for name in CORE_SOURCES + OTHER_SOURCES:
        obj = tmp_path / f"{name}.o"
        subprocess.run(
            ["arm-none-eabi-gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Os"]
            + ARM_FLAGS
            + ["-ffunction-sections", "-fdata-sections", *defines, "-c"]
            + ["-I", str(CRT_DIR / "include"), str(CRT_DIR / "src" / name), "-o", str(obj)],
            check=True,
        )
        out = subprocess.run(
            ["arm-none-eabi-size", str(obj)], capture_output=True, text=True, check=True
        ).stdout
        headers = subprocess.run(
            ["arm-none-eabi-objdump", "-h", str(obj)], capture_output=True, text=True, check=True
        ).stdout
        code = sum(
            int(m.group(1), 16)
            for m in re.finditer(r"^\s*\d+\s+\.text\S*\s+([0-9a-f]+)", headers, re.M)
        )
        sizes[name] = (int(out.splitlines()[1].split()[0]), code)
    return sizes


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
def test_code_size_cortex_m3(tmp_path: Path) -> None:
    """Reports the text column and the code per file (Cortex-M3, -Os, sections), with and
    without error descriptions (which live in mlf_error.c, outside the counted files)."""
    full = _arm_sizes(tmp_path, [])
    lean = _arm_sizes(tmp_path, ["-DMLF_ERROR_TEXT=0"])
    print(f"{'file':22} {'text':>6} {'code':>6} {'lean text':>9}")
    for name in CORE_SOURCES + OTHER_SOURCES:
        print(f"{name:22} {full[name][0]:6} {full[name][1]:6} {lean[name][0]:9}")
    text = sum(full[name][0] for name in CORE_SOURCES)
    code = sum(full[name][1] for name in CORE_SOURCES)
    print(f"{'core total':22} {text:6} {code:6} {sum(lean[n][0] for n in CORE_SOURCES):9}")
    assert text <= CORE_TEXT_CEILING
    assert code <= CORE_CODE_CEILING


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
@pytest.mark.xfail(reason="the 6 KiB target of the issue is not reached yet", strict=False)
def test_code_size_target(tmp_path: Path) -> None:
    """The issue's target for the executor, JSON parser, params loader, allocator and
    registry: at most 6 KiB in the text column on Cortex-M3 -Os."""
    sizes = _arm_sizes(tmp_path, [])
    assert sum(sizes[name][0] for name in CORE_SOURCES) <= CORE_TARGET


def _qemu_run(elf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "qemu-system-arm",
            "-M",
            "mps2-an385",
            "-nographic",
            "-monitor",
            "none",
            "-serial",
            "null",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
            str(elf),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize(
    "program", ["ram_chain", "test_graph_json", "test_executor", "test_params"]
)
def test_on_cortex_m3(tmp_path: Path, program: str) -> None:
    """The portable C tests and the RAM benchmark, built for Cortex-M3 (32-bit pointers,
    newlib) and run on qemu-system-arm's mps2-an385 with semihosting."""
    crt0 = subprocess.run(
        ["arm-none-eabi-gcc", *ARM_FLAGS, "-print-file-name=rdimon-crt0.o"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    elf = tmp_path / f"{program}.elf"
    sources = [CRT_DIR / "src" / name for name in CORE_SOURCES + ["mlf_error.c"]]
    tests = CRT_DIR / "tests"
    sources += [tests / "test_util.c", tests / "test_graphs.c", tests / "arm" / "startup.c"]
    sources.append(tests / f"{program}.c")
    subprocess.run(
        ["arm-none-eabi-gcc", *ARM_FLAGS, "-O1", "-std=gnu11", "-Wall", "-Wextra", "-Werror"]
        + ["-I", str(CRT_DIR / "include"), "--specs=rdimon.specs", "-nostartfiles", crt0]
        + ["-T", str(tests / "arm" / "mps2_an385.ld"), *map(str, sources), "-lm", "-o", str(elf)],
        check=True,
    )
    result = _qemu_run(elf)
    print(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
