"""MLPerf Tiny runs of an ``mlperftiny`` firmware, the way the benchmark's runner does them.

- **Accuracy**: every sample of the dataset is loaded (``db``, 31 bytes per command) and run
  once (``infer 1 0``); its results are checked against the label (top-1: the index of the
  largest value of the first output) and against reference outputs when the dataset has them.
- **Performance**: ``windows`` times (5 in MLPerf Tiny), the next sample is loaded and
  ``infer N W`` runs N timed inferences after W warm-ups; a window's throughput is N over the
  time between its two timestamps, and the score is the **median** over the windows, as the
  rules ask. Under QEMU ``-icount`` the firmware's tick lines make that an exact instruction
  count as well.

Datasets (:func:`load_dataset`): an ``.npz`` keyed by input name (one sample per row, as
``sample_inputs`` takes them) with optional ``labels`` and reference ``output0..N-1``; an
EEMBC dataset directory (``y_labels.csv`` naming one binary file per sample and its class); or
nothing (one deterministic random sample).
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from ..transport.eembc import EembcDevice, InferResult, Number

MODES = ("performance", "accuracy")
WINDOWS = 5  # performance windows, each on the next sample (MLPerf Tiny's runner)
# (inferences, warm-ups) per window of the runner's performance scripts, by benchmark.
RUNNER_COUNTS = {"kws01": (70, 10), "vww01": (20, 5), "ic01": (20, 5), "ad01": (1500, 10)}
DEFAULT_COUNTS = (10, 1)
MIN_WINDOW_SECONDS = 10.0  # what the rules ask of a performance window
LABEL_KEYS = ("labels", "label", "y")
RTOL, ATOL = 1e-5, 1e-6  # float outputs against a reference


@dataclass
class Sample:
    """One input for ``db``: the model's inputs back to back, little-endian."""

    name: str
    data: bytes
    label: Optional[int] = None
    reference: Optional[List[np.ndarray]] = None  # expected outputs, in output order


@dataclass
class Dataset:
    source: str
    samples: List[Sample]


def _model_view(model: Mapping[str, Any]) -> Any:
    """project.json's description of a model, shaped like read.Model for generate.samples."""
    specs = [SimpleNamespace(**s) for s in model["inputs"]]
    outputs = [SimpleNamespace(**s) for s in model["outputs"]]
    return SimpleNamespace(name=model["name"], inputs=specs, outputs=outputs)


def load_dataset(path: Optional[str], model: Mapping[str, Any]) -> Dataset:
    """The samples in ``path`` for ``model`` (project.json's description); one deterministic
    random sample without a path. InputError when they do not fit the model."""
    from ..generate.samples import from_arrays, le_bytes, random_samples
    from ..npfiles import load_arrays

    view = _model_view(model)
    if path is None:
        sampled = random_samples(view)
        return Dataset(sampled.source, [Sample("0", b"".join(map(le_bytes, sampled.inputs[0])))])
    where = Path(path)
    if where.is_dir():
        return _eembc_dataset(where, sum(_nbytes(s) for s in model["inputs"]))
    loaded = load_arrays(where, what="dataset", error=InputError)
    if isinstance(loaded, dict):
        arrays = loaded
    elif len(view.inputs) != 1:
        raise InputError(f"{where}: a .npy holds one array; the model takes several inputs")
    else:
        arrays = {view.inputs[0].name: loaded}
    label_key = next((k for k in LABEL_KEYS if k in arrays), None)
    outputs = {k: v for k, v in arrays.items() if k.startswith("output")}
    inputs = {k: v for k, v in arrays.items() if k != label_key and k not in outputs}
    if len(view.inputs) == 1 and view.inputs[0].name not in inputs and len(inputs) == 1:
        inputs = {view.inputs[0].name: next(iter(inputs.values()))}  # one input, any key
    sampled = from_arrays(view, inputs, outputs, str(where))
    labels: Sequence[Optional[int]] = [None] * sampled.count
    if label_key is not None:
        flat = np.asarray(arrays[label_key]).reshape(-1)
        if flat.size != sampled.count:
            raise InputError(
                f"{where}: {label_key} holds {flat.size} labels for {sampled.count} samples"
            )
        labels = [int(v) for v in flat]
    samples = [
        Sample(str(k), b"".join(map(le_bytes, ins)), labels[k], expected)
        for k, (ins, expected) in enumerate(zip(sampled.inputs, sampled.expected))
    ]
    return Dataset(str(where), samples)


