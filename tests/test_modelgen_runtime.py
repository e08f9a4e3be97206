"""Factory models run through the project's C runtime (crt/src) on the host.

A small driver parses the archive's graph.json with mlf_graph_parse_json(), binds the params
file and a workspace sized by metadata's workspace_size_bytes, runs, and writes the outputs;
they must match the numpy references (and the failing model must fail at the right node).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from project_api.modelgen import GeneratedModel, catalog, compare_outputs, failing_inputs

REPO = Path(__file__).resolve().parent.parent
CRT = REPO / "crt"

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not (CRT / "mlf_runtime.cmake").is_file(),
    reason="needs gcc and the C runtime (crt/mlf_runtime.cmake and crt/src)",
)


def runtime_sources() -> List[Path]:
    """The core runtime sources, as crt/mlf_runtime.cmake lists them (MLF_RUNTIME_SOURCES)."""
    cmake = (CRT / "mlf_runtime.cmake").read_text()
    block = re.search(r"set\(MLF_RUNTIME_SOURCES(.*?)\)", cmake, re.S)
    assert block is not None, "crt/mlf_runtime.cmake lists no MLF_RUNTIME_SOURCES"
    names = re.findall(r"\$\{MLF_RUNTIME_DIR\}/(\S+\.c)", block.group(1))
    return [CRT / name for name in names]


DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlf_runtime.h"

static void* slurp(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) exit(20);
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = aligned_alloc(64, (*size + 64) & ~(size_t)63);
  if (fread(data, 1, *size, f) != *size) exit(21);
  fclose(f);
  return data;
}

static int fail(const char* what, mlf_status status, const mlf_error* err) {
  char text[256];
  mlf_error_format(err, text, sizeof text);
  fprintf(stderr, "%s: %s (%s)\n", what, mlf_status_name(status), text);
  return 30 + (int)status;
}

int main(int argc, char** argv) {
  /* argv: graph.json params inputs.bin outputs.bin workspace_bytes */
  size_t json_len, params_len, inputs_len, bytes;
  const char* json = slurp(argv[1], &json_len);
  const void* params = slurp(argv[2], &params_len);
  const uint8_t* inputs = slurp(argv[3], &inputs_len);
  mlf_error err;
  mlf_status st = mlf_graph_measure_json(json, json_len, &bytes, &err);
  if (st != MLF_OK) return fail("measure", st, &err);
  void* tables = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  const mlf_graph* graph;
  st = mlf_graph_parse_json(json, json_len, tables, bytes, &graph, &err);
  if (st != MLF_OK) return fail("parse", st, &err);
  size_t state_bytes = mlf_executor_state_bytes(graph), arena_bytes;
  st = mlf_executor_arena_bytes(graph, params, params_len, 1, &arena_bytes);
  if (st != MLF_OK) return fail("arena", st, &err);
  void* state = aligned_alloc(64, (state_bytes + 64) & ~(size_t)63);
  void* arena = aligned_alloc(64, (arena_bytes + 64) & ~(size_t)63);
  mlf_executor ex;
  st = mlf_executor_init(&ex, graph, TVMSystemLibEntryPoint(), params, params_len, state,
                         state_bytes, arena, arena_bytes);
  if (st != MLF_OK) return fail("init", st, mlf_executor_error(&ex));
  size_t ws_bytes = (size_t)atol(argv[5]);
  void* ws_mem = aligned_alloc(64, ws_bytes + 64);
  mlf_workspace ws;
  mlf_workspace_init(&ws, ws_mem, ws_bytes);
  mlf_workspace_bind(&ws);
  size_t at = 0;
  for (uint32_t i = 0; i < mlf_executor_num_inputs(&ex); ++i) {
    mlf_tensor_info info;
    mlf_executor_input_info(&ex, i, &info);
    st = mlf_executor_set_input(&ex, i, inputs + at, info.nbytes);
    if (st != MLF_OK) return fail("set_input", st, mlf_executor_error(&ex));
    at += info.nbytes;
  }
  st = mlf_executor_run(&ex);
  if (st != MLF_OK) {
    printf("%u\n", (unsigned)mlf_executor_error(&ex)->node);
    return fail("run", st, mlf_executor_error(&ex));
  }
  FILE* out = fopen(argv[4], "wb");
  for (uint32_t i = 0; i < mlf_executor_num_outputs(&ex); ++i) {
    mlf_tensor_info info;
    mlf_executor_output_info(&ex, i, &info);
    void* data = malloc(info.nbytes + 1);
    mlf_executor_get_output(&ex, i, data, info.nbytes);
    fwrite(data, 1, info.nbytes, out);
    free(data);
  }
  fclose(out);
  printf("%zu\n", mlf_workspace_high_water(&ws));
  return 0;
}
"""


