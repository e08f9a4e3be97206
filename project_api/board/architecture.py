"""The architecture seam: what a board's ``arch`` decides (CPU table, compiler flags, cross
toolchain file, C seam directories, linker script, QEMU binary).

Each architecture is one small module beside this one (:mod:`.host`, :mod:`.arm`); a new one is
a new module and one line in :data:`ARCHITECTURES`, not a branch through the board code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .schema import TableReader


class Cpu:
    """What every architecture's CPU description answers (the rest is its own)."""

    dsp: bool = False
    mve: bool = False

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

    def summary(self) -> Dict[str, Any]:
        """The CPU table as JSON (``mlf-project boards --json``)."""
        raise NotImplementedError


class Architecture:
    """One ``arch`` of ``boards/*.toml``. The host is an architecture without a memory map,
    CPU table or cross toolchain."""

    name: str = ""
    is_host: bool = False
    qemu_binary: Optional[str] = None
    console_kinds: Tuple[str, ...] = ()
    timer_kinds: Tuple[str, ...] = ()

    def parse_cpu(self, table: TableReader) -> Optional[Cpu]:
        """The board's ``[cpu]`` table (None for the host, which has none)."""
        return None

    def cpu_flags(self, cpu: Optional[Cpu]) -> List[str]:
        """Compiler and linker flags selecting the core."""
        return []

    def toolchain_file(self) -> Optional[Path]:
        """The CMake toolchain file (None: the host compiler)."""
        return None

    def family_dir(self, family: str) -> Path:
        """The directory of a family's C seam."""
        raise NotImplementedError

    def seam_dirs(self, family: str, shared: Sequence[str] = ()) -> List[Path]:
        """Directories whose ``*.c`` make up the seam, most generic first: what the family
        builds on (``shared``), then the family."""
        return [*map(self.family_dir, shared), self.family_dir(family)]

    def linker_template(self) -> Optional[Path]:
        """The GNU ld script template rendered from a board's memory regions."""
        return None

    def compile_definitions(self, cpu: Optional[Cpu]) -> Mapping[str, str]:
        """Definitions the architecture's seam needs beyond the board's own."""
        return {}


def architecture(name: str) -> Architecture:
    """The architecture called ``name`` (KeyError when none is)."""
    return ARCHITECTURES[name]


def _registry() -> Dict[str, Architecture]:
    from .arm import CortexM
    from .host import Host

    return {arch.name: arch for arch in (Host(), CortexM())}


ARCHITECTURES: Dict[str, Architecture] = _registry()
