"""Part 23, tuning: ``compile --tune BOARD`` on KWS, and the rules table it fills.

MLPerf Tiny's KWS (``../shared/models/kws_ref_model.tflite``) with ``--cmsis-nn`` (CMSIS-NN
v7.0.0 from ``../shared/deps/CMSIS-NN.git`` or ``$MLF_PROJECT_CMSIS_NN``) tuned on
qemu-mps2-an386 (Cortex-M4, DSP), qemu-mps2-an385 (Cortex-M3) and qemu-mps3-an547 (Cortex-M55,
MVE), each from an empty cache, then again (every figure from the cache):

- the tuning's time, the firmwares it built, the figures it measured;
- the form chosen per operator, and the sum of the operators' instructions with the tuned
  choice beside the rules' (``compile --cmsis-nn --board B``: the package's table for the
  board's CPU class) and beside ``compile --cmsis-nn`` alone (the ``default`` class);
- the second run's time (nothing built) and whether it chose the same.

``python -m bench.tune --write-rules`` tunes the three boards and writes what they measured into
``project_api/compile/rules/forms.json`` (one rule per operator signature and CPU class): the
rules ``compile`` then follows without ``--tune``. ``--smoke``: the an386 only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO_ROOT, Context, Part, PartResult, Skip, Target, require_qemu

AN385, AN386, AN547 = "qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps3-an547"
BOARDS = (AN386, AN385, AN547)
KWS = REPO_ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"
RULES = REPO_ROOT / "project_api" / "compile" / "rules" / "forms.json"


def tune_board(
    tree: Path, board: str, cache: Path, log: Any = print, model_path: Path = KWS
) -> Dict[str, Any]:
    """One board's row: ``model_path`` (KWS) tuned from ``cache`` (empty the first time),
    then again."""
    from project_api.board import load_board
    from project_api.compile import CmsisNnSource, read_tflite
    from project_api.compile.choose import choose_forms, cpu_class, signature
    from project_api.compile.tune import tune_forms

    source = CmsisNnSource(cmsis_path=str(tree))
    model = read_tflite(model_path)
    cpu = cpu_class(load_board(board))
    first = tune_forms(model_path, board, cmsis_nn=True, source=source, cache_dir=cache,
                       progress=lambda line: log("  " + line))  # fmt: skip
    again = tune_forms(model_path, board, cmsis_nn=True, source=source, cache_dir=cache)
    tuned = choose_forms(model, cmsis_nn=True, cpu=cpu, measured=first.measured)
    ruled = choose_forms(model, cmsis_nn=True, cpu=cpu)  # the package's rules for the class
    untuned = choose_forms(model, cmsis_nn=True)  # --cmsis-nn without --board: default class
    redone = choose_forms(model, cmsis_nn=True, cpu=cpu, measured=again.measured)
    operators = {op.index: op for op in model.operators}
    chosen: List[Dict[str, Any]] = []
    for index, counts in sorted(first.measured.items()):
        chosen.append({
            "index": index, "operator": operators[index].name,
            "signature": signature(model, operators[index]), "instructions": counts,
            "tuned": tuned.wanted[index], "rule": ruled.wanted[index],
            "untuned": untuned.wanted[index],
        })  # fmt: skip
    return {
        "board": board,
        "model": model_path.stem,
        "cpu": cpu,
        "tune_seconds": round(first.seconds, 1),
        "builds": len(first.builds),
        "figures": first.fresh,
        "cached_seconds": round(again.seconds, 3),
        "cached_builds": len(again.builds),
        "same_choice": redone.wanted == tuned.wanted,
        "tuned_sum": sum(c["instructions"][c["tuned"]] for c in chosen),
        "rules_sum": sum(c["instructions"][c["rule"]] for c in chosen),
        "untuned_sum": sum(c["instructions"][c["untuned"]] for c in chosen),
        "forms": ", ".join(f"{c['index']} {c['operator']} {c['tuned']}" for c in chosen),
        "operators": chosen,
    }


def write_rules(rows: Sequence[Dict[str, Any]], path: Path = RULES) -> None:
    """Merges the rows' measurements into the rules table: per CPU class, per operator kind,
    one rule per signature (the fewest instructions measured, and the figures)."""
    table = json.loads(path.read_text(encoding="utf-8"))
    for row in rows:
        entry = table["classes"].setdefault(row["cpu"], {"operators": {}})
        entry["about"] = (
            f"measured on {row['board']} with compile --tune on KWS and AD01 (bench/tune.py "
            "--write-rules [--model], CMSIS-NN v7.0.0)"
        )
        for op in row["operators"]:
            kind = entry["operators"].setdefault(op["operator"], {})
            kind.setdefault("signatures", {})[op["signature"]] = {
                "form": op["tuned"],
                "instructions": op["instructions"],
            }
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _checkout(ctx: Optional[Context]) -> Path:
    from bench.onboard import checkout_cmsis_nn
    from project_api.compile.forms import CMSIS_NN_DEPENDENCY

    if ctx is None:
        import tempfile

        ctx = Context(smoke=False, work=Path(tempfile.mkdtemp(prefix="bench-tune-")), log=print)
    return checkout_cmsis_nn(ctx, CMSIS_NN_DEPENDENCY["version_spec"])


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    if not KWS.is_file():
        raise Skip(f"needs {KWS}")
    tree = _checkout(ctx)
    rows: List[Dict[str, Any]] = []
    for board in (AN386,) if ctx.smoke else BOARDS:
        row = tune_board(tree, board, ctx.scratch(f"tune_cache_{board}"), ctx.log)
        ctx.log(f"  {board}: tuned in {row['tune_seconds']} s, chose {row['forms']}")
        rows.append({k: v for k, v in row.items() if k != "operators"})
    result.rows = rows
    an386 = next(r for r in rows if r["board"] == AN386)
    result.summary = {
        "an386_tune_seconds": an386["tune_seconds"],
        "an386_cached_seconds": an386["cached_seconds"],
        "repeatable": all(r["same_choice"] and r["cached_builds"] == 0 for r in rows),
    }


PART = Part(
    "tune",
    "23. compile --tune: KWS tuned per board (issue 43)",
    run,
    (
        "board",
        "cpu",
        "tune_seconds",
        "builds",
        "figures",
        "cached_seconds",
        "same_choice",
        "tuned_sum",
        "rules_sum",
        "forms",
    ),  # fmt: skip
    (
        Target(
            "a second --tune builds nothing and chooses the same",
            lambda s: (
                f"an386 tuned in {s.get('an386_tune_seconds')} s, "
                f"again in {s.get('an386_cached_seconds')} s"
            ),
            "repeatable",
        ),
    ),
)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-rules", action="store_true", help="write rules/forms.json")
    parser.add_argument("--boards", default=",".join(BOARDS))
    parser.add_argument("--model", type=Path, default=KWS, help="the .tflite (default: KWS)")
    args = parser.parse_args(argv)
    tree = _checkout(None)
    import tempfile

    rows = []
    for board in args.boards.split(","):
        cache = Path(tempfile.mkdtemp(prefix=f"tune-{board}-"))
        row = tune_board(tree, board, cache, model_path=args.model)
        print(json.dumps({k: v for k, v in row.items() if k != "operators"}))
        rows.append(row)
    if args.write_rules:
        write_rules(rows)
        print(f"wrote {RULES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
