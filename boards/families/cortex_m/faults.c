/*
 * faults.c — every unexpected exception ends the program with MLF_EXIT_FAULT after one
 * diagnostic line of numbers, so a crashing firmware is reported by the runner within its time-out
 * instead of spinning forever in a default handler.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

void mlf_fault_entry(void);
__attribute__((noreturn, used)) void mlf_fault_report(const uint32_t* frame, uint32_t exc_return);

/* The stacked frame is on whichever stack was active: EXC_RETURN bit 2 tells which. The
 * handler never returns, so it may run on top of that frame. ARMv6-M (Cortex-M0/M0+) has
 * neither IT blocks nor TST with an immediate, and its B reaches only +-2 KiB (the report
 * may be further away after LTO), hence the branches and BX there. */
__attribute__((naked)) void mlf_fault_entry(void) {
#if defined(__ARM_ARCH_6M__)
  __asm__ volatile(
      ".syntax unified\n\t"
      "mov r1, lr\n\t"
      "movs r0, #4\n\t"
      "tst r0, r1\n\t"
      "bne 1f\n\t"
      "mrs r0, msp\n\t"
      "b 2f\n\t"
      "1:\n\t"
      "mrs r0, psp\n\t"
      "2:\n\t"
      "ldr r2, =mlf_fault_report\n\t"
      "bx r2\n\t"
      ".ltorg\n\t");
#else
  __asm__ volatile(
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "mov r1, lr\n\t"
      "b mlf_fault_report\n\t");
#endif
}

/* ARMv6-M has no configurable fault status registers (every fault is a HardFault); its
 * report shows them as 0 rather than reading addresses the architecture reserves. */
#if defined(__ARM_ARCH_6M__)
#define FAULT_CFSR 0u
#define FAULT_HFSR 0u
#define FAULT_BFAR 0u
#else
#define FAULT_CFSR MLF_SCB_CFSR
#define FAULT_HFSR MLF_SCB_HFSR
#define FAULT_BFAR MLF_SCB_BFAR
#endif

/* The exception goes as its number: the host names it (run/qemu.py). */
void mlf_fault_report(const uint32_t* frame, uint32_t exc_return) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  const uint32_t values[] = {ipsr & 0x1FFu, frame[6],   frame[5],   frame[7],
                             FAULT_CFSR,    FAULT_HFSR, FAULT_BFAR, exc_return};
  mlf_board_report(
      "mlf: fault: exception=0x........ pc=0x........ lr=0x........ xpsr=0x........ "
      "cfsr=0x........ hfsr=0x........ bfar=0x........ exc_return=0x........",
      values);
  mlf_platform_exit(MLF_EXIT_FAULT);
}
