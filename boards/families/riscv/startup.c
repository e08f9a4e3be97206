/*
 * startup.c — entry point, C environment and trap handler for every RISC-V board.
 *
 * QEMU's virt machine jumps to the start of RAM (where the linker script puts _start) in
 * M-mode; loaders only place the ELF's load segments, so .data, picolibc's thread-local block
 * (errno) and .bss are set up here before main(). Interrupts stay off (mstatus.MIE = 0) for
 * the whole run: `wfi` wakes on an enabled pending interrupt without taking it, so every trap
 * that reaches mtvec is a fault, reported with its cause. Symbols come from
 * boards/families/riscv/linker.ld.j2.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mlf_platform.h"
#include "mlf_riscv.h"

extern uint32_t __mlf_stack_top;
extern uint32_t __mlf_stack_limit;
extern const uint8_t __mlf_flash_start[];
extern const uint8_t __mlf_flash_end[];
extern uint8_t __mlf_data_start[];
extern uint8_t __mlf_data_end[];
extern const uint8_t __mlf_data_load[];
extern uint8_t __mlf_bss_start[];
extern uint8_t __mlf_bss_end[];
typedef void (*mlf_init_function)(void);
extern const mlf_init_function __mlf_init_array_start[];
extern const mlf_init_function __mlf_init_array_end[];

int main(void);

void _start(void);
void mlf_trap_entry(void);
__attribute__((noreturn, used)) void mlf_reset(void);
__attribute__((noreturn, used)) void mlf_fault_report(uint32_t mcause, uint32_t mepc,
                                                      uint32_t mtval, uint32_t sp, uint32_t ra);

#if defined(__riscv_flen)
/* mstatus.FS = Initial: the FPU is off at reset and its first instruction would trap. */
#define MLF_START_FPU "li t0, 1 << 13\n\tcsrs mstatus, t0\n\t"
#else
#define MLF_START_FPU ""
#endif

/* gp for the linker's relaxation of small data, tp for picolibc's thread-local block (the
 * TLS segment starts at tp on RISC-V), the stack, the trap vector; then C. */
__attribute__((naked, section(".text.mlf_start"))) void _start(void) {
  __asm__ volatile(
      ".option push\n\t"
      ".option norelax\n\t"
      "la gp, __global_pointer$\n\t"
      ".option pop\n\t"
      "la sp, __mlf_stack_top\n\t"
      "la tp, __mlf_tls_base\n\t"
      "la t0, mlf_trap_entry\n\t"
      "csrw mtvec, t0\n\t" MLF_START_FPU "j mlf_reset\n\t");
}

/* Direct mode needs a 4-byte aligned handler: QEMU ignores an mtvec write whose low bits are
 * not 0, which a 2-byte aligned address (RVC) would give. The report runs on a fresh stack, so
 * a stack overflow (a fault in the guard) is reported too. */
__attribute__((naked, aligned(4))) void mlf_trap_entry(void) {
  __asm__ volatile(
      "csrr a0, mcause\n\t"
      "csrr a1, mepc\n\t"
      "csrr a2, mtval\n\t"
      "mv a3, sp\n\t"
      "mv a4, ra\n\t"
      "la sp, __mlf_stack_top\n\t"
      "j mlf_fault_report\n\t");
}

/* The cause goes as its number: the host names it (run/qemu.py). */
void mlf_fault_report(uint32_t mcause, uint32_t mepc, uint32_t mtval, uint32_t sp, uint32_t ra) {
  const uint32_t values[] = {mcause, mepc, mtval, sp, ra};
  mlf_board_report(
      "mlf: fault: mcause=0x........ mepc=0x........ mtval=0x........ sp=0x........ "
      "ra=0x........",
      values);
  mlf_platform_exit(MLF_EXIT_FAULT);
}

/* Fills the unused stack below this function's frame with a pattern, so that
 * mlf_platform_stack_used() can later find the deepest word ever written. */
static void paint_stack(void) {
  uint32_t* word = &__mlf_stack_limit;
  uint32_t* in_use;
  __asm__ volatile("mv %0, sp" : "=r"(in_use));
  in_use -= 16; /* this function's own frame, and a little room */
  while (word < in_use) {
    *word++ = MLF_STACK_PAINT;
  }
}

/* Physical memory protection, locked so that it binds M-mode too (accesses no entry matches
 * stay allowed in M-mode): the code region (entries 0-1, top of range) may be read and run but
 * not written, and the stack's lowest bytes (entry 2, naturally aligned power of two) not
 * touched at all. A stack overflow then faults in the guard or, when a big frame jumps it, in
 * the code region below RAM, instead of overwriting code or other memory silently. */
static void protect_memory(void) {
  const uint32_t flash_start = (uint32_t)(uintptr_t)__mlf_flash_start;
  const uint32_t flash_end = (uint32_t)(uintptr_t)__mlf_flash_end;
  const uint32_t guard = (uint32_t)(uintptr_t)&__mlf_stack_limit;
  MLF_CSR_WRITE(pmpaddr0, flash_start >> 2);
  MLF_CSR_WRITE(pmpaddr1, flash_end >> 2);
  MLF_CSR_WRITE(pmpaddr2, (guard >> 2) | ((MLF_STACK_GUARD_BYTES / 2u - 1u) >> 2));
  const uint32_t locked = 0x80u, tor = 0x08u, napot = 0x18u, read = 0x01u, execute = 0x04u;
  MLF_CSR_WRITE(pmpcfg0, ((locked | tor | read | execute) << 8) | ((locked | napot) << 16));
}

void mlf_reset(void) {
  paint_stack();
  protect_memory();
  /* .data and the thread-local block's initial values are one range in RAM and in flash. */
  memcpy(__mlf_data_start, __mlf_data_load, (size_t)(__mlf_data_end - __mlf_data_start));
  memset(__mlf_bss_start, 0, (size_t)(__mlf_bss_end - __mlf_bss_start));
  for (const mlf_init_function* init = __mlf_init_array_start; init < __mlf_init_array_end;
       ++init) {
    (*init)();
  }
  mlf_platform_exit(main());
}