@pytest.fixture(scope="module")
def runtime_objects(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    """The runtime and the driver, compiled once for every model of this module."""
    work = tmp_path_factory.mktemp("runtime")
    (work / "driver.c").write_text(DRIVER)
    objects = []
    for source in [work / "driver.c", *runtime_sources()]:
        obj = work / (source.stem + ".o")
        command = [
            "gcc",
            "-c",
            "-O1",
            "-std=c11",
            f"-I{CRT / 'include'}",
            str(source),
            "-o",
            str(obj),
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        objects.append(obj)
    return objects


def build(model: GeneratedModel, work: Path, objects: List[Path]) -> Path:
    for member, data in model.members().items():
        target = work / "mlf" / member
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    sources = sorted((work / "mlf" / "codegen" / "host" / "src").glob(f"{model.name}_lib*.c"))
    exe = work / "driver"
    command = ["gcc", "-O0", "-ffp-contract=off", "-std=c11", f"-I{CRT / 'include'}"]
    command += [*map(str, sources), *map(str, objects), "-lm", "-o", str(exe)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return exe


def run(
    model: GeneratedModel, exe: Path, inputs: Dict[str, np.ndarray], work: Path
) -> subprocess.CompletedProcess:
    blob = b"".join(np.ascontiguousarray(inputs[s.name]).tobytes() for s in model.inputs)
    (work / "inputs.bin").write_bytes(blob)
    graph = work / "mlf" / "executor-config" / "graph" / f"{model.name}.graph"
    params = work / "mlf" / "parameters" / f"{model.name}.params"
    command = [
        str(exe),
        str(graph),
        str(params),
        str(work / "inputs.bin"),
        str(work / "outputs.bin"),
    ]
    return subprocess.run(
        command + [str(model.workspace_size_bytes)], capture_output=True, text=True
    )


def outputs(model: GeneratedModel, work: Path) -> Dict[str, np.ndarray]:
    blob, at, result = (work / "outputs.bin").read_bytes(), 0, {}
    for spec in model.outputs:
        result[spec.name] = np.frombuffer(blob[at : at + spec.nbytes], spec.dtype).reshape(
            spec.shape
        )
        at += spec.nbytes
    return result


@pytest.mark.parametrize(
    "name",
    [  # the edge cases TVM's own CRT mishandles, an int8 CNN with workspace, the demo model
        "cnn_int8",
        "ops_zoo",
        "long_names",
        "many_args",
        "multi_output",
        "scalar",
        "chain_add_100",
        "digits",
    ],
)
def test_runtime_runs_factory_models(
    name: str, tmp_path: Path, runtime_objects: List[Path]
) -> None:
    model = catalog()[name]()
    exe = build(model, tmp_path, runtime_objects)
    inputs = model.sample_inputs(5)
    result = run(model, exe, inputs, tmp_path)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) <= model.workspace_size_bytes
    assert compare_outputs(outputs(model, tmp_path), model.reference(inputs)) == []


def test_runtime_reports_the_failing_node(tmp_path: Path, runtime_objects: List[Path]) -> None:
    model = catalog()["failing"]()
    exe = build(model, tmp_path, runtime_objects)
    assert run(model, exe, failing_inputs(1), tmp_path).returncode == 0
    failed = run(model, exe, failing_inputs(1, fail=True), tmp_path)
    assert failed.returncode != 0
    assert int(failed.stdout) == model.op_node(1)
