"""Benchmark 1: the runtime's code size on Cortex-M3 at -Os, against an empty firmware.

Three firmwares for qemu-mps2-an385 (Cortex-M3), every C file at -Os (-DMLF_OPT_FLAGS=-Os),
linked with --gc-sections and without link-time optimisation (``MLF_LTO=OFF``, so that each
byte keeps its source), measured with ``arm-none-eabi-size`` and split with the linker map:

- ``baseline``: the board seam and the device-protocol loop with no model — the generated
  main.c without the model, the model's C emptied, and the runtime functions the loop calls
  replaced by one-line stubs (their bytes are subtracted), so nothing of the runtime is
  linked;
- ``tables``: the factory's ``cnn_int8`` (params, operator workspace, error reporting: every
  part of the runtime a model can call; integer code that pulls nothing out of libc) with the
  generator's const graph tables (executor, params loader, workspace allocator, registry
  lookup, error texts);
- ``json``: the same model with graph.json parsed on the device (+ the JSON parser);
- ``tables_lean`` (full runs): ``tables`` with ``-DMLF_ERROR_TEXT=0`` (no English error
  descriptions in the image: the default of ``host_driven`` firmware, whose host puts them
  back; the other variants keep them with ``-DMLF_ERROR_TEXT=1``).

"loop" is the bytes of the device protocol loop and its frame codec (``mlf_device``,
``mlf_frame``) in the ``tables`` firmware, against issue 14's 2 KB.
"runtime" is the bytes of the runtime's objects in the linked image (``.text + .rodata``, as
``size``'s text column counts them); "runtime + libc delta" adds what the runtime pulls out
of libc/libgcc beyond what the empty firmware already links — together, what adding the
runtime to the baseline costs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Set

from .common import (
    QEMU_BOARD,
    Context,
    Part,
    PartResult,
    Target,
    configure,
    factory_archive,
    generate,
    require_arm,
    size_berkeley,
)

TARGET_TEXT = 6 * 1024
TARGET_LOOP = 2 * 1024  # issue 14: the device protocol loop's code
LOOP_OBJECTS = ("mlf_device", "mlf_frame")  # the host_driven loop and its frame codec
MODEL = "cnn_int8"
_CODE = (".text", ".rodata")

BASELINE_MAIN = """/* bench/codesize.py: the empty firmware (board seam + device loop, no model). */
#include <stddef.h>
#include <stdint.h>

#include "mlf_device.h"
#include "mlf_models.h"
#include "mlf_platform.h"

static uint8_t rx_buffer[MLF_FRAME_BUFFER_BYTES(MLF_MAX_PAYLOAD)];

int main(void) {
  static mlf_device_model device_models[1];
  mlf_platform_init();
  device_models[0].name = "none";
  device_models[0].init_status = MLF_ERR_STATE;
  const mlf_device_config config = {
      .models = device_models,
      .num_models = 1u,
      .board = MLF_BOARD_NAME,
      .project_type = MLF_PROJECT_TYPE,
      .rx_buffer = rx_buffer,
      .rx_buffer_size = sizeof(rx_buffer),
      .max_payload = MLF_MAX_PAYLOAD,
      .idle_reset_ms = 200u,
  };
  mlf_platform_exit(mlf_device_serve(&config));
}
"""


def _nm(obj: Path, *flags: str) -> Set[str]:
    out = subprocess.run(
        ["arm-none-eabi-nm", *flags, str(obj)], capture_output=True, text=True, check=True
    ).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if fields:
            names.add(fields[-1])
    return names


def _loop_runtime_symbols(build_dir: Path) -> List[str]:
    """Runtime functions the device loop calls: undefined in the loop's objects, defined by
    the runtime's."""
    objects = list((build_dir / "CMakeFiles" / "mlf_runtime.dir").rglob("*.obj"))
    loop = [o for o in objects if o.name.split(".")[0] in ("mlf_device", "mlf_frame")]
    runtime = [o for o in objects if "/runtime/src/" in o.as_posix()]
    wanted: Set[str] = set()
    for obj in loop:
        wanted |= _nm(obj, "-u")
    defined: Set[str] = set()
    for obj in runtime:
        defined |= _nm(obj, "--defined-only", "-g")
    return sorted(wanted & defined)