def _nbytes(spec: Mapping[str, Any]) -> int:
    from ..read import TensorSpec

    return TensorSpec(spec["name"], tuple(spec["shape"]), spec["dtype"]).nbytes


def _eembc_dataset(folder: Path, input_bytes: int) -> Dataset:
    """An EEMBC dataset folder: y_labels.csv rows ``file, classes, class[, ...]``."""
    truth = folder / "y_labels.csv"
    if not truth.is_file():
        raise InputError(f"{folder}: no y_labels.csv (an EEMBC dataset folder has one)")
    samples = []
    with truth.open(newline="") as handle:
        for row in csv.reader(handle):
            if not row or not row[0].strip():
                continue
            file = folder / row[0].strip()
            try:
                data = file.read_bytes()
            except OSError as err:
                raise InputError(f"{truth}: cannot read {file.name}: {err}") from None
            if len(data) != input_bytes:
                raise InputError(
                    f"{file}: {len(data)} bytes; the model's input is {input_bytes} bytes"
                )
            label = int(row[2]) if len(row) > 2 and row[2].strip().lstrip("-").isdigit() else None
            samples.append(Sample(file.name, data, label))
    if not samples:
        raise InputError(f"{truth} names no files")
    return Dataset(str(folder), samples)


# --- what the device's results should be -------------------------------------------------------


def expected_results(
    reference: Sequence[np.ndarray], scale: Optional[float], zero_point: Optional[int]
) -> List[Number]:
    """The values an ``m-results-`` line should hold for reference outputs: integers as they
    are, or dequantized in float32 as the firmware does; floats as they are."""
    values: List[Number] = []
    for array in reference:
        flat = np.asarray(array).reshape(-1)
        if flat.dtype.kind in "iub" and scale is not None:
            shifted = (flat.astype(np.int64) - int(zero_point or 0)).astype(np.float32)
            values += [float(v) for v in shifted * np.float32(scale)]
        elif flat.dtype.kind in "iub":
            values += [int(v) for v in flat]
        else:
            values += [float(v) for v in flat]
    return values


