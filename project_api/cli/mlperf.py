"""``mlf-project mlperf ARCHIVE_OR_PROJECT``: MLPerf Tiny accuracy or performance runs of a
model, driving an ``mlperftiny`` firmware over the benchmark protocol as the EEMBC runner does
(docs/mlperftiny.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..errors import InputError
from .command import EXIT_FAILURE, EXIT_OK
from .run import RunCommand


class MlperfCommand(RunCommand):
    name = "mlperf"
    project_types = ("mlperftiny",)
    help = "MLPerf Tiny accuracy or performance of a model on a board (the EEMBC protocol)"
    description = (
        "Generate (for an archive) and build an mlperftiny firmware, then drive it like the "
        "MLPerf Tiny runner: each sample loaded with db commands of 31 bytes, then infer. "
        "Accuracy mode runs every sample of --dataset once (infer 1 0) and reports top-1 "
        "against its labels and equality with its reference outputs; performance mode runs "
        "--windows windows of infer N W, each on the next sample, and reports the median "
        "throughput (inferences/s), the latency in µs and, under QEMU with --icount, in "
        "instructions. Exit status 1 when a result differs from the dataset's reference."
    )

    target_help = "an MLF archive or a .tflite, or a generated mlperftiny project"
    icount_help = "QEMU boards: -icount shift=0, so latencies are also exact instruction counts"
    timeout_help = (
        "seconds to wait for each answer (default by board: host 10, QEMU 60, real 30); a "
        "window gets more, from the time of one inference"
    )

    def add_own_arguments(self, parser: argparse.ArgumentParser) -> None:
        from ..report.mlperf import MODES, WINDOWS

        parser.add_argument(
            "--mode", choices=MODES, default="performance", help="default: performance"
        )
        parser.add_argument(
            "--dataset",
            help="samples: an .npz keyed by input name (one sample per row) with optional "
            "'labels' and reference 'output0..', or an EEMBC dataset folder (y_labels.csv); "
            "default: one deterministic random sample",
        )
        parser.add_argument(
            "--iterations",
            type=int,
            help="performance: timed inferences per window (default: the MLPerf Tiny "
            "runner's for the benchmark, e.g. 70 for kws01)",
        )
        parser.add_argument(
            "--warmups", type=int, help="performance: warm-up inferences per window"
        )
        parser.add_argument(
            "--windows",
            type=int,
            default=WINDOWS,
            help=f"performance: windows to take the median of (default {WINDOWS})",
        )
        parser.add_argument("--limit", type=int, help="accuracy: only the first N samples")
        parser.set_defaults(project_type="mlperftiny", input=None, output=None)

    def forced_options(self, args: argparse.Namespace) -> Dict[str, str]:
        for flag in ("iterations", "windows", "limit"):
            value = getattr(args, flag)
            if value is not None and value < 1:
                raise InputError(f"--{flag} must be at least 1, not {value}")
        if args.warmups is not None and args.warmups < 0:
            raise InputError(f"--warmups must be at least 0, not {args.warmups}")
        return {}

    def execute(
        self,
        project: Any,
        planned: Optional[List[Tuple[str, Dict[str, Any]]]],
        timeout: float,
        run_timeout: float,
        args: argparse.Namespace,
    ) -> int:
        from ..report.mlperf import (
            DEFAULT_COUNTS,
            MIN_WINDOW_SECONDS,
            RUNNER_COUNTS,
            Expectations,
            MlperfReport,
            load_dataset,
            run_accuracy,
            run_performance,
        )

        model = project.models[0]
        dataset = load_dataset(args.dataset, model)
        if args.dataset is None:
            print(
                "mlf-project mlperf: no --dataset: one deterministic random sample",
                file=sys.stderr,
            )
        settings = project.info.get("mlperftiny") or {}
        expect = Expectations(
            int(np.prod(model["outputs"][0]["shape"])) if model["outputs"] else 0,
            settings.get("output_scale"),
            settings.get("output_zero_point"),
        )
        with project.benchmark(timeout=timeout) as device:
            name = device.name()
            profile, benchmark = device.profile()
            report = MlperfReport(
                mode=args.mode,
                board=project.board.name,
                model=model["name"],
                benchmark=benchmark,
                device_name=name,
                profile=profile,
                dataset=dataset.source,
                ticks_to_instructions=device.ticks_to_instructions,
            )
            if args.mode == "accuracy":
                report.samples = run_accuracy(
                    device, dataset, expect, run_timeout=run_timeout, limit=args.limit
                )
            else:
                default = RUNNER_COUNTS.get(benchmark, DEFAULT_COUNTS)
                counts = (
                    args.iterations or default[0],
                    default[1] if args.warmups is None else args.warmups,
                )
                report.windows = run_performance(
                    device,
                    dataset,
                    expect,
                    counts,
                    windows=args.windows,
                    run_timeout=run_timeout,
                )
        perf = report.performance()
        shortest = perf["shortest_window_s"] if perf else None
        if shortest is not None and shortest < MIN_WINDOW_SECONDS:
            report.notes.append(
                f"the shortest window took {shortest:.3f} s; MLPerf Tiny asks for at least "
                f"{MIN_WINDOW_SECONDS:g} s (raise --iterations)"
            )
        if project.board.is_qemu and report.ticks_to_instructions is None:
            report.notes.append("QEMU without --icount: times follow the host's clock")
        if args.json:
            print(json.dumps(report.to_json(), indent=2))
        else:
            print(report.text())
        return EXIT_FAILURE if report.failed() else EXIT_OK
