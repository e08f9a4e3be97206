"""The architecture seam: what a board's ``arch`` decides (CPU table, compiler flags, cross
toolchain file, C seam directories, linker script, QEMU binary).

Each architecture is one small module beside this one (:mod:`.host`, :mod:`.arm`,
:mod:`.riscv`); a new one is a new module and one line in :data:`ARCHITECTURES`, not a branch
through the board code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..resources import boards_dir

if TYPE_CHECKING:  # pragma: no cover
    from .schema import TableReader


class Cpu:
    """What every architecture's CPU description answers (the rest is its own)."""

    dsp: bool = False
    mve: bool = False

    @property
    def mve_float(self) -> bool:
        """MVE with its floating-point part in use (what CMSIS-NN's f16 sources need)."""
        return False

    @property
    def core(self) -> str:
        """The core's name, as a sentence would say it (``cortex-m4``)."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """Core and floating-point unit in one short word (``cortex-m4+fpv4-sp-d16``)."""
        raise NotImplementedError

    @property
    def has_fpu(self) -> bool:
        raise NotImplementedError

    def flags(self) -> List[str]:
        """Compiler and linker flags selecting the core."""
        raise NotImplementedError

    def summary(self) -> Dict[str, Any]:
        """The CPU table as JSON (``mlf-project boards --json``)."""
        raise NotImplementedError


class Architecture:
    """One ``arch`` of ``boards/*.toml``. The host is an architecture without a memory map,
    CPU table or cross toolchain."""

    name: str = ""
    is_host: bool = False
    qemu_binary: Optional[str] = None
    qemu_package: Optional[str] = None  # the Debian package of qemu_binary
    compiler: str = "cc"  # the C compiler's program name
    compiler_packages: str = ""  # the Debian packages of compiler and its C library
    # What a compile outside the project's build (the footprint estimate) needs besides the
    # CPU flags to find the C library, as the toolchain file gives it to the build.
    library_flags: Tuple[str, ...] = ()
    # Added to -Os for our C (runtime, firmware loop, board seam) on a microcontroller.
    size_flags: Tuple[str, ...] = ()
    console_kinds: Tuple[str, ...] = ()
    timer_kinds: Tuple[str, ...] = ()
    # Whether CMSIS-NN's kernels may be built for it (Arm's library: its portable C runs
    # anywhere, but the project builds it only where TVM's CMSIS-NN code was meant to run).
    runs_cmsis_nn: bool = True
    # The seam's fault report (``mlf: fault: <field>=0x...``) names the trap by this field's
    # number; the host turns it into a word with fault_names.
    fault_field: str = ""
    fault_names: Mapping[int, str] = {}
    # A cross architecture's own C seam and linker template (boards/families/<shared_seam>/,
    # beside the families/common/ every microcontroller shares) and its CMake toolchain file
    # (boards/cmake/<toolchain>.cmake).
    shared_seam: Optional[str] = None
    toolchain: Optional[str] = None

    def parse_cpu(self, table: TableReader) -> Optional[Cpu]:
        """The board's ``[cpu]`` table (None for the host, which has none)."""
        return None

    def toolchain_file(self) -> Optional[Path]:
        """The CMake toolchain file (None: the host compiler)."""
        return (
            None if self.toolchain is None else boards_dir() / "cmake" / f"{self.toolchain}.cmake"
        )

    def family_dir(self, family: str) -> Path:
        """The directory of a family's C seam."""
        return boards_dir() / "families" / family

    def seam_dirs(self, family: str, shared: Sequence[str] = ()) -> List[Path]:
        """Directories whose ``*.c`` make up the seam, most generic first: ``common`` and the
        architecture's shared seam (where it has one), what the family builds on (``shared``),
        then the family."""
        own = [*map(self.family_dir, shared), self.family_dir(family)]
        if self.shared_seam is None:
            return own
        families = boards_dir() / "families"
        return [families / "common", families / self.shared_seam, *own]

    def linker_template(self) -> Optional[Path]:
        """The GNU ld script template rendered from a board's memory regions."""
        if self.shared_seam is None:
            return None
        return boards_dir() / "families" / self.shared_seam / "linker.ld.j2"

    def fault_name(self, number: int) -> str:
        """The word for trap ``number`` of the seam's fault report."""
        return self.fault_names.get(number, "exception")


def architecture(name: str) -> Architecture:
    """The architecture called ``name`` (KeyError when none is)."""
    return ARCHITECTURES[name]


def _registry() -> Dict[str, Architecture]:
    from .arm import CortexM
    from .host import Host
    from .riscv import Riscv32

    return {arch.name: arch for arch in (Host(), CortexM(), Riscv32())}


ARCHITECTURES: Dict[str, Architecture] = _registry()
