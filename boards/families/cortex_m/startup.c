/*
 * startup.c — vector table and reset handler for every Cortex-M board.
 *
 * QEMU's -kernel and the real-board flashers only place the ELF's load segments; the C
 * environment (.data copied from flash, .bss zeroed, FPU on) is set up here before main().
 * Symbols come from boards/families/cortex_m/linker.ld.j2.
 */
#include <stdint.h>
#include <string.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

extern uint32_t __mlf_stack_top;
extern uint32_t __mlf_stack_limit;
extern uint32_t __mlf_data_start;
extern uint32_t __mlf_data_end;
extern const uint32_t __mlf_data_load;
extern uint32_t __mlf_bss_start;
extern uint32_t __mlf_bss_end;
typedef void (*mlf_init_function)(void);
extern const mlf_init_function __mlf_init_array_start[];
extern const mlf_init_function __mlf_init_array_end[];

int main(void);

void mlf_reset_handler(void);
void mlf_fault_entry(void);
void mlf_systick_handler(void);

typedef void (*mlf_vector)(void);

/* Every exception we do not expect goes to the fault reporter, which names it by IPSR; no
 * external interrupt is enabled, so the core entries are all that is needed. */
__attribute__((section(".vectors"), used)) const mlf_vector mlf_vector_table[16] = {
    (mlf_vector)(uintptr_t)&__mlf_stack_top,
    mlf_reset_handler,
    mlf_fault_entry, /* NMI */
    mlf_fault_entry, /* HardFault */
    mlf_fault_entry, /* MemManage */
    mlf_fault_entry, /* BusFault */
    mlf_fault_entry, /* UsageFault */
    mlf_fault_entry, /* SecureFault (ARMv8-M) */
    0,
    0,
    0,
    mlf_fault_entry, /* SVCall */
    mlf_fault_entry, /* DebugMonitor */
    0,
    mlf_fault_entry, /* PendSV */
    mlf_systick_handler,
};

static void enable_fpu(void) {
#if defined(__ARM_FP)
  /* Full access to CP10 and CP11; without it the first FP instruction is a UsageFault. */
  MLF_SCB_CPACR |= 0xFu << 20;
  __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
}

static void enable_stack_limit(void) {
#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
  /* ARMv8-M checks SP against MSPLIM in hardware: an overflow becomes a reported fault
   * instead of a silent write below RAM. (ARMv7-M has no limit register; there an overflow
   * ends in a lockup, which the QEMU runner reports.) */
  __asm__ volatile("msr msplim, %0" ::"r"(&__mlf_stack_limit));
#endif
}

/* Fills the unused stack below the reset handler's frame with a pattern, so that
 * mlf_platform_stack_used() can later find the deepest word ever written. */
static void paint_stack(void) {
  uint32_t* word = &__mlf_stack_limit;
  uint32_t* in_use;
  __asm__ volatile("mov %0, sp" : "=r"(in_use));
  in_use -= 16; /* this function's own frame, and a little room */
  while (word < in_use) {
    *word++ = MLF_STACK_PAINT;
  }
}

__attribute__((noreturn)) void mlf_reset_handler(void) {
  paint_stack();
  enable_fpu();
  enable_stack_limit();
#if !defined(__ARM_ARCH_6M__)
  /* QEMU's M-profile boards and the flashers honour the vector table they boot from, but a
   * bootloader may not: point VTOR at ours. (ARMv6-M: the Cortex-M0 has no VTOR and the M0+
   * only optionally; the table is where the core boots from, address 0 or its alias.) */
  MLF_SCB_VTOR = (uint32_t)(uintptr_t)mlf_vector_table;
#endif

  size_t data_bytes = (size_t)((uintptr_t)&__mlf_data_end - (uintptr_t)&__mlf_data_start);
  memcpy(&__mlf_data_start, &__mlf_data_load, data_bytes);
  size_t bss_bytes = (size_t)((uintptr_t)&__mlf_bss_end - (uintptr_t)&__mlf_bss_start);
  memset(&__mlf_bss_start, 0, bss_bytes);

  for (const mlf_init_function* init = __mlf_init_array_start; init < __mlf_init_array_end;
       ++init) {
    (*init)();
  }

  mlf_platform_exit(main());
}
