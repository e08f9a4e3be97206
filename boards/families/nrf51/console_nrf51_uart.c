/*
 * console_nrf51_uart.c — the console of nRF51 boards (BBC micro:bit, QEMU's `microbit`): the
 * nRF51's UART0, a task/event peripheral rather than a status-register UART. STARTRX/STARTTX
 * start it, EVENTS_RXDRDY says a byte waits in RXD (its receive interrupt, INTENSET.RXDRDY,
 * only wakes the core: mlf_console_wait), EVENTS_TXDRDY that the last TXD byte has gone.
 *
 * Events are latched: software clears one by writing 0, and must clear EVENTS_RXDRDY before
 * reading RXD (the read pops the next byte, which raises the event again). The clock is the
 * nRF51's fixed 16 MHz HFCLK, so BAUDRATE takes Nordic's fixed register values, not a
 * divisor. The micro:bit's interface chip wires its USB virtual COM port to P0.24 (TX) /
 * P0.25 (RX); QEMU ignores the pin selection, a real nRF51 needs it.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#ifndef MLF_BOARD_CONSOLE_IRQ
#error "MLF_BOARD_CONSOLE_IRQ missing: the board file needs [console] irq (UART0 is 2)"
#endif
#if MLF_BOARD_CONSOLE_CLOCK_HZ != 16000000
#error "nrf51 seam: the UART runs from the 16 MHz HFCLK: console clock_hz = 16000000"
#endif

#define UART_REG(offset) MLF_REG32(MLF_BOARD_CONSOLE_BASE + (offset))
#define UART_STARTRX UART_REG(0x000u)
#define UART_STARTTX UART_REG(0x008u)
#define UART_EVENTS_RXDRDY UART_REG(0x108u)
#define UART_EVENTS_TXDRDY UART_REG(0x11Cu)
#define UART_INTENSET UART_REG(0x304u)
#define UART_ENABLE UART_REG(0x500u)
#define UART_PSELTXD UART_REG(0x50Cu)
#define UART_PSELRXD UART_REG(0x514u)
#define UART_RXD UART_REG(0x518u)
#define UART_TXD UART_REG(0x51Cu)
#define UART_BAUDRATE UART_REG(0x524u)
#define UART_CONFIG UART_REG(0x56Cu)
#define UART_ENABLE_ENABLED 4u
#define UART_INTEN_RXDRDY (1u << 2)

#ifndef MLF_NRF51_CONSOLE_TX_PIN
#define MLF_NRF51_CONSOLE_TX_PIN 24u
#endif
#ifndef MLF_NRF51_CONSOLE_RX_PIN
#define MLF_NRF51_CONSOLE_RX_PIN 25u
#endif

/* BAUDRATE register values of the nRF51 reference manual (not a divisor of the clock). */
#if MLF_BOARD_CONSOLE_BAUD == 115200
#define UART_BAUDRATE_VALUE 0x01D7E000u
#elif MLF_BOARD_CONSOLE_BAUD == 57600
#define UART_BAUDRATE_VALUE 0x00EBF000u
#elif MLF_BOARD_CONSOLE_BAUD == 9600
#define UART_BAUDRATE_VALUE 0x00275000u
#else
#error "nrf51 seam: console baud must be 9600, 57600 or 115200"
#endif

/* Whether a byte went out since the last write (none has before the first). */
static int tx_pending;

void mlf_family_init(void) {
  UART_PSELTXD = MLF_NRF51_CONSOLE_TX_PIN;
  UART_PSELRXD = MLF_NRF51_CONSOLE_RX_PIN;
  UART_BAUDRATE = UART_BAUDRATE_VALUE;
  UART_CONFIG = 0; /* 8N1, no flow control */
  UART_ENABLE = UART_ENABLE_ENABLED;
  UART_EVENTS_RXDRDY = 0;
  UART_EVENTS_TXDRDY = 0;
  UART_INTENSET = UART_INTEN_RXDRDY;
  UART_STARTRX = 1;
  UART_STARTTX = 1;
  tx_pending = 0;
}

/* The event is the interrupt's level and stays set while bytes wait: nothing else latches. */
static int rx_ready(void) { return UART_EVENTS_RXDRDY != 0u; }

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  if (max == 0) {
    return 0;
  }
  mlf_console_wait(rx_ready);
  size_t count = 0;
  do {
    UART_EVENTS_RXDRDY = 0;
    buf[count++] = (uint8_t)UART_RXD;
  } while (count < max && UART_EVENTS_RXDRDY != 0u);
  mlf_systick_rephase();
  return count;
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (tx_pending) {
      while (UART_EVENTS_TXDRDY == 0u) {
      }
    }
    UART_EVENTS_TXDRDY = 0;
    UART_TXD = buf[i];
    tx_pending = 1;
  }
  mlf_systick_rephase();
}