def _stubs(symbols: List[str]) -> str:
    lines = [
        "/* bench/codesize.py: stand-ins for the runtime functions the device loop calls, so",
        " * the empty firmware links without the runtime. Never called. */",
    ]
    for name in symbols:
        if not re.match(r"^[A-Za-z_]\w*$", name):
            raise RuntimeError(f"unexpected symbol {name!r}")
        lines.append(f"int {name}(void);")
        lines.append(f"int {name}(void) {{ return 11; }}")
    return "\n".join(lines) + "\n"


def _libc_members(map_text: str) -> List[str]:
    """The C library's members with bytes in the linked image (libgcc's helpers are not libc;
    a member the linker took in but whose sections --gc-sections dropped is not counted)."""
    from project_api.footprint import map_objects

    found = set()
    for obj, row in map_objects(map_text).items():
        member = re.search(r"lib(?:c|c_nano|m)\.a\(lib_a-([\w-]+)\.o\)$", obj)
        if member and sum(row.values()) > 0:
            found.add(member.group(1))
    return sorted(found)


def _measure(project: Any, name: str) -> Dict[str, Any]:
    from project_api.footprint import classify, map_objects, parse_linker_map

    build_dir = Path(project.build_dir)
    elf = Path(project.firmware)
    text = (build_dir / "firmware.map").read_text(errors="replace")
    split, _ = parse_linker_map(text)
    code = {
        cat: sum(split.get(b, {}).get(cat, 0) for b in _CODE)
        for cat in ("runtime", "model", "params", "graph", "firmware", "board", "libc", "other")
    }
    objects: Dict[str, Dict[str, int]] = {"runtime": {}, "firmware": {}}
    for obj, row in map_objects(text).items():
        found = objects.get(classify(obj, ".text"))
        if found is not None:
            member = re.search(r"\(([^)]*)\)$", obj)
            key = (member.group(1) if member else Path(obj).name).replace(".obj", "")
            found[key] = found.get(key, 0) + sum(row.get(b, 0) for b in _CODE)
    loop = objects["firmware"]
    return {
        "libc_members": _libc_members(text),
        "variant": name,
        "size": size_berkeley(elf),
        "code": code,
        "runtime_objects": dict(sorted(objects["runtime"].items())),
        "loop_bytes": sum(v for k, v in loop.items() if k.split(".")[0] in LOOP_OBJECTS),
    }


def _build(ctx: Context, variant: str, archive: Path) -> Any:
    json = variant.startswith("json")
    options: Dict[str, Any] = {"graph_format": "json" if json else "tables"}
    # With the texts unless lean (host_driven firmware leaves them to the host by default;
    # the runtime's size target counts them, as standalone and mlperftiny firmware carry them).
    texts = "0" if variant.endswith("_lean") else "1"
    options["compile_definitions"] = [f"MLF_ERROR_TEXT={texts}"]
    project = generate(archive, ctx.work / f"codesize_{variant}", board=QEMU_BOARD, options=options)
    # Plain objects: each byte then belongs to its source (link-time optimisation, on by
    # default on Cortex-M, is measured whole by parts 7 and 12).
    configure(project, {"MLF_OPT_FLAGS": "-Os", "MLF_LTO": "OFF"})
    return project


