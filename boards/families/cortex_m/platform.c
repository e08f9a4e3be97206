/*
 * platform.c — the parts of mlf_platform.h every Cortex-M board shares: start-up order, the
 * 64-bit SysTick tick counter, the semihosting trap (BKPT 0xAB), exit, and the newlib hooks
 * a bare-metal program still needs (_exit, _sbrk).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#define SYSTICK_RELOAD 0x00FFFFFFu
#define SYSTICK_PERIOD ((uint64_t)SYSTICK_RELOAD + 1u)

/* Ticks already accounted for by the overflow interrupt; the live 24-bit counter adds the
 * rest. Shared between the interrupt and mlf_platform_ticks(), hence file-scope volatile. */
static volatile uint64_t systick_wrapped_ticks;

void mlf_systick_handler(void);

void mlf_systick_handler(void) { systick_wrapped_ticks += SYSTICK_PERIOD; }

void mlf_systick_start(void) {
  MLF_SYST_CSR = 0;
  systick_wrapped_ticks = 0;
  MLF_SYST_RVR = SYSTICK_RELOAD;
  MLF_SYST_CVR = 0;
  MLF_SYST_CSR = MLF_SYST_CSR_ENABLE | MLF_SYST_CSR_TICKINT | MLF_SYST_CSR_CLKSOURCE_CPU;
  /* Writing CVR leaves it at 0 until the first tick reloads it; a read in that window would
   * look like a full period, so let the counter start properly first. */
  while (MLF_SYST_CVR == 0) {
  }
}

void mlf_platform_init(void) {
  mlf_family_init();
  mlf_systick_start();
}

/* The tick count now; interrupts must be masked. */
static uint64_t ticks_masked(void) {
  uint32_t count = MLF_SYST_CVR;
  uint64_t base = systick_wrapped_ticks;
  if ((MLF_SCB_ICSR & MLF_SCB_ICSR_PENDSTSET) != 0u) {
    /* The counter reached zero but the interrupt has not run yet (we masked it): account for
     * the period here. Re-read so that count and base agree; a zero still belongs to the
     * period that is ending. */
    count = MLF_SYST_CVR;
    if (count != 0u) {
      base += SYSTICK_PERIOD;
    }
  }
  return base + (uint64_t)(SYSTICK_RELOAD - count);
}

static uint32_t mask_interrupts(void) {
  uint32_t primask;
  __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
  return primask;
}

static void restore_interrupts(uint32_t primask) {
  __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
}

uint64_t mlf_platform_ticks(void) {
  uint32_t primask = mask_interrupts();
  uint64_t now = ticks_masked();
  restore_interrupts(primask);
  return now;
}

void mlf_systick_rephase(void) {
  if ((MLF_SYST_CSR & MLF_SYST_CSR_ENABLE) == 0u) {
    return; /* not started yet: nothing to keep in phase */
  }
  uint32_t primask = mask_interrupts();
  uint64_t now = ticks_masked();
  /* Any write clears the counter; it reloads one tick later, so from here on tick edges fall
   * at a fixed instruction distance from this point. A wrap up to now is already in `now`. */
  MLF_SYST_CVR = 0;
  MLF_SCB_ICSR = MLF_SCB_ICSR_PENDSTCLR;
  while (MLF_SYST_CVR == 0u) {
  }
  systick_wrapped_ticks = now;
  restore_interrupts(primask);
}

uint64_t mlf_platform_tick_hz(void) { return (uint64_t)MLF_BOARD_TICK_HZ; }

extern uint32_t __mlf_stack_top;
extern uint32_t __mlf_stack_limit;

size_t mlf_platform_stack_used(void) {
  /* The reset handler painted the stack; the first word from the bottom that lost the paint
   * is the deepest the stack has reached (a word that happened to be written with the pattern
   * itself makes this an underestimate by at most that word). */
  const uint32_t* word = &__mlf_stack_limit;
  while (word < &__mlf_stack_top && *word == MLF_STACK_PAINT) {
    ++word;
  }
  return (size_t)((uintptr_t)&__mlf_stack_top - (uintptr_t)word);
}

/* Boards whose family wires a timestamp pin for MLPerf Tiny's energy monitor (stm32) override
 * this; the others (QEMU machines) have none. */
__attribute__((weak)) int mlf_platform_timestamp_pulse(void) { return 0; }

uintptr_t mlf_semihosting_call(uintptr_t operation, uintptr_t argument) {
  register uintptr_t r0 __asm__("r0") = operation;
  register uintptr_t r1 __asm__("r1") = argument;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void mlf_platform_exit(int status) {
  mlf_board_semihosting_exit(status);
  __asm__ volatile("cpsid i" ::: "memory");
  for (;;) {
    __asm__ volatile("wfi");
  }
}

/* newlib's exit() and abort() end here. */
void _exit(int status);
void _exit(int status) { mlf_platform_exit(status); }

/* newlib's malloc grows the heap through _sbrk. The firmware never allocates, but a library
 * function might; the heap is bounded by the linker script (heap_bytes, 0 by default) so an
 * allocation fails cleanly instead of running into the stack or the arena. */
extern uint8_t __mlf_heap_start[];
extern uint8_t __mlf_heap_end[];
void* _sbrk(ptrdiff_t increment);
void* _sbrk(ptrdiff_t increment) {
  static uint8_t* heap_top = __mlf_heap_start;
  if (increment < 0 || increment > __mlf_heap_end - heap_top) {
    errno = ENOMEM;
    return (void*)-1;
  }
  uint8_t* previous = heap_top;
  heap_top += increment;
  return previous;
}
