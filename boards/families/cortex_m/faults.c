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
 * handler never returns, so it may run on top of that frame. */
__attribute__((naked)) void mlf_fault_entry(void) {
  __asm__ volatile(
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "mov r1, lr\n\t"
      "b mlf_fault_report\n\t");
}

/* The exception goes as its number: the host names it (run/qemu.py). */
void mlf_fault_report(const uint32_t* frame, uint32_t exc_return) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  const uint32_t values[] = {ipsr & 0x1FFu, frame[6],     frame[5],     frame[7],
                             MLF_SCB_CFSR,  MLF_SCB_HFSR, MLF_SCB_BFAR, exc_return};
  mlf_board_report(
      "mlf: fault: exception=0x........ pc=0x........ lr=0x........ xpsr=0x........ "
      "cfsr=0x........ hfsr=0x........ bfar=0x........ exc_return=0x........",
      values);
  mlf_platform_exit(MLF_EXIT_FAULT);
}
