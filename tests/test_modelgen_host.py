"""Generated C compiled with gcc and executed on the host, against the numpy references.

The harness is a minimal graph walker written for this test (not the project's runtime):
it resolves every function through the archive's own ``TVMSystemLibEntryPoint`` names blob,
hands operators DLTensors exactly as a graph executor does, and serves
TVMBackendAllocWorkspace from a LIFO stack that aborts on an out-of-order free.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from project_api.modelgen import GeneratedModel, catalog, compare_outputs, failing_inputs
from project_api.modelgen.ops import OperatorFailure

REPO = Path(__file__).resolve().parent.parent
INCLUDE = REPO / "crt" / "include"

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not (INCLUDE / "tvm" / "runtime" / "c_backend_api.h").is_file(),
    reason="needs gcc and the TVM ABI headers under crt/include",
)

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/crt/module.h"

typedef struct { int sid; int ndim; int64_t shape[8]; uint8_t code, bits; } view_t;
typedef struct { const char* func; int num_args; int num_outputs; int args[32]; } op_t;
#include "tables.h"

static uint8_t workspace[WORKSPACE_BYTES + 64] __attribute__((aligned(64)));
static void* blocks[64];
static size_t top, high, count;

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int code,
                               int bits) {
  size_t size = (size_t)((nbytes + 63) & ~(uint64_t)63);
  (void)device_type; (void)device_id; (void)code; (void)bits;
  if (top + size > WORKSPACE_BYTES || count == 64) return NULL;
  blocks[count++] = workspace + top;
  top += size;
  if (top > high) high = top;
  return blocks[count - 1];
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type; (void)device_id;
  if (count == 0 || blocks[count - 1] != ptr) { fprintf(stderr, "free not LIFO\n"); exit(3); }
  top = (size_t)((uint8_t*)ptr - workspace);
  count--;
  return 0;
}

void TVMAPISetLastError(const char* msg) { (void)msg; }

static TVMBackendPackedCFunc lookup(const char* name) {
  const TVMFuncRegistry* reg = TVMSystemLibEntryPoint()->registry;
  const unsigned char* p = (const unsigned char*)reg->names;
  unsigned n = p[0] | (p[1] << 8);
  const char* s = reg->names + 2;
  for (unsigned i = 0; i < n; ++i, s += strlen(s) + 1) {
    if (strcmp(s, name) == 0) return reg->funcs[i];
  }
  fprintf(stderr, "missing %s\n", name);
  exit(4);
}

int main(int argc, char** argv) {
  uint8_t* storage[NUM_SIDS];
  DLTensor tensors[NUM_VIEWS];
  FILE* in = fopen(argv[1], "rb");
  for (int i = 0; i < NUM_SIDS; ++i) {
    storage[i] = aligned_alloc(64, (sid_bytes[i] + 63) & ~(size_t)63);
    if (fread(storage[i], 1, sid_bytes[i], in) != sid_bytes[i]) return 5;
  }
  fclose(in);
  for (int v = 0; v < NUM_VIEWS; ++v) {
    DLTensor t = {storage[views[v].sid], {kDLCPU, 0}, views[v].ndim,
                  {views[v].code, views[v].bits, 1}, views[v].shape, NULL, 0};
    tensors[v] = t;
  }
  for (int k = 0; k < NUM_OPS; ++k) {
    const op_t* op = &ops[k];
    if (strcmp(op->func, "__nop") == 0) continue;
    if (strcmp(op->func, "__copy") == 0) {
      const DLTensor* src = &tensors[op->args[0]];
      memcpy(tensors[op->args[1]].data, src->data, sid_bytes[views[op->args[0]].sid]);
      continue;
    }
    TVMValue values[32];
    int codes[32];
    for (int a = 0; a < op->num_args; ++a) {
      values[a].v_handle = &tensors[op->args[a]];
      codes[a] = kTVMNDArrayHandle;
    }
    TVMValue ret;
    int ret_code;
    if (lookup(op->func)(values, codes, op->num_args, &ret, &ret_code, NULL) != 0) {
      printf("%d\n", k);
      return 10;
    }
    if (count != 0) { fprintf(stderr, "workspace leaked\n"); return 6; }
  }
  FILE* out = fopen(argv[2], "wb");
  for (int i = 0; i < NUM_SIDS; ++i) fwrite(storage[i], 1, sid_bytes[i], out);
  fclose(out);
  printf("%zu\n", high);
  return 0;
}
"""

