"""`mlf-project export` (issues 35, 44): bad arenas refused with their codes and nothing written
outside (ASan on the host), the header's arena size checked by runs (it works bit-exact, and
no 64-byte block of it is to spare), the command's one-line refusals (exit 2), names, the
folder's contents (the portable export and a CPU one alike, no CPU flags in any build file),
and the Project API's project type ``library``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
from conftest import corpus_archive

from project_api.generate import generate_project
from project_api.generate.export import export_library
from project_api.modelgen.catalog import cnn_int8

_ASAN_MAIN = r"""
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kws.h"

static int failures;
#define EXPECT(cond) \
  do { if (!(cond)) { printf("FAIL line %d: %s\n", __LINE__, #cond); failures++; } } while (0)

static uint8_t* block(size_t n) {
  void* p = NULL;
  return posix_memalign(&p, 64, n) == 0 ? (uint8_t*)p : NULL;
}

static int untouched(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) if (p[i] != 0xA5) return 0;
  return 1;
}

int main(void) {
  kws_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  size_t n = KWS_ARENA_BYTES;
  uint8_t* big = block(n + 64);
  EXPECT(kws_init(NULL, big, n) == KWS_ERR_NULL);
  EXPECT(kws_init(&ctx, NULL, n) == KWS_ERR_NULL);
  memset(big, 0xA5, n + 64);
  EXPECT(kws_init(&ctx, big + 1, n) == KWS_ERR_ALIGN);
  EXPECT(untouched(big, n + 64));
  free(big);
  /* Exactly one byte short, in a heap block of that size: ASan sees any write past it. */
  uint8_t* shorter = block(n - 1);
  memset(shorter, 0xA5, n - 1);
  EXPECT(kws_init(&ctx, shorter, n - 1) == KWS_ERR_ARENA_SIZE);
  EXPECT(untouched(shorter, n - 1));
  free(shorter);
  EXPECT(kws_run(&ctx) == KWS_ERR_NOT_READY);
  EXPECT(kws_input(&ctx, 0) == NULL);
  EXPECT(kws_run(NULL) == KWS_ERR_NOT_READY);
  /* Exactly the arena: init and a run stay inside it. */
  uint8_t* exact = block(n);
  EXPECT(kws_init(&ctx, exact, n) == KWS_OK);
  EXPECT(kws_input(&ctx, 1) == NULL && kws_output(&ctx, -1) == NULL);
  uint8_t* in = kws_input(&ctx, 0);
  EXPECT(in >= exact && in + KWS_INPUT0_BYTES <= exact + n);
  memset(in, 0, KWS_INPUT0_BYTES);
  EXPECT(kws_run(&ctx) == KWS_OK);
  uint8_t* out = kws_output(&ctx, 0);
  EXPECT(out >= exact && out + KWS_OUTPUT0_BYTES <= exact + n);
  EXPECT(strcmp(kws_status_str(KWS_ERR_ALIGN), "arena is not aligned to KWS_ARENA_ALIGN") == 0);
  EXPECT(kws_inputs[0].rank == KWS_INPUT0_RANK && kws_inputs[0].has_quantization == 1);
  free(exact);
  printf("%s\n", failures ? "failed" : "all good");
  return failures;
}
"""


def _kws() -> Path:
    archive = corpus_archive("kws_int8")
    if archive is None:
        pytest.skip("corpus archive kws_int8.tar is absent (set MLF_PROJECT_CORPUS)")
    return archive


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a host C compiler")
def test_bad_arenas_under_asan(tmp_path: Path) -> None:
    out = tmp_path / "kws"
    export_library(_kws(), out, formats="make")
    (tmp_path / "main.c").write_text(_ASAN_MAIN)
    sources = [str(p) for p in sorted((out / "src").rglob("*.c"))]
    exe = tmp_path / "asan"
    flags = ["-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    done = subprocess.run(
        ["cc", *flags, "-Wall", "-Wextra", "-Werror", f"-I{out / 'src'}", "-o", str(exe),
         str(tmp_path / "main.c"), *sources, "-lm"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "all good" in run.stdout, run.stdout + run.stderr[-3000:]


# argv: the arena's bytes, the byte it is filled with. stdin: the inputs, stdout: the outputs;
# stderr: "init <status> run <status>", then one character per arena byte, 1 where it changed.
_ARENA_MAIN = r"""
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cnn.h"

int main(int argc, char** argv) {
  if (argc != 3) return 9;
  size_t n = (size_t)strtoul(argv[1], NULL, 10);
  int fill = atoi(argv[2]);
  void* block = NULL;
  /* Exactly n bytes on the heap: ASan stops at any access past them. */
  if (posix_memalign(&block, CNN_ARENA_ALIGN, n) != 0) return 9;
  uint8_t* arena = (uint8_t*)block;
  memset(arena, fill, n);
  cnn_ctx ctx;
  int init = cnn_init(&ctx, arena, n), run = -1;
  if (init == CNN_OK) {
    for (int i = 0; i < CNN_NUM_INPUTS; ++i) {
      size_t bytes = cnn_inputs[i].bytes;
      if (fread(cnn_input(&ctx, i), 1, bytes, stdin) != bytes) return 9;
    }
    run = cnn_run(&ctx);
    for (int i = 0; i < CNN_NUM_OUTPUTS; ++i) {
      fwrite(cnn_output(&ctx, i), 1, cnn_outputs[i].bytes, stdout);
    }
  }
  fprintf(stderr, "init %d run %d\n", init, run);
  for (size_t i = 0; i < n; ++i) fputc(arena[i] != (uint8_t)fill ? '1' : '0', stderr);
  free(block);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a host C compiler")
def test_the_arena_macro_is_the_smallest_that_runs(tmp_path: Path) -> None:
    """The factory's int8 CNN exported, in a host program of the test's own under ASan: in a
    heap block of exactly CNN_ARENA_BYTES init and a run touch nothing outside, and the outputs
    equal the model's reference bit for bit; every 64-byte block of that arena is written by
    init or the run (filled with two patterns: a byte written with one pattern's value changes
    the other), so no block of it is to spare; 1 and 64 bytes fewer are refused, the arena
    untouched."""
    model = cnn_int8()
    out = tmp_path / "cnn"
    export_library(model.write(tmp_path / "cnn.tar"), out, name="cnn", formats="make")
    header = (out / "src" / "cnn.h").read_text()
    macro = re.search(r"#define CNN_ARENA_BYTES (\d+)u", header)
    assert macro is not None
    arena = int(macro[1])
    (tmp_path / "main.c").write_text(_ARENA_MAIN)
    exe = tmp_path / "arena"
    flags = ["-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    built = subprocess.run(
        ["cc", *flags, "-Wall", "-Wextra", "-Werror", f"-I{out / 'src'}", "-o", str(exe),
         str(tmp_path / "main.c"), *map(str, sorted((out / "src").rglob("*.c"))), "-lm"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    inputs = model.sample_inputs()
    feed = b"".join(np.ascontiguousarray(inputs[s.name]).tobytes() for s in model.inputs)
    want = model.reference(inputs)

    def run(size: int, fill: int) -> Tuple[str, bytes, str]:
        done = subprocess.run(
            [str(exe), str(size), str(fill)], input=feed, capture_output=True, timeout=60
        )
        status, _, written = done.stderr.decode().partition("\n")
        assert done.returncode == 0 and len(written) == size, done.stderr.decode()[-3000:]
        return status, done.stdout, written

    changed = []
    for fill in (0xA5, 0x5A):
        status, outputs, written = run(arena, fill)
        assert status == "init 0 run 0", status
        at = 0
        for i, spec in enumerate(model.outputs):
            got = np.frombuffer(outputs[at : at + spec.nbytes], dtype=spec.dtype)
            assert np.array_equal(got.reshape(spec.shape), want[f"output{i}"]), i
            at += spec.nbytes
        changed.append(written)
    idle = [
        block
        for block in range(0, arena, 64)
        if "1" not in changed[0][block : block + 64] + changed[1][block : block + 64]
    ]
    assert idle == [], f"64-byte blocks of the {arena} B arena never written: {idle}"
    for short in (arena - 1, arena - 64):
        status, outputs, written = run(short, 0xA5)
        assert status == "init 3 run -1" and outputs == b"", (short, status)  # ERR_ARENA_SIZE
        assert "1" not in written


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "project_api", "export", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--format", "cmake,bazel"], "unknown export format bazel"),
        (["--cpu", "z80"], "unknown CPU 'z80'"),
        (["--board", "no-such-board"], "unknown board 'no-such-board'"),
        (["--name", "1kws"], "is not a C identifier"),
        (["--name", "int"], "C keyword"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, extra: list, message: str) -> None:
    done = _cli(str(_kws()), str(tmp_path / "out"), *extra)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "out").exists()


def test_non_empty_directory_needs_force(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own file")
    done = _cli(str(_kws()), str(mine), "--no-estimate", "--force")
    assert done.returncode == 2 and "holds no earlier export" in done.stderr
    assert (mine / "notes.txt").read_text() == "my own file"
    out = tmp_path / "out"
    first = _cli(str(_kws()), str(out), "--no-estimate", "--format", "make")
    assert first.returncode == 0, first.stderr
    assert "kws: arena" in first.stdout
    again = _cli(str(_kws()), str(out), "--no-estimate")
    assert again.returncode == 2 and "--force" in again.stderr
    forced = _cli(str(_kws()), str(out), "--no-estimate", "--force", "--format", "cmake")
    assert forced.returncode == 0, forced.stderr
    assert (out / "CMakeLists.txt").is_file() and not (out / "kws.mk").exists()


def test_formats_and_contents(tmp_path: Path) -> None:
    info = export_library(_kws(), tmp_path / "k", board="qemu-mps2-an385", formats="arduino")
    root = tmp_path / "k"
    assert info["formats"] == ["arduino"]
    assert (root / "library.properties").is_file() and not (root / "library.json").exists()
    suffixes = {p.suffix for p in (root / "src").rglob("*") if p.is_file()}
    assert suffixes <= {".c", ".cpp", ".h", ".S"}, suffixes
    header = (root / "src" / "kws.h").read_text()
    for macro in ("KWS_ARENA_BYTES", "KWS_ARENA_ALIGN", "KWS_NUM_INPUTS", "KWS_NUM_OUTPUTS",
                  "KWS_INPUT0_BYTES", "KWS_OUTPUT0_BYTES", "KWS_INPUT0_SCALE"):  # fmt: skip
        assert f"#define {macro} " in header
    for function in ("int kws_init(kws_ctx* ctx, void* arena, size_t bytes)",
                     "void* kws_input(kws_ctx* ctx, int i)", "int kws_run(kws_ctx* ctx)",
                     "const char* kws_status_str(int status)"):  # fmt: skip
        assert function in header
    model = info["models"][0]
    assert model["runs_must_not_overlap"] and "MLF_EXPORT_LOCK" in header
    text = " ".join(p.read_text() for p in (root / "src").rglob("*.c"))
    for banned in ("malloc(", "printf(", "mlf_platform_write"):
        assert banned not in text


def test_two_models_named_alike_need_a_name(tmp_path: Path) -> None:
    archive = corpus_archive("multi_module")
    if archive is None:
        pytest.skip("corpus archive multi_module.tar is absent")
    info = export_library(archive, tmp_path / "both", model="*", formats="cmake")
    assert [m["name"] for m in info["models"]] == ["mlp", "mnist"]
    with pytest.raises(Exception, match="--name renames one model"):
        export_library(archive, tmp_path / "x", model="*", name="both")


def test_project_api_type_library(tmp_path: Path) -> None:
    info = generate_project(_kws(), tmp_path / "lib", project_type="library")
    assert json.loads((tmp_path / "lib" / "export.json").read_text()) == info
    assert (tmp_path / "lib" / "src" / "kws.h").is_file()


# CPU flags a library must never choose for the firmware (issue 44).
_CPU_FLAGS = re.compile(r"-mcpu|-march|-mfloat-abi|-mthumb|-mfpu")


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
def test_cpu_export_is_the_portable_one_without_cpu_flags(tmp_path: Path) -> None:
    """Exported with --cpu cortex-m55 (the case of issue 44: its flags used to follow the
    firmware's own) or without: no build file carries a CPU flag, and src/ is the same folder
    but for the line that says what it is for. export.json says which kind each is."""
    from project_api.board import load_board

    cpu_flags = load_board("qemu-mps3-an547").cpu_flags()
    assert any(_CPU_FLAGS.match(flag) for flag in cpu_flags)  # the control: what was written
    portable = export_library(_kws(), tmp_path / "portable")
    specific = export_library(_kws(), tmp_path / "m55", cpu="cortex-m55")
    assert (portable["kind"], portable["cpu"], portable["board"]) == ("portable", None, None)
    assert (specific["kind"], specific["cpu"]) == ("cpu", "cortex-m55")
    for info, root in ((portable, tmp_path / "portable"), (specific, tmp_path / "m55")):
        for name in info["files"]:
            text = (root / name).read_text()
            assert not _CPU_FLAGS.search(text), f"{name}: {_CPU_FLAGS.search(text)}"

    def tree(root: Path, target: str) -> dict:
        return {
            p.relative_to(root).as_posix(): p.read_text().replace(target, "TARGET")
            for p in sorted((root / "src").rglob("*"))
            if p.is_file()
        }

    assert tree(tmp_path / "portable", portable["target"]) == tree(
        tmp_path / "m55", specific["target"]
    )
    header = (tmp_path / "portable" / "src" / "kws.h").read_text()
    by_bits = portable["models"][0]["arena_by_pointer_bits"]
    assert f"#define KWS_ARENA_BYTES {by_bits['32']['arena_bytes']}u" in header
    assert f"#define KWS_ARENA_BYTES {by_bits['64']['arena_bytes']}u" in header
    assert "UINTPTR_MAX" in header
