/*
 * console_cmsdk_uart.c — the console link of the Arm MPS2/MPS2+ FPGA images (AN385, AN386,
 * AN500, AN505, ...): a CMSDK APB UART. Bytes are read by polling the status, with the core
 * asleep on the receive interrupt while none is there (mlf_console_wait). QEMU applies
 * back-pressure on the host side, so this loses no bytes; on the FPGA the host must not outrun
 * the baud rate.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#ifndef MLF_BOARD_CONSOLE_IRQ
#error "MLF_BOARD_CONSOLE_IRQ missing: the board file needs [console] irq (the UART's RX IRQ)"
#endif

#define UART_DATA MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x000u)
#define UART_STATE MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x004u)
#define UART_CTRL MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x008u)
#define UART_INTCLEAR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x00Cu)
#define UART_BAUDDIV MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x010u)

#define UART_STATE_TX_FULL (1u << 0)
#define UART_STATE_RX_FULL (1u << 1)
#define UART_CTRL_TX_ENABLE (1u << 0)
#define UART_CTRL_RX_ENABLE (1u << 1)
#define UART_CTRL_RX_INT_ENABLE (1u << 3)
#define UART_INT_RX (1u << 1)

/* The CMSDK UART rejects divisors below 16. */
#define UART_DIVISOR (MLF_BOARD_CONSOLE_CLOCK_HZ / MLF_BOARD_CONSOLE_BAUD)
#if UART_DIVISOR < 16
#error "console clock_hz / baud must be at least 16 for a CMSDK UART"
#endif

void mlf_family_init(void) {
  UART_CTRL = 0;
  UART_BAUDDIV = UART_DIVISOR;
  /* QEMU drops transmitted bytes unless TX is enabled, and ignores input unless RX is. The
   * receive interrupt only wakes the core (mlf_console_wait). */
  UART_CTRL = UART_CTRL_TX_ENABLE | UART_CTRL_RX_ENABLE | UART_CTRL_RX_INT_ENABLE;
}

static int rx_ready(void) {
  UART_INTCLEAR = UART_INT_RX; /* latched until cleared, whether or not the byte was read */
  return (UART_STATE & UART_STATE_RX_FULL) != 0u;
}

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  if (max == 0) {
    return 0;
  }
  mlf_console_wait(rx_ready);
  size_t count = 0;
  do {
    buf[count++] = (uint8_t)UART_DATA;
  } while (count < max && (UART_STATE & UART_STATE_RX_FULL) != 0u);
  mlf_systick_rephase();
  return count;
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while ((UART_STATE & UART_STATE_TX_FULL) != 0u) {
    }
    UART_DATA = buf[i];
  }
  mlf_systick_rephase();
}
