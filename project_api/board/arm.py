"""Arm Cortex-M boards: the ``[cpu]`` table (``-mcpu``, Thumb, float ABI, FPU, DSP/MVE), the
``arm-none-eabi`` toolchain file, the shared ``cortex_m`` seam (vectors, reset, SysTick,
faults, semihosting) under each family's drivers, and ``qemu-system-arm``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .architecture import Architecture, Cpu

if TYPE_CHECKING:  # pragma: no cover
    from .schema import TableReader

FLOAT_ABIS = ("soft", "softfp", "hard")
# The ARMv6-M cores: Thumb-1 plus a few 32-bit instructions, no DSP, no hardware divide, no
# unaligned access, no configurable fault status registers (every fault is a HardFault).
ARMV6M_CORES = ("cortex-m0", "cortex-m0plus", "cortex-m1")


@dataclass(frozen=True)
class ArmCpu(Cpu):
    """What the compiler needs to know about a Cortex-M core."""

    mcpu: str
    thumb: bool = True
    float_abi: str = "soft"
    fpu: Optional[str] = None
    dsp: bool = False
    mve: bool = False

    @property
    def core(self) -> str:
        return self.mcpu

    @property
    def has_fpu(self) -> bool:
        return self.fpu is not None and self.float_abi != "soft"

    @property
    def armv6m(self) -> bool:
        """An ARMv6-M core (Cortex-M0/M0+/M1), whose faults carry no status registers."""
        return self.mcpu in ARMV6M_CORES

    @property
    def mve_float(self) -> bool:
        return self.mve and self.float_abi == "hard"

    @property
    def label(self) -> str:
        return f"{self.mcpu}+{self.fpu}" if self.has_fpu else self.mcpu

    def flags(self) -> List[str]:
        """``['-mcpu=cortex-m4', '-mthumb', '-mfloat-abi=hard', '-mfpu=fpv4-sp-d16']``."""
        flags = [f"-mcpu={self.mcpu}"]
        if self.thumb:
            flags.append("-mthumb")
        flags.append(f"-mfloat-abi={self.float_abi}")
        if self.has_fpu:
            flags.append(f"-mfpu={self.fpu}")
        return flags

    def summary(self) -> Dict[str, Any]:
        return {
            "mcpu": self.mcpu,
            "thumb": self.thumb,
            "float_abi": self.float_abi,
            "fpu": self.fpu,
            "dsp": self.dsp,
            "mve": self.mve,
            "flags": self.flags(),
        }


class CortexM(Architecture):
    name = "cortex-m"
    qemu_binary = "qemu-system-arm"
    qemu_package = "qemu-system-arm"
    compiler = "arm-none-eabi-gcc"
    compiler_packages = "gcc-arm-none-eabi libnewlib-arm-none-eabi"
    console_kinds = ("cmsdk-uart", "pl011", "stm32-usart", "stm32-lpuart", "nrf51-uart")
    timer_kinds = ("systick", "stm32-tim2")
    shared_seam = "cortex_m"
    toolchain = "arm-none-eabi"
    fault_field = "exception"
    # Exception numbers (the IPSR value) by name; the firmware reports only the number.
    fault_names = {
        2: "NMI",
        3: "HardFault",
        4: "MemManage",
        5: "BusFault",
        6: "UsageFault",
        7: "SecureFault",
        11: "SVCall",
        12: "DebugMonitor",
        14: "PendSV",
        15: "SysTick",
    }

    def fault_name(self, number: int) -> str:
        return "IRQ" if number >= 16 else super().fault_name(number)

    def parse_cpu(self, table: TableReader) -> Optional[Cpu]:
        float_abi = table.choice("float_abi", FLOAT_ABIS, default="soft")
        fpu = table.optional_string("fpu")
        if float_abi != "soft" and fpu is None:
            table.fail("fpu", f"is required with float_abi = {float_abi!r}")
        return ArmCpu(
            mcpu=table.string("mcpu"),
            thumb=table.boolean("thumb", default=True),
            float_abi=float_abi,
            fpu=fpu,
            dsp=table.boolean("dsp", default=False),
            mve=table.boolean("mve", default=False),
        )
