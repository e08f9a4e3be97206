"""Models whose C calls Arm DSP intrinsics (TVM's Cortex-M micro-kernels, built for a target
with ``-mcpu=cortex-m4`` and other DSP cores, include ``arm_acle.h`` and call ``__smlad``
unguarded): refused at generation for boards without DSP, naming the boards that have it;
built and run on one that does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import requires_arm
from mlf_builders import Files, aot_files, aot_reference, write_dir

from project_api.cli import main
from project_api.driver import Project
from project_api.errors import GenerateError
from project_api.modelgen import compare_outputs
from project_api.read import open_archive
from project_api.read.code import uses_arm_dsp

LIB1 = "codegen/host/src/default_lib1.c"
X = np.array([[1.0, 2.5, -3.0, 4.0]], dtype=np.float32)


def dsp_files() -> Files:
    """The AOT test model with a DSP multiply-accumulate (of zeros) in its operator."""
    files = aot_files()
    text = files[LIB1].decode()
    text = text.replace("#include <stdint.h>", "#include <stdint.h>\n#include <arm_acle.h>", 1)
    text = text.replace(
        "T_out[i] = (int8_t)((int)tmp[i % 4] + 0);",
        "T_out[i] = (int8_t)((int)tmp[i % 4] + 0 + (int)__smlad(0u, 0u, 0));",
    )
    assert "__smlad" in text
    files[LIB1] = text.encode()
    return files


def test_dsp_code_is_noticed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    archive = write_dir(tmp_path / "dsp.mlf", dsp_files())
    with open_archive(archive) as opened:
        assert opened.model().arm_dsp
    with open_archive(write_dir(tmp_path / "plain.mlf", aot_files())) as opened:
        assert not opened.model().arm_dsp
    assert main(["info", str(archive)]) == 0
    assert "Arm DSP intrinsics" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text, calls",
    [
        ("#include <stdint.h>\n#include <arm_acle.h>\n", True),
        ("#ifndef ARM_CPU_INTRINSICS_EXIST\n#endif\n#include <arm_acle.h>\n", True),
        ("/*\n#include <arm_acle.h>\n*/\n", False),
        ("#if defined(__ARM_FEATURE_DSP)\n#include <arm_acle.h>\n#endif\n", False),
        ('#ifdef __arm__\n#  include "arm_acle.h"\n#endif\n', False),
    ],
)
def test_only_unguarded_includes_count(text: str, calls: bool) -> None:
    assert uses_arm_dsp([text]) is calls


@pytest.mark.parametrize("board", ["host", "qemu-mps2-an385"])
def test_refused_without_dsp(board: str, tmp_path: Path) -> None:
    archive = write_dir(tmp_path / "dsp.mlf", dsp_files())
    with pytest.raises(GenerateError, match="without the DSP extension") as caught:
        Project.generate(archive, tmp_path / "p", board=board)
    assert "qemu-mps2-an386" in str(caught.value.hint)
    assert not (tmp_path / "p").exists()


@pytest.mark.slow
@pytest.mark.qemu
@requires_arm
def test_runs_on_a_dsp_core(tmp_path: Path) -> None:
    archive = write_dir(tmp_path / "dsp.mlf", dsp_files())
    project = Project.generate(archive, tmp_path / "p", board="qemu-mps2-an386")
    project.build()
    with project.session(timeout=60) as session:
        assert compare_outputs(session.run({"x": X}), aot_reference(X)) == []
