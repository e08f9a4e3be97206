/*
 * platform.c — the parts of mlf_platform.h every RISC-V board shares: start-up order, the
 * 64-bit mcycle tick counter, the semihosting trap, exit, and the picolibc hook a
 * bare-metal program still needs (_exit).
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_platform.h"
#include "mlf_riscv.h"

void mlf_platform_init(void) { mlf_family_init(); }

/* mcycle counts core clock cycles; under QEMU -icount it returns the virtual time in ns
 * (target/riscv/csr.c, get_ticks()), one per instruction with shift=0, so ticks between two
 * points without a `wfi` between them are exact instruction counts. Without -icount QEMU
 * returns the host's time-stamp counter instead. The high half is read around the low one so
 * that a carry between the two reads is never mixed in. */
uint64_t mlf_platform_ticks(void) {
  uint32_t high;
  uint32_t low;
  uint32_t again;
  do {
    high = MLF_CSR_READ(mcycleh);
    low = MLF_CSR_READ(mcycle);
    again = MLF_CSR_READ(mcycleh);
  } while (high != again);
  return ((uint64_t)high << 32) | low;
}

uint64_t mlf_platform_tick_hz(void) { return (uint64_t)MLF_BOARD_TICK_HZ; }

extern uint32_t __mlf_stack_top;
extern uint32_t __mlf_stack_limit;

size_t mlf_platform_stack_used(void) {
  /* The start-up code painted the stack; the first word above the guard that lost the paint
   * is the deepest the stack has reached (a word that happened to be written with the pattern
   * itself makes this an underestimate by at most that word). */
  const uint32_t* word = &__mlf_stack_limit + MLF_STACK_GUARD_BYTES / sizeof(uint32_t);
  while (word < &__mlf_stack_top && *word == MLF_STACK_PAINT) {
    ++word;
  }
  return (size_t)((uintptr_t)&__mlf_stack_top - (uintptr_t)word);
}

/* QEMU machines have no timestamp pin for MLPerf Tiny's energy monitor. */
__attribute__((weak)) int mlf_platform_timestamp_pulse(void) { return 0; }

/* The semihosting trap is an ebreak between two hint instructions, uncompressed and within
 * one page (QEMU checks the neighbours on the same page): a 16-byte aligned function keeps the
 * three 4-byte instructions together. a0 = operation, a1 = argument, result in a0. */
#define MLF_UNUSED __attribute__((unused)) /* a naked function reads them in assembly */
__attribute__((naked, noinline, aligned(16))) uintptr_t mlf_semihosting_call(
    MLF_UNUSED uintptr_t operation, MLF_UNUSED uintptr_t argument) {
  __asm__ volatile(
      ".option push\n\t"
      ".option norvc\n\t"
      "slli zero, zero, 0x1f\n\t"
      "ebreak\n\t"
      "srai zero, zero, 7\n\t"
      ".option pop\n\t"
      "ret\n\t");
}

void mlf_platform_exit(int status) {
  mlf_board_semihosting_exit(status); /* QEMU exits with the status, as on Arm */
  MLF_CSR_WRITE(mie, 0u);             /* nothing may wake the final wfi */
  for (;;) {
    __asm__ volatile("wfi");
  }
}

/* picolibc's exit() and abort() end here; its malloc takes the heap between __heap_start and
 * __heap_end (the linker script bounds it: heap_bytes, 0 by default). */
void _exit(int status);
void _exit(int status) { mlf_platform_exit(status); }
