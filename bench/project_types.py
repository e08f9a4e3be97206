"""Part 13: every kind of KWS firmware against issue 14's limits (≤ 68 KB flash, ≤ 111 KB RAM).

Part 12 holds the ``host_driven`` firmware of the graph archive to the bare program; this
part links the others on qemu-mps2-an385 as ``mlf-project build`` builds them (default
options): ``host_driven``, ``standalone`` and ``mlperftiny`` projects of ``kws_int8``
(graph, const tables) and of the AOT archives ``kws_int8_aot`` and ``kws_int8_aot_usmp``
(``--smoke``: ``mlp_default``, graph only), and the ``mlperftiny`` firmware once more with
its outputs dequantized (options ``output_scale``/``output_zero_point``: floats printed; not
in smoke runs, where mlp_default's outputs are floats already).
Flash and RAM come from the linker map (``footprint``'s split). The USMP archive's own
generated code is about 1.5 KB larger than the plain AOT archive's; ``model_code_bytes``
shows it beside each total.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

from .bare import FLASH_TARGET, RAM_TARGET
from .common import (
    QEMU_BOARD,
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    corpus_dir,
    generate,
    require_arm,
)

CASES = ("kws_int8", "aot/kws_int8_aot", "aot/kws_int8_aot_usmp")
SMOKE_CASES = ("mlp_default",)
# (row name, project type, options). The benchmark firmware prints integer outputs as such
# by default; dequantized (output_scale given) it prints floats, which links float
# formatting (mlf_text.c, MLF_TEXT_FLOATS) and costs about 880 B more.
DEQUANTIZED = {"output_scale": "0.00390625", "output_zero_point": "-128"}
TYPES: Tuple[Tuple[str, str, Dict[str, str]], ...] = (
    ("host_driven", "host_driven", {}),
    ("standalone", "standalone", {}),
    ("mlperftiny", "mlperftiny", {}),
    ("mlperftiny dequantized", "mlperftiny", DEQUANTIZED),
)


def _linked(project: Any) -> Dict[str, int]:
    from project_api.footprint import linked_sizes

    sizes = linked_sizes(Path(project.build_dir), Path(project.firmware))
    model = sizes.category_bytes("model", (".text", ".rodata"))
    return {"flash_bytes": sizes.flash_bytes, "ram_bytes": sizes.ram_bytes, "model_code": model}


def run(ctx: Context, result: PartResult) -> None:
    require_arm()
    rows: List[Dict[str, Any]] = []
    for case in SMOKE_CASES if ctx.smoke else CASES:
        archive = corpus_dir() / f"{case}.tar"
        if not archive.is_file():
            raise Skip(f"{archive.name} is not in the corpus")
        # mlp_default's outputs are float32: nothing to dequantize (the option is refused)
        for row_name, project_type, options in TYPES[:-1] if ctx.smoke else TYPES:
            name = f"{Path(case).name}_{row_name.replace(' ', '_')}"
            project = generate(
                archive,
                ctx.scratch(f"types_{name}"),
                board=QEMU_BOARD,
                project_type=project_type,
                options=options,
            )
            project.build()
            sizes = _linked(project)
            rows.append(
                {
                    "archive": Path(case).name,
                    "project_type": row_name,
                    "flash_bytes": sizes["flash_bytes"],
                    "ram_bytes": sizes["ram_bytes"],
                    "model_code_bytes": sizes["model_code"],
                    "flash_margin": FLASH_TARGET - sizes["flash_bytes"],
                    "ram_margin": RAM_TARGET - sizes["ram_bytes"],
                }
            )
            ctx.log(f"  {name}: {sizes['flash_bytes']:,} / {sizes['ram_bytes']:,} B")
    result.rows = rows
    over = [r for r in rows if r["flash_margin"] < 0 or r["ram_margin"] < 0]
    result.summary = {
        "board": QEMU_BOARD,
        "firmwares": len(rows),
        "largest_flash_bytes": max(r["flash_bytes"] for r in rows),
        "largest_ram_bytes": max(r["ram_bytes"] for r in rows),
        "over_limit": [f"{r['archive']} {r['project_type']}" for r in over],
        "target_met": not over,
    }


PART = Part(
    "types",
    "13. every kind of KWS firmware (graph, AOT) against 68 KB / 111 KB",
    run,
    columns=[
        "archive",
        "project_type",
        "flash_bytes",
        "ram_bytes",
        "model_code_bytes",
        "flash_margin",
        "ram_margin",
    ],  # fmt: skip
    targets=[
        Target(
            "every KWS firmware (host_driven, standalone, mlperftiny; graph, AOT) "
            "<= 68 KB / 111 KB",
            lambda t: (
                f"{t['firmwares']} firmwares, largest {t['largest_flash_bytes']:,} B flash / "
                f"{t['largest_ram_bytes']:,} B RAM; over a limit: "
                f"{', '.join(t['over_limit']) or 'none'}"
            ),
            "target_met",
        ),
    ],
)
