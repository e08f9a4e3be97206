"""``mlf-project matrix``: archives × boards in parallel, checked against the references
beside each archive, as a table, JSON and JUnit XML; a failing or broken cell is reported,
never a crash."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import List, Optional

import numpy as np
import pytest
from conftest import have_tool

from project_api.cli import main
from project_api.modelgen import catalog

pytestmark = pytest.mark.slow
QEMU = have_tool("qemu-system-arm") and have_tool("arm-none-eabi-gcc")


def archive_with_references(root: Path, name: str, *, wrong: bool = False) -> Path:
    model = catalog()[name]()
    archive = model.write(root / f"{name}.tar")
    inputs = model.sample_inputs()
    expected = model.reference(inputs)
    if wrong:
        expected = {k: np.asarray(v) + 1 for k, v in expected.items()}
    np.savez(root / f"{name}.inputs.npz", **inputs)
    np.savez(root / f"{name}.outputs.npz", **expected)
    return archive


def test_every_archive_on_every_board(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    archives = [archive_with_references(tmp_path, n) for n in ("scalar", "mlp")]
    boards: List[str] = ["host"] + (["qemu-mps2-an385"] if QEMU else [])
    argv = ["matrix", *map(str, archives), "--jobs", "2", "--json", "--icount"]
    argv += [a for b in boards for a in ("--board", b)]
    argv += ["--junit", str(tmp_path / "junit.xml"), "--work", str(tmp_path / "work")]
    assert main(argv) == 0
    cells = json.loads(capsys.readouterr().out)
    assert [(Path(c["archive"]).name, c["target"]) for c in cells] == [
        (a.name, b) for a in archives for b in boards
    ]
    assert {c["status"] for c in cells} == {"pass"}
    for cell in cells:
        assert cell["flash_bytes"] > 0 and cell["ram_bytes"] > 0
        assert (cell["instructions"] is not None) == cell["target"].startswith("qemu")
    root = ElementTree.parse(tmp_path / "junit.xml").getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == boards
    assert all(s.get("tests") == "2" and s.get("failures") == "0" for s in suites)


def test_a_wrong_reference_fails_its_cell(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = archive_with_references(tmp_path, "scalar")
    bad = archive_with_references(tmp_path, "mlp", wrong=True)
    broken = tmp_path / "broken.tar"
    broken.write_bytes(b"not a tar at all")
    argv = ["matrix", str(good), str(bad), str(broken), "--board", "host"]
    status = main(argv + ["--junit", str(tmp_path / "j.xml")])
    out = capsys.readouterr().out
    assert status == 1
    lines = {line.split()[0]: line.split()[2] for line in out.splitlines()[1:4]}
    assert lines == {"scalar.tar": "pass", "mlp.tar": "fail", "broken.tar": "error"}
    assert "broken.tar on host: error:" in out
    suite = ElementTree.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("failures"), suite.get("errors")) == ("1", "1")


def test_bad_targets_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    archive = archive_with_references(tmp_path, "scalar")
    assert main(["matrix", str(archive)]) == 2
    assert main(["matrix", str(archive), "--labgrid", "place-without-board"]) == 2
    assert main(["matrix", str(tmp_path / "missing.tar"), "--board", "host"]) == 2
    err = capsys.readouterr().err
    assert "no targets" in err and "want PLACE=BOARD" in err and "no such archive" in err


def test_cmsis_nn_cells_run_with_the_dependency_given_once(
    tmp_path: Path, capsys: pytest.CaptureFixture, cmsis_nn_checkout: Optional[Path]
) -> None:
    """--cmsis-path (like -o and --dependency) applies to every cell: the CMSIS-NN archive
    runs against its references, the plain one beside it is unaffected."""
    from conftest import CMSIS_NN_SKIP, corpus_archive

    cmsis, plain = corpus_archive("kws_int8_cmsisnn"), corpus_archive("mlp_default")
    if cmsis is None or plain is None:
        pytest.skip("needs the real-TVM corpus (kws_int8_cmsisnn, mlp_default)")
    if cmsis_nn_checkout is None:
        pytest.skip(CMSIS_NN_SKIP)
    argv = ["matrix", str(cmsis), str(plain), "--board", "host", "--json"]
    status = main(argv + ["--cmsis-path", str(cmsis_nn_checkout)])
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert [cell["status"] for cell in json.loads(out)] == ["pass", "pass"]