DTYPE_CODES = {"float32": (2, 32), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32)}


def _tables(model: GeneratedModel) -> str:
    low = model.lowered
    views = []
    for eid, t in enumerate(low.entry_types):
        code, bits = DTYPE_CODES[t.dtype]
        dims = ", ".join(str(d) for d in t.shape) or "0"
        views.append(f"{{{low.storage_ids[eid]}, {len(t.shape)}, {{{dims}}}, {code}, {bits}}}")
    ops = []
    for nid in low.op_nodes:
        node = low.nodes[nid]
        first = low.node_row_ptr[nid]
        outputs = int(node["attrs"]["num_outputs"])
        args = [low.node_row_ptr[i] + k for i, k, _ in node["inputs"]]
        args += [first + k for k in range(outputs)]
        func = node["attrs"]["func_name"]
        ops.append(f'{{"{func}", {len(args)}, {outputs}, {{{", ".join(map(str, args))}}}}}')
    sizes = ", ".join(str(n) for n in low.storage_bytes)
    return "\n".join(
        [
            f"#define NUM_SIDS {len(low.storage_bytes)}",
            f"#define NUM_VIEWS {len(views)}",
            f"#define NUM_OPS {len(ops)}",
            f"#define WORKSPACE_BYTES {max(model.workspace_size_bytes, 64)}",
            f"static const size_t sid_bytes[] = {{{sizes}}};",
            f"static view_t views[] = {{{', '.join(views)}}};",
            f"static const op_t ops[] = {{{', '.join(ops)}}};",
        ]
    )


