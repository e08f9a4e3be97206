"""``mlf-project mlperf``: accuracy and performance runs of the real KWS archives (graph and
AOT) on the host and on qemu-mps2-an385 (instruction counts under -icount), datasets as .npz
and as EEMBC folders, results against the reference, and what footprint counts for an
mlperftiny firmware."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from conftest import requires_arm
from mlperf_support import dataset, kws_archive, mlperftiny_project, reference, reference_values

from project_api.cli import main
from project_api.footprint import footprint
from project_api.report.mlperf import load_dataset

pytestmark = pytest.mark.slow


def mlperf(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, Dict[str, Any], str]:
    status = main(["mlperf", *map(str, argv), "--json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if captured.out.strip() else {}, captured.err


@pytest.mark.parametrize("form", ["graph", "aot"])
def test_accuracy_on_the_host_equals_the_reference(
    form: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = dataset(tmp_path / "kws.npz", form, labels=[9])
    status, doc, _ = mlperf(capsys, kws_archive(form), "--mode", "accuracy", "--dataset", data)
    assert status == 0
    assert doc["mode"] == "accuracy" and doc["benchmark"] == "kws01" and doc["board"] == "host"
    [sample] = doc["samples"]
    assert sample["results"] == reference_values(form)
    assert sample["matches_reference"] is True and sample["top1"] == 9
    assert doc["reference"] == {"compared": 1, "matching": 1}
    assert doc["accuracy"] == {"top1": 1.0, "correct": 1, "labelled": 1}
    assert doc["latency_us"] > 0


@pytest.mark.parametrize("form", ["graph", "aot"])
def test_performance_on_the_host(form: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = dataset(tmp_path / "kws.npz", form)
    project = mlperftiny_project(form)
    status, doc, _ = mlperf(
        capsys, project.dir, "--dataset", data, "--iterations", 4, "--warmups", 1, "--windows", 3
    )
    assert status == 0
    perf = doc["performance"]
    assert perf["windows"] == 3 and perf["iterations"] == 4 and perf["warmups"] == 1
    assert perf["throughput_inf_per_s"] > 0
    assert perf["latency_us"] == pytest.approx(1e6 / perf["throughput_inf_per_s"])
    assert perf["latency_instructions"] is None  # the host counts time, not instructions
    assert [w["results"] for w in doc["windows"]] == [reference_values(form)] * 3
    assert doc["reference"] == {"compared": 3, "matching": 3}
    assert any("at least 10 s" in note for note in doc["notes"])


def test_a_result_unlike_the_reference_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = dataset(tmp_path / "wrong.npz", "graph", wrong=True)
    project = mlperftiny_project("graph")
    status, doc, _ = mlperf(capsys, project.dir, "--mode", "accuracy", "--dataset", data)
    assert status == 1 and doc["samples"][0]["matches_reference"] is False
    # The table says so too.
    assert main(["mlperf", str(project.dir), "--mode", "accuracy", "--dataset", str(data)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS" in out and "0 of 1 results equal the reference" in out


def test_an_eembc_dataset_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = reference("graph")[0]
    folder = tmp_path / "kws01"
    folder.mkdir()
    (folder / "a.bin").write_bytes(data)
    (folder / "b.bin").write_bytes(bytes(len(data)))
    (folder / "y_labels.csv").write_text("a.bin, 12, 9\nb.bin, 12, 3\n")
    project = mlperftiny_project("graph")
    status, doc, _ = mlperf(capsys, project.dir, "--mode", "accuracy", "--dataset", folder)
    assert status == 0
    assert [s["sample"] for s in doc["samples"]] == ["a.bin", "b.bin"]
    assert doc["samples"][0]["results"] == reference_values("graph")
    assert doc["accuracy"]["labelled"] == 2 and doc["reference"] is None
    (folder / "y_labels.csv").write_text("a.bin, 12, 9\nshort.bin, 12, 1\n")
    (folder / "short.bin").write_bytes(b"\0" * 10)
    status, _, err = mlperf(capsys, project.dir, "--mode", "accuracy", "--dataset", folder)
    assert status == 2 and "10 bytes; the model's input is 490 bytes" in err


def test_datasets_that_do_not_fit_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    project = mlperftiny_project("graph")
    model = project.models[0]
    np.savez(tmp_path / "bad.npz", input_1=np.zeros((2, 49, 10), np.int8))
    status, _, err = mlperf(capsys, project.dir, "--dataset", tmp_path / "bad.npz")
    assert status == 2 and "shape" in err
    inputs = np.load(kws_archive("graph").with_suffix(".inputs.npz"))["input_1"]
    np.savez(tmp_path / "many.npz", features=np.stack([inputs, inputs]), labels=[1, 2])
    loaded = load_dataset(str(tmp_path / "many.npz"), model)  # one input: any key will do
    assert [s.label for s in loaded.samples] == [1, 2] and loaded.samples[
        1
    ].data == inputs.tobytes()
    np.savez(tmp_path / "labels.npz", input_1=inputs, labels=[1, 2])
    status, _, err = mlperf(capsys, project.dir, "--dataset", tmp_path / "labels.npz")
    assert status == 2 and "2 labels for 1 samples" in err
    status = main(["mlperf", str(project.dir), "--iterations", "0"])
    assert status == 2 and "--iterations must be at least 1" in capsys.readouterr().err


def test_footprint_counts_the_mlperftiny_loop_and_input_buffer() -> None:
    project = mlperftiny_project("graph")
    report = footprint(project.dir, estimate=False).to_json()
    assert report["project_type"] == "mlperftiny"
    text = footprint(project.dir, estimate=False).text()
    assert "receive buffer" in text
    planned = footprint(kws_archive("graph"), board="host", estimate=False)
    assert planned.planned_ram["rx buffer"] == 65535 + 10  # host_driven's frame buffer
    tiny = footprint(
        kws_archive("graph"), board="qemu-mps2-an385", estimate=False, project_type="mlperftiny"
    )
    assert tiny.planned_ram["rx buffer"] == 490  # the input db loads


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize(
    "form, board",
    [("graph", "qemu-mps2-an385"), ("aot", "qemu-mps2-an385"), ("graph", "qemu-netduinoplus2")],
)
def test_performance_and_accuracy_on_qemu(
    form: str, board: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = dataset(tmp_path / "kws.npz", form, labels=[9])
    project = mlperftiny_project(form, board)
    status, doc, _ = mlperf(
        capsys, project.dir, "--icount", "--dataset", data, "--iterations", 3, "--warmups", 1
    )
    assert status == 0 and doc["board"] == board
    perf = doc["performance"]
    # KWS is about 21.6 million Cortex-M3 (21.9 million Cortex-M4F) instructions per
    # inference, exactly the same in every window under -icount (the netduinoplus2's TIM2
    # counts each one).
    assert 20e6 < perf["latency_instructions"] < 23e6
    assert len({w["instructions"] for w in doc["windows"]}) == 1
    assert perf["latency_us"] == pytest.approx(perf["latency_instructions"] / 1000, rel=1e-3)
    assert [w["results"] for w in doc["windows"]] == [reference_values(form)] * 5
    status, doc, _ = mlperf(
        capsys, project.dir, "--icount", "--mode", "accuracy", "--dataset", data
    )
    assert status == 0 and doc["reference"] == {"compared": 1, "matching": 1}
    assert 20e6 < doc["samples"][0]["latency_instructions"] < 23e6