def run(ctx: Context, result: PartResult) -> None:
    require_arm()
    archive = factory_archive(MODEL, ctx.work / "archives")
    measured: Dict[str, Dict[str, Any]] = {}

    tables = _build(ctx, "tables", archive)
    tables.build()
    measured["tables"] = _measure(tables, "tables")

    json_project = _build(ctx, "json", archive)
    json_project.build()
    measured["json"] = _measure(json_project, "json")

    variants = ["baseline", "tables", "json"]
    if not ctx.smoke:
        for lean_variant in ("tables_lean", "json_lean"):
            lean = _build(ctx, lean_variant, archive)
            lean.build()
            measured[lean_variant] = _measure(lean, lean_variant)
            variants.append(lean_variant)

    baseline = _build(ctx, "baseline", archive)
    symbols = _loop_runtime_symbols(Path(tables.build_dir))
    (Path(baseline.dir) / "src" / "main.c").write_text(BASELINE_MAIN)
    (c_name,) = [m["c_name"] for m in baseline.models]
    (Path(baseline.dir) / "src" / f"model_{c_name}.c").write_text(_stubs(symbols))
    # The model's code is linked as objects: its calls into the runtime (workspace, errors)
    # would pull runtime members in before --gc-sections drops it. No model, no such calls.
    for source in (Path(baseline.dir) / "model").rglob("*.c"):
        source.write_text("/* emptied by bench/codesize.py: no model */\ntypedef int empty;\n")
    baseline.build()
    measured["baseline"] = _measure(baseline, "baseline")
    stub_obj = next(Path(baseline.build_dir).rglob(f"model_{c_name}.c.obj"))
    stub_bytes = size_berkeley(stub_obj)["text"]
    if measured["baseline"]["code"]["runtime"]:
        raise RuntimeError("the empty firmware still links runtime code")

    base_text = measured["baseline"]["size"]["text"] - stub_bytes
    base_libc = measured["baseline"]["code"]["libc"]
    for variant in variants:
        m = measured[variant]
        row: Dict[str, Any] = {
            "variant": variant,
            "model": "-" if variant == "baseline" else MODEL,
            "text": m["size"]["text"],
            "data": m["size"]["data"],
            "bss": m["size"]["bss"],
            **{f"{k}_code": v for k, v in m["code"].items()},
            "runtime_objects": m["runtime_objects"],
            "loop_bytes": m["loop_bytes"],
            "libc_members": m["libc_members"],
        }
        if variant == "baseline":
            row["stub_bytes"] = stub_bytes
            row["text_without_stubs"] = base_text
        else:
            libc_delta = m["code"]["libc"] - base_libc
            row["libc_delta"] = libc_delta
            row["runtime_plus_libc_delta"] = m["code"]["runtime"] + libc_delta
            row["text_delta"] = m["size"]["text"] - base_text
        result.rows.append(row)
    t, j = result.rows[1], result.rows[2]
    result.summary = {
        "board": QEMU_BOARD,
        "flags": "-Os -mthumb -mcpu=cortex-m3 -ffunction-sections -fdata-sections, --gc-sections",
        "baseline_text": base_text,
        "runtime_text_tables": t["runtime_code"],
        "runtime_text_json": j["runtime_code"],
        "runtime_plus_libc_delta_tables": t["runtime_plus_libc_delta"],
        "runtime_plus_libc_delta_json": j["runtime_plus_libc_delta"],
        "json_parser_text": j["runtime_code"] - t["runtime_code"],
        "target_text": TARGET_TEXT,
        "target_met_tables": t["runtime_code"] <= TARGET_TEXT,
        "target_met_json": j["runtime_code"] <= TARGET_TEXT,
        "libc_members_baseline": measured["baseline"]["libc_members"],
        "libc_members_tables": t["libc_members"],
        "target_met_libc": set(t["libc_members"]) <= {"memcpy", "memset"},
        "loop_text": t["loop_bytes"],
        "target_loop": TARGET_LOOP,
        "target_met_loop": t["loop_bytes"] <= TARGET_LOOP,
        "runtime_text_tables_without_error_texts": measured["tables_lean"]["code"]["runtime"]
        if "tables_lean" in measured
        else None,
        "runtime_text_json_without_error_texts": measured["json_lean"]["code"]["runtime"]
        if "json_lean" in measured
        else None,
    }
    ctx.log(
        f"code size: runtime {t['runtime_code']} B (tables), {j['runtime_code']} B (json); "
        f"baseline {base_text} B"
    )


PART = Part(
    "codesize",
    "1. runtime code size, Cortex-M3 -Os (arm-none-eabi-size)",
    run,
    columns=[
        "variant",
        "model",
        "text",
        "data",
        "bss",
        "runtime_code",
        "model_code",
        "graph_code",
        "params_code",
        "firmware_code",
        "board_code",
        "libc_code",
        "runtime_plus_libc_delta",
        "libc_members",
    ],  # fmt: skip
    targets=[
        Target(
            "no libc beyond memcpy/memset on Cortex-M (loop, board seam, runtime)",
            lambda c: "libc members linked: " + ", ".join(c["libc_members_tables"]),
            "target_met_libc",
        ),
        Target(
            "device protocol loop (mlf_device + mlf_frame) <= 2 KB of code on Cortex-M3 -Os",
            lambda c: f"{c['loop_text']:,} B (tables firmware, plain -Os objects)",
            "target_met_loop",
        ),
    ],
)