def build_harness(model: GeneratedModel, work: Path) -> Path:
    for member, data in model.members().items():
        target = work / "mlf" / member
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    sources = sorted((work / "mlf" / "codegen" / "host" / "src").glob(f"{model.name}_lib*.c"))
    for source in sources:
        compile_ = [
            "gcc",
            "-c",
            "-Wall",
            "-std=c11",
            f"-I{INCLUDE}",
            str(source),
            "-o",
            "/dev/null",
        ]
        result = subprocess.run(compile_, capture_output=True, text=True)
        assert result.returncode == 0 and not result.stderr, result.stderr
    (work / "harness.c").write_text(HARNESS)
    (work / "tables.h").write_text(_tables(model))
    exe = work / "harness"
    command = ["gcc", "-O0", "-ffp-contract=off", "-std=c11", f"-I{INCLUDE}", f"-I{work}"]
    command += [str(work / "harness.c"), *map(str, sources), "-lm", "-o", str(exe)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return exe


def run_harness(
    model: GeneratedModel, exe: Path, inputs: Dict[str, np.ndarray], work: Path
) -> subprocess.CompletedProcess:
    low = model.lowered
    storage = [bytearray(n) for n in low.storage_bytes]
    values = {**inputs, **low.params}
    for nid in low.arg_nodes:
        eid = low.node_row_ptr[nid]
        data = np.ascontiguousarray(values[low.nodes[nid]["name"]]).tobytes()
        storage[low.storage_ids[eid]][: len(data)] = data
    (work / "in.bin").write_bytes(b"".join(storage))
    return subprocess.run(
        [str(exe), str(work / "in.bin"), str(work / "out.bin")], capture_output=True, text=True
    )


def read_outputs(model: GeneratedModel, work: Path) -> Dict[str, np.ndarray]:
    low = model.lowered
    blob = (work / "out.bin").read_bytes()
    offsets = np.cumsum([0] + low.storage_bytes)
    outputs = {}
    for number, (nid, index) in enumerate(low.heads):
        eid = low.node_row_ptr[nid] + index
        t = low.entry_types[eid]
        start = offsets[low.storage_ids[eid]]
        raw = blob[start : start + t.nbytes]
        outputs[f"output{number}"] = np.frombuffer(raw, dtype=t.dtype).reshape(t.shape)
    return outputs


HOST_MODELS: List[str] = [
    "mlp",
    "cnn_nchw",
    "cnn_nhwc",
    "cnn_int8",
    "ops_zoo",
    "long_names",
    "many_args",
    "multi_output",
    "scalar",
    "many_functions",
    "mlp_v5",
    "chain_add_10",
    "params_1k",
    "digits",
]


@pytest.mark.parametrize("name", HOST_MODELS)
def test_generated_code_matches_reference(name: str, tmp_path: Path) -> None:
    model = catalog()[name]()
    exe = build_harness(model, tmp_path)
    for seed in (0, 1):
        inputs = model.sample_inputs(seed)
        result = run_harness(model, exe, inputs, tmp_path)
        assert result.returncode == 0, result.stderr
        assert int(result.stdout) <= model.workspace_size_bytes
        actual, expected = read_outputs(model, tmp_path), model.reference(inputs)
        assert compare_outputs(actual, expected) == []
        for key, want in expected.items():
            if want.dtype.kind != "f":
                np.testing.assert_array_equal(actual[key], want)  # int8: bit for bit
            else:  # host without FMA contraction: same float32 operations, libm within ulps
                np.testing.assert_allclose(actual[key], want, rtol=2e-6, atol=1e-7)


def test_workspace_peak_equals_declared(tmp_path: Path) -> None:
    model = catalog()["cnn_int8"]()
    exe = build_harness(model, tmp_path)
    result = run_harness(model, exe, model.sample_inputs(), tmp_path)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == model.workspace_size_bytes > 0


def test_workspace_exhaustion_makes_the_operator_fail(tmp_path: Path) -> None:
    model = catalog()["cnn_nchw"]()
    exe = build_harness(model, tmp_path)
    tables = (tmp_path / "tables.h").read_text()
    (tmp_path / "tables.h").write_text(
        tables.replace(f"WORKSPACE_BYTES {model.workspace_size_bytes}", "WORKSPACE_BYTES 64")
    )
    sources = sorted((tmp_path / "mlf" / "codegen" / "host" / "src").glob("*.c"))
    command = ["gcc", "-O0", "-std=c11", f"-I{INCLUDE}", f"-I{tmp_path}"]
    command += [str(tmp_path / "harness.c"), *map(str, sources), "-lm", "-o", str(exe)]
    subprocess.run(command, check=True)
    result = run_harness(model, exe, model.sample_inputs(), tmp_path)
    assert result.returncode == 10  # the first padded conv2d gets NULL and returns -1
    assert int(result.stdout) == 0


def test_failing_operator_returns_minus_one_where_the_reference_says(tmp_path: Path) -> None:
    model = catalog()["failing"]()
    exe = build_harness(model, tmp_path)
    ok = run_harness(model, exe, failing_inputs(3, fail=False), tmp_path)
    assert ok.returncode == 0
    expected = model.reference(failing_inputs(3, fail=False))
    assert compare_outputs(read_outputs(model, tmp_path), expected) == []
    failed = run_harness(model, exe, failing_inputs(3, fail=True), tmp_path)
    assert failed.returncode == 10
    with pytest.raises(OperatorFailure) as info:
        model.reference(failing_inputs(3, fail=True))
    assert model.op_node(int(failed.stdout)) == info.value.node
    assert info.value.function == "tvmgen_failing_fused_fail_if_flag"


@pytest.mark.parametrize("name", sorted(set(catalog()) - set(HOST_MODELS)))
def test_other_catalog_models_compile_warning_free(name: str, tmp_path: Path) -> None:
    model = catalog()[name]()
    sources = []
    for member, data in model.members().items():
        if member.endswith(".c"):
            sources.append(tmp_path / Path(member).name)
            sources[-1].write_bytes(data)
    command = ["gcc", "-c", "-Wall", "-std=c11", f"-I{INCLUDE}", *map(str, sources)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0 and not result.stderr, result.stderr
