"""32-bit RISC-V boards: the ``[cpu]`` table (``-march``/``-mabi``), the
``riscv64-unknown-elf`` toolchain file (Debian's multilib GCC with picolibc), the shared
``riscv`` seam (start-up, traps, ``mcycle`` ticks, semihosting) under each family's drivers,
its own linker script template, and ``qemu-system-riscv32``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .architecture import Architecture, Cpu

if TYPE_CHECKING:  # pragma: no cover
    from .schema import TableReader

# The ABIs of the rv32 multilibs Debian's gcc and picolibc ship, and the extension each needs.
MABIS = {"ilp32": "", "ilp32f": "f", "ilp32d": "d", "ilp32e": "e"}
# Single-letter ISA strings only: base rv32i or rv32e, then standard extensions in canonical
# order (GCC 12 rejects any other order); multi-letter ones (_zicsr ...) make GCC fall back to
# its rv64 default multilib, so they are refused here rather than at link time.
_MARCH_RE = re.compile(r"^rv32[ie]m?a?f?d?c?$")
# GCC 12 defaults to ISA spec 20191213, where csrr needs _zicsr (see above); with 2.2 the CSR
# instructions are part of the base ISA again and the right multilib is picked.
ISA_SPEC = "2.2"


@dataclass(frozen=True)
class RiscvCpu(Cpu):
    """What the compiler needs to know about a 32-bit RISC-V core."""

    march: str
    mabi: str

    @property
    def core(self) -> str:
        return self.march

    @property
    def has_fpu(self) -> bool:
        return "f" in self.march[4:] or "d" in self.march[4:]

    @property
    def label(self) -> str:
        return f"{self.march}/{self.mabi}"

    def flags(self) -> List[str]:
        """``['-march=rv32imac', '-mabi=ilp32', '-misa-spec=2.2']``."""
        return [f"-march={self.march}", f"-mabi={self.mabi}", f"-misa-spec={ISA_SPEC}"]

    def summary(self) -> Dict[str, Any]:
        return {
            "march": self.march,
            "mabi": self.mabi,
            "dsp": False,
            "mve": False,
            "flags": self.flags(),
        }


class Riscv32(Architecture):
    name = "riscv32"
    qemu_binary = "qemu-system-riscv32"
    qemu_package = "qemu-system-misc"
    compiler = "riscv64-unknown-elf-gcc"
    compiler_packages = "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf"
    library_flags = ("--specs=picolibc.specs",)
    # Prologues and epilogues through libgcc's shared save/restore routines, and GCC's cost
    # model for size: about 460 B less of the KWS firmware's code (a few instructions more
    # per call of our C; the model's C keeps -O2 without them).
    size_flags = ("-msave-restore", "-mtune=size")
    console_kinds = ("ns16550",)
    timer_kinds = ("mcycle",)
    shared_seam = "riscv"
    toolchain = "riscv64-unknown-elf"
    runs_cmsis_nn = False
    fault_names = {
        0: "instruction address misaligned",
        1: "instruction access fault",
        2: "illegal instruction",
        3: "breakpoint",
        4: "load address misaligned",
        5: "load access fault",
        6: "store address misaligned",
        7: "store access fault",
        11: "environment call from M-mode",
        0x80000003: "machine software interrupt",
        0x80000007: "machine timer interrupt",
        0x8000000B: "machine external interrupt",
    }
    fault_field = "mcause"

    def parse_cpu(self, table: TableReader) -> Optional[Cpu]:
        march = table.string("march")
        if not _MARCH_RE.match(march):
            table.fail(
                "march",
                f"must be rv32i or rv32e with extensions from m, a, f, d, c in that order "
                f"(got {march!r})",
            )
        if "d" in march[4:] and "f" not in march[4:]:
            table.fail("march", f"has d without f (got {march!r}): D extends F")
        mabi = table.choice("mabi", tuple(MABIS))
        needs = MABIS[mabi]
        if needs == "e" and not march.startswith("rv32e"):
            table.fail("mabi", f"ilp32e needs an rv32e march (got {march!r})")
        if needs in ("f", "d") and needs not in march[4:]:
            table.fail("mabi", f"{mabi} passes floats in FP registers: march needs {needs!r}")
        if march.startswith("rv32e") and needs != "e":
            table.fail("mabi", f"an rv32e march needs mabi = 'ilp32e' (got {mabi!r})")
        return RiscvCpu(march=march, mabi=mabi)
