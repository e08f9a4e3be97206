/*
 * console_ns16550.c — the console link of QEMU's RISC-V virt machine: the NS16550A UART at
 * MLF_BOARD_CONSOLE_BASE (byte registers), its receive interrupt wired through the PLIC.
 *
 * Waiting for input sleeps: the UART's received-data interrupt is enabled in the UART, the
 * PLIC (source 10, hart 0 M-mode context) and mie.MEIE, while mstatus.MIE stays off, so `wfi`
 * returns when a byte arrives and no trap is taken. An idle attached QEMU then uses no host
 * CPU, and inference (which never waits) runs the same instructions as with polling.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_platform.h"
#include "mlf_riscv.h"

#define UART_RBR MLF_REG8(MLF_BOARD_CONSOLE_BASE + 0u) /* read, DLAB = 0 */
#define UART_THR MLF_REG8(MLF_BOARD_CONSOLE_BASE + 0u) /* write, DLAB = 0 */
#define UART_DLL MLF_REG8(MLF_BOARD_CONSOLE_BASE + 0u) /* DLAB = 1 */
#define UART_IER MLF_REG8(MLF_BOARD_CONSOLE_BASE + 1u)
#define UART_DLM MLF_REG8(MLF_BOARD_CONSOLE_BASE + 1u) /* DLAB = 1 */
#define UART_LCR MLF_REG8(MLF_BOARD_CONSOLE_BASE + 3u)
#define UART_MCR MLF_REG8(MLF_BOARD_CONSOLE_BASE + 4u)
#define UART_LSR MLF_REG8(MLF_BOARD_CONSOLE_BASE + 5u)

#define UART_IER_RX_DATA 0x01u
#define UART_LCR_8N1 0x03u
#define UART_LCR_DLAB 0x80u
#define UART_MCR_DTR_RTS_OUT2 0x0Bu /* OUT2 gates the interrupt on PC-style parts */
#define UART_LSR_DATA_READY 0x01u
#define UART_LSR_THR_EMPTY 0x20u

#define UART_DIVISOR (MLF_BOARD_CONSOLE_CLOCK_HZ / (16u * MLF_BOARD_CONSOLE_BAUD))
#if UART_DIVISOR < 1 || UART_DIVISOR > 0xFFFF
#error "console clock_hz / (16 * baud) must fit the 16550's 16-bit divisor"
#endif

/* The virt machine's PLIC (hw/riscv/virt.c: VIRT_PLIC, UART0_IRQ; context 0 = hart 0 M). */
#define PLIC_BASE 0x0C000000u
#define PLIC_UART_SOURCE 10u
#define PLIC_PRIORITY(source) MLF_REG32(PLIC_BASE + 4u * (source))
#define PLIC_ENABLE_CONTEXT0 MLF_REG32(PLIC_BASE + 0x2000u)
#define PLIC_THRESHOLD_CONTEXT0 MLF_REG32(PLIC_BASE + 0x200000u)
#define PLIC_CLAIM_CONTEXT0 MLF_REG32(PLIC_BASE + 0x200004u)

void mlf_family_init(void) {
  UART_IER = 0;
  UART_LCR = UART_LCR_DLAB;
  UART_DLL = (uint8_t)(UART_DIVISOR & 0xFFu);
  UART_DLM = (uint8_t)(UART_DIVISOR >> 8);
  UART_LCR = UART_LCR_8N1;
  /* The FIFOs stay off as at reset: switching them on flushes them, losing input the host
   * sent before start-up got here (QEMU holds one byte in RBR until it is read). */
  UART_MCR = UART_MCR_DTR_RTS_OUT2;

  PLIC_PRIORITY(PLIC_UART_SOURCE) = 1u;
  PLIC_ENABLE_CONTEXT0 = 1u << PLIC_UART_SOURCE;
  PLIC_THRESHOLD_CONTEXT0 = 0u;
  UART_IER = UART_IER_RX_DATA;
  MLF_CSR_SET(mie, MLF_MIE_MEIE); /* wakes wfi; mstatus.MIE stays 0, so it is never taken */
}

#ifndef MLF_CONSOLE_POLL
#define MLF_CONSOLE_POLL 0
#endif

#if !MLF_CONSOLE_POLL
/* Claims and completes whatever the PLIC holds for us, so that its gateway forwards the
 * next request (a real PLIC latches a request until it is completed). */
static void plic_acknowledge(void) {
  uint32_t source = PLIC_CLAIM_CONTEXT0;
  if (source != 0u) {
    PLIC_CLAIM_CONTEXT0 = source;
  }
}
#endif

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  if (max == 0) {
    return 0;
  }
  /* A byte arriving between the test and the wfi leaves the interrupt pending, and a pending
   * interrupt makes wfi return at once: no wake-up is lost. */
  while ((UART_LSR & UART_LSR_DATA_READY) == 0u) {
#if !MLF_CONSOLE_POLL /* 1: the spinning wait bench part 14 compares against */
    __asm__ volatile("wfi" ::: "memory");
    plic_acknowledge();
#endif
  }
  size_t count = 0;
  do {
    buf[count++] = UART_RBR;
  } while (count < max && (UART_LSR & UART_LSR_DATA_READY) != 0u);
  return count;
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while ((UART_LSR & UART_LSR_THR_EMPTY) == 0u) {
    }
    UART_THR = buf[i];
  }
}