def same_results(got: Sequence[Number], want: Sequence[Number]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if isinstance(w, int) and not isinstance(g, float):
            if g != w:
                return False
        elif not (
            (np.isnan(g) and np.isnan(w)) or abs(float(g) - float(w)) <= ATOL + RTOL * abs(w)
        ):
            return False
    return True


def top1(results: Sequence[Number], first_output_size: int) -> Optional[int]:
    """Index of the largest value of the first output (None without values)."""
    head = list(results[: max(first_output_size, 0)] or results)
    return int(np.argmax(np.asarray(head, dtype=np.float64))) if head else None


# --- the runs ------------------------------------------------------------------------------------


@dataclass
class SampleRun:
    """One sample through ``infer``: its results and how they compare."""

    index: int
    sample: str
    results: List[Number]
    elapsed_us: Optional[int]
    elapsed_ticks: Optional[int]
    label: Optional[int] = None
    top1: Optional[int] = None
    matches_reference: Optional[bool] = None

    @property
    def correct(self) -> Optional[bool]:
        return None if self.label is None else self.top1 == self.label


@dataclass
class Window:
    """One performance window: ``iterations`` timed inferences after ``warmups``."""

    run: SampleRun
    iterations: int
    warmups: int
    host_seconds: float
    instructions: Optional[int] = None  # the whole window, QEMU -icount

    @property
    def seconds(self) -> Optional[float]:
        us = self.run.elapsed_us
        return None if us is None else us / 1e6

    @property
    def throughput(self) -> Optional[float]:
        seconds = self.seconds
        return self.iterations / seconds if seconds else None


@dataclass
class MlperfReport:
    """What ``mlf-project mlperf`` found; :meth:`text` and :meth:`to_json` present it."""

    mode: str
    board: str
    model: str
    benchmark: str
    device_name: str
    profile: str
    dataset: str
    samples: List[SampleRun] = field(default_factory=list)
    windows: List[Window] = field(default_factory=list)
    ticks_to_instructions: Optional[float] = None
    notes: List[str] = field(default_factory=list)

    # statistics ------------------------------------------------------------------------------

    def accuracy(self) -> Optional[Dict[str, Any]]:
        labelled = [s for s in self.samples if s.label is not None]
        if not labelled:
            return None
        correct = sum(1 for s in labelled if s.correct)
        return {"top1": correct / len(labelled), "correct": correct, "labelled": len(labelled)}

    def reference(self) -> Optional[Dict[str, int]]:
        runs = self.samples + [w.run for w in self.windows]
        compared = [run for run in runs if run.matches_reference is not None]
        if not compared:
            return None
        matching = sum(1 for run in compared if run.matches_reference)
        return {"compared": len(compared), "matching": matching}

    def performance(self) -> Optional[Dict[str, Any]]:
        rates = [w.throughput for w in self.windows if w.throughput]
        if not rates:
            return None
        throughput = statistics.median(rates)
        per = [w.instructions / w.iterations for w in self.windows if w.instructions is not None]
        seconds = [w.seconds for w in self.windows if w.seconds is not None]
        return {
            "windows": len(self.windows),
            "iterations": self.windows[0].iterations,
            "warmups": self.windows[0].warmups,
            "throughput_inf_per_s": throughput,
            "latency_us": 1e6 / throughput,
            "latency_instructions": statistics.median(per) if per else None,
            "shortest_window_s": min(seconds) if seconds else None,
        }

    def latency_us(self) -> Optional[float]:
        """Median µs of one inference over the accuracy runs."""
        us = [s.elapsed_us for s in self.samples if s.elapsed_us is not None]
        return statistics.median(us) if us else None

    def failed(self) -> bool:
        """Whether an output differed from its reference."""
        runs = self.samples + [w.run for w in self.windows]
        return any(run.matches_reference is False for run in runs)

    # presentation --------------------------------------------------------------------------

    def to_json(self) -> Dict[str, Any]:
        return {
            "mode": self.mode,
            "board": self.board,
            "model": self.model,
            "benchmark": self.benchmark,
            "device_name": self.device_name,
            "profile": self.profile,
            "dataset": self.dataset,
            "accuracy": self.accuracy(),
            "reference": self.reference(),
            "performance": self.performance(),
            "latency_us": self.latency_us(),
            "samples": [_sample_json(s, self.ticks_to_instructions) for s in self.samples],
            "windows": [
                {
                    "sample": w.run.sample,
                    "iterations": w.iterations,
                    "warmups": w.warmups,
                    "elapsed_us": w.run.elapsed_us,
                    "elapsed_ticks": w.run.elapsed_ticks,
                    "instructions": w.instructions,
                    "throughput_inf_per_s": w.throughput,
                    "host_seconds": w.host_seconds,
                    "matches_reference": w.run.matches_reference,
                    "results": w.run.results,
                }
                for w in self.windows
            ],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        head = (
            f"MLPerf Tiny {self.benchmark} (model {self.model}, device {self.device_name}) on "
            f"{self.board}: {self.mode} mode, dataset {self.dataset}"
        )
        lines = [head]
        lines += _windows_table(self) if self.windows else _samples_table(self)
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def _sample_json(run: SampleRun, factor: Optional[float]) -> Dict[str, Any]:
    return {
        "index": run.index,
        "sample": run.sample,
        "results": run.results,
        "top1": run.top1,
        "label": run.label,
        "correct": run.correct,
        "matches_reference": run.matches_reference,
        "latency_us": run.elapsed_us,
        "latency_ticks": run.elapsed_ticks,
        "latency_instructions": None
        if factor is None or run.elapsed_ticks is None
        else int(round(run.elapsed_ticks * factor)),
    }


def _verdict(value: Optional[bool]) -> str:
    return "-" if value is None else "match" if value else "DIFFERS"


def _samples_table(report: MlperfReport) -> List[str]:
    lines = [f"{'sample':<12}{'label':>6}{'top-1':>7}{'µs':>12}  {'reference':<10}results"]
    for run in report.samples:
        shown = ",".join(str(v) for v in run.results[:12]) + (
            ",..." if len(run.results) > 12 else ""
        )
        lines.append(
            f"{run.sample[:12]:<12}{'-' if run.label is None else run.label:>6}"
            f"{'-' if run.top1 is None else run.top1:>7}"
            f"{'-' if run.elapsed_us is None else run.elapsed_us:>12}  "
            f"{_verdict(run.matches_reference):<10}[{shown}]"
        )
    summary = []
    accuracy, reference = report.accuracy(), report.reference()
    if accuracy:
        summary.append(
            f"top-1 accuracy {100 * accuracy['top1']:.2f} % "
            f"({accuracy['correct']} of {accuracy['labelled']} labelled samples)"
        )
    if reference:
        summary.append(
            f"{reference['matching']} of {reference['compared']} results equal the reference"
        )
    if report.latency_us() is not None:
        summary.append(f"median latency {report.latency_us():,.0f} µs")
    return lines + ["; ".join(summary)] if summary else lines


def _windows_table(report: MlperfReport) -> List[str]:
    lines = [
        f"{'window':<8}{'sample':<10}{'N':>6}{'W':>4}{'elapsed µs':>14}{'inf/s':>12}"
        f"{'instructions/inf':>18}  reference"
    ]
    for number, w in enumerate(report.windows, 1):
        per = "-" if w.instructions is None else f"{w.instructions / w.iterations:,.0f}"
        rate = "-" if w.throughput is None else f"{w.throughput:.3f}"
        lines.append(
            f"{number:<8}{w.run.sample[:10]:<10}{w.iterations:>6}{w.warmups:>4}"
            f"{'-' if w.run.elapsed_us is None else w.run.elapsed_us:>14,}{rate:>12}{per:>18}"
            f"  {_verdict(w.run.matches_reference)}"
        )
    perf = report.performance()
    if perf:
        line = (
            f"median throughput {perf['throughput_inf_per_s']:.3f} inferences/s, latency "
            f"{perf['latency_us']:,.1f} µs"
        )
        if perf["latency_instructions"] is not None:
            line += f" ({perf['latency_instructions']:,.0f} instructions)"
        lines.append(line)
    return lines


# --- driving the device -----------------------------------------------------------------------


@dataclass
class Expectations:
    """How results are judged: the output layout and dequantization of the firmware."""

    first_output_size: int
    output_scale: Optional[float] = None
    output_zero_point: Optional[int] = None

    def judge(self, run: SampleRun, sample: Sample) -> None:
        run.label = sample.label
        run.top1 = top1(run.results, self.first_output_size)
        if sample.reference is not None:
            want = expected_results(sample.reference, self.output_scale, self.output_zero_point)
            run.matches_reference = same_results(run.results, want)


def _sample_run(index: int, sample: Sample, result: InferResult) -> SampleRun:
    return SampleRun(index, sample.name, result.results, result.elapsed_us, result.elapsed_ticks)


def run_accuracy(
    device: EembcDevice,
    dataset: Dataset,
    expect: Expectations,
    *,
    run_timeout: float,
    limit: Optional[int] = None,
) -> List[SampleRun]:
    """Every sample (the first ``limit``) loaded and run once."""
    runs = []
    for index, sample in enumerate(dataset.samples[:limit]):
        device.load(sample.data)
        run = _sample_run(index, sample, device.infer(1, 0, timeout=run_timeout))
        expect.judge(run, sample)
        runs.append(run)
    return runs


def run_performance(
    device: EembcDevice,
    dataset: Dataset,
    expect: Expectations,
    counts: Tuple[int, int],
    *,
    windows: int = WINDOWS,
    run_timeout: float,
) -> List[Window]:
    """``windows`` windows of ``infer N W`` (counts = (N, W)), each on the next sample. The
    first sample's single run sets the time-out of a window."""
    iterations, warmups = counts
    device.load(dataset.samples[0].data)
    probe = device.infer(1, 0, timeout=run_timeout)
    timeout = max(run_timeout, 3.0 * (iterations + warmups) * probe.host_seconds + 10.0)
    result: List[Window] = []
    for number in range(windows):
        index = number % len(dataset.samples)
        sample = dataset.samples[index]
        device.load(sample.data)
        infer = device.infer(iterations, warmups, timeout=timeout)
        run = _sample_run(index, sample, infer)
        expect.judge(run, sample)
        ticks, factor = infer.elapsed_ticks, device.ticks_to_instructions
        instructions = None if ticks is None or factor is None else int(round(ticks * factor))
        result.append(Window(run, iterations, warmups, infer.host_seconds, instructions))
    return result
