"""An export's C compiles for CPUs the project has no board for (issue 44): an Xtensa core
(Debian's ``gcc-xtensa-lx106`` with ``picolibc-xtensa-lx106-elf``, the ESP8266's) and 32-bit
x86 (``gcc -m32``, from ``gcc-multilib``). Compile only: the export's sources, taken from its
Make fragment with the fragment's own flags and the compiler's, ``-std=c99 -Wall -Wextra
-Werror``. (A ``-m32`` firmware that runs: test_export_firmware.py's ``host-m32``.)

Two exports of the smallest real archive: the portable one (no ``--cpu``) and one made for a
CPU (``--cpu cortex-m0``, no CMSIS-NN), which is just as portable: its fragment carries no
``-mcpu``/``-mthumb``/``-mfloat-abi`` and its arena size is chosen by ``UINTPTR_MAX``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from conftest import corpus_archive

from project_api.cli import main

NAME = "mlp"
MAKEFILE = """\
include $(EXPORT)/{name}.mk
OBJS := $(patsubst %.c,$(OUT)/%.o,$(notdir $({upper}_SRCS)))
vpath %.c $(sort $(dir $({upper}_SRCS)))
all: $(OBJS)
$(OUT)/%.o: %.c
\t$(CC) $(CFLAGS) $({upper}_INCLUDES) $({upper}_CFLAGS) -c $< -o $@
"""


def xtensa() -> Optional[List[str]]:
    """xtensa-lx106-elf-gcc with picolibc (its specs file is not on GCC's search path: it is
    named by its full path), or None when either is missing."""
    gcc = shutil.which("xtensa-lx106-elf-gcc")
    if gcc is None:
        return None
    specs = Path(gcc).resolve().parent.parent / "lib" / "xtensa-lx106-elf" / "picolibc.specs"
    return [gcc, f"--specs={specs}"] if specs.is_file() else None


def m32() -> Optional[List[str]]:
    """gcc -m32, when gcc-multilib's 32-bit C library is there to compile against."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    probe = subprocess.run(
        [gcc, "-m32", "-x", "c", "-c", "-o", "/dev/null", "-"],
        input="#include <stdint.h>\n#include <string.h>\n",
        capture_output=True,
        text=True,
    )
    return [gcc, "-m32"] if probe.returncode == 0 else None


COMPILERS = {
    "xtensa-lx106": (
        xtensa,
        "needs xtensa-lx106-elf-gcc and picolibc (apt-get install gcc-xtensa-lx106 "
        "picolibc-xtensa-lx106-elf)",
    ),
    "m32": (m32, "needs gcc -m32 (apt-get install gcc-multilib)"),
}
EXPORTS = {"portable": [], "cpu": ["--cpu", "cortex-m0"]}


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    archive = corpus_archive("mlp_default")
    if archive is None:
        pytest.skip("corpus archive mlp_default.tar is absent (set MLF_PROJECT_CORPUS)")
    root = tmp_path_factory.mktemp("exports")
    made = {}
    for kind, flags in EXPORTS.items():
        target = root / kind
        status = main(["export", str(archive), str(target), "--name", NAME, "--format", "make",
                       *flags])  # fmt: skip
        assert status == 0, kind
        described = json.loads((target / "export.json").read_text())
        assert described["kind"] == kind  # the cpu one is CPU-specific: the claim is its C
        made[kind] = target
    return made


@pytest.mark.parametrize("kind", list(EXPORTS))
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_export_compiles_for_a_cpu_without_a_board(
    compiler: str, kind: str, exports: Dict[str, Path], tmp_path: Path
) -> None:
    find, missing = COMPILERS[compiler]
    command = find()
    if command is None:
        pytest.skip(missing)
    export = exports[kind]
    (tmp_path / "Makefile").write_text(MAKEFILE.format(name=NAME, upper=NAME.upper()))
    out = tmp_path / "obj"
    out.mkdir()
    result = subprocess.run(
        ["make", "-s", "-C", str(tmp_path), f"EXPORT={export}", f"OUT={out}",
         f"CC={' '.join(command)}", "CFLAGS=-std=c99 -O2 -Wall -Wextra -Werror"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, f"{kind} export with {compiler}: {result.stderr[-2000:]}"
    objects = sorted(out.glob("*.o"))
    # the model's C, its parameters and the runtime's: every source the fragment lists
    assert len(objects) >= 5 and any(o.name == f"{NAME}.o" for o in objects), objects
