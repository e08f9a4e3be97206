/*
 * console_pl011.c — the console link of the TI Stellaris LM3S6965 (QEMU lm3s6965evb): UART0,
 * an Arm PL011, on PA0/PA1 (the core sleeps on its receive interrupt while no byte is there);
 * plus the clock set-up that makes SysTick's rate known.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#ifndef MLF_BOARD_CONSOLE_IRQ
#error "MLF_BOARD_CONSOLE_IRQ missing: the board file needs [console] irq (the UART's IRQ)"
#endif

/* System control. */
#define SYSCTL_RIS MLF_REG32(0x400FE050u)
#define SYSCTL_MISC MLF_REG32(0x400FE058u)
#define SYSCTL_RCC MLF_REG32(0x400FE060u)
#define SYSCTL_RCGC1 MLF_REG32(0x400FE104u)
#define SYSCTL_RCGC2 MLF_REG32(0x400FE108u)
#define SYSCTL_RIS_PLLLRIS (1u << 6)
#define SYSCTL_RCC_MOSCDIS (1u << 0)
#define SYSCTL_RCC_OSCSRC_MASK (3u << 4)
#define SYSCTL_RCC_XTAL_MASK (0xFu << 6)
#define SYSCTL_RCC_XTAL_8MHZ (0xEu << 6)
#define SYSCTL_RCC_BYPASS (1u << 11)
#define SYSCTL_RCC_PWRDN (1u << 13)
#define SYSCTL_RCC_USESYSDIV (1u << 22)
#define SYSCTL_RCC_SYSDIV_MASK (0xFu << 23)
#define SYSCTL_RCGC1_UART0 (1u << 0)
#define SYSCTL_RCGC2_GPIOA (1u << 0)

/* GPIO port A: UART0 RX/TX on PA0/PA1 are an alternate function. */
#define GPIOA_AFSEL MLF_REG32(0x40004420u)
#define GPIOA_DEN MLF_REG32(0x4000451Cu)
#define UART0_PINS 0x3u

/* PL011. */
#define UART_DR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x000u)
#define UART_FR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x018u)
#define UART_IBRD MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x024u)
#define UART_FBRD MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x028u)
#define UART_LCRH MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x02Cu)
#define UART_CTL MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x030u)
#define UART_IMSC MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x038u)
#define UART_ICR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x044u)
#define UART_FR_RXFE (1u << 4)
#define UART_FR_TXFF (1u << 5)
#define UART_LCRH_FEN (1u << 4)
#define UART_LCRH_WLEN_8 (3u << 5)
#define UART_CTL_UARTEN (1u << 0)
#define UART_CTL_TXE (1u << 8)
#define UART_CTL_RXE (1u << 9)
/* Receive (FIFO at its trigger level) and receive time-out (a byte below it, line quiet). */
#define UART_INT_RX ((1u << 4) | (1u << 6))

/* 8 MHz crystal -> 400 MHz PLL -> /2 -> SYSDIV: SYSDIV field n divides by n + 1. */
#define PLL_HALF_HZ 200000000u
#if MLF_BOARD_TICK_HZ != 50000000 && MLF_BOARD_TICK_HZ != 25000000 && \
    MLF_BOARD_TICK_HZ != 20000000 && MLF_BOARD_TICK_HZ != 40000000
#error "lm3s: timer clock_hz must be 20, 25, 40 or 50 MHz (200 MHz / n)"
#endif
#define SYSDIV_FIELD ((PLL_HALF_HZ / MLF_BOARD_TICK_HZ) - 1u)
#if MLF_BOARD_CONSOLE_CLOCK_HZ != MLF_BOARD_TICK_HZ
#error "lm3s: the UART runs from the system clock: console clock_hz must equal timer clock_hz"
#endif

static void clock_init(void) {
  /* Run from the oscillator while the PLL is reconfigured, as the datasheet requires. */
  uint32_t rcc = SYSCTL_RCC;
  rcc |= SYSCTL_RCC_BYPASS;
  rcc &= ~SYSCTL_RCC_USESYSDIV;
  SYSCTL_RCC = rcc;

  rcc &= ~(SYSCTL_RCC_MOSCDIS | SYSCTL_RCC_OSCSRC_MASK | SYSCTL_RCC_XTAL_MASK |
           SYSCTL_RCC_SYSDIV_MASK);
  rcc |= SYSCTL_RCC_XTAL_8MHZ | (SYSDIV_FIELD << 23) | SYSCTL_RCC_USESYSDIV | SYSCTL_RCC_PWRDN;
  SYSCTL_RCC = rcc;
  /* Powering the PLL up from down is what raises the lock flag (in QEMU too), so clear any
   * stale flag while it is down. */
  SYSCTL_MISC = SYSCTL_RIS_PLLLRIS;
  rcc &= ~SYSCTL_RCC_PWRDN;
  SYSCTL_RCC = rcc;
  while ((SYSCTL_RIS & SYSCTL_RIS_PLLLRIS) == 0u) {
  }
  SYSCTL_RCC = rcc & ~SYSCTL_RCC_BYPASS;
}

void mlf_family_init(void) {
  clock_init();
  SYSCTL_RCGC1 |= SYSCTL_RCGC1_UART0;
  SYSCTL_RCGC2 |= SYSCTL_RCGC2_GPIOA;
  GPIOA_AFSEL |= UART0_PINS;
  GPIOA_DEN |= UART0_PINS;

  /* Baud divisor in 1/64 units: IBRD.FBRD = clock / (16 * baud), rounded. */
  uint32_t divisor64 =
      (uint32_t)((4u * (uint64_t)MLF_BOARD_CONSOLE_CLOCK_HZ + MLF_BOARD_CONSOLE_BAUD / 2u) /
                 MLF_BOARD_CONSOLE_BAUD);
  UART_CTL = 0;
  UART_IBRD = divisor64 >> 6;
  UART_FBRD = divisor64 & 0x3Fu;
  UART_LCRH = UART_LCRH_WLEN_8 | UART_LCRH_FEN;
  UART_IMSC = UART_INT_RX; /* only wakes the core (mlf_console_wait) */
  UART_CTL = UART_CTL_UARTEN | UART_CTL_TXE | UART_CTL_RXE;
}

static int rx_ready(void) {
  UART_ICR = UART_INT_RX; /* latched until cleared, whether or not the bytes were read */
  return (UART_FR & UART_FR_RXFE) == 0u;
}

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  if (max == 0) {
    return 0;
  }
  mlf_console_wait(rx_ready);
  size_t count = 0;
  do {
    buf[count++] = (uint8_t)UART_DR;
  } while (count < max && (UART_FR & UART_FR_RXFE) == 0u);
  mlf_systick_rephase();
  return count;
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while ((UART_FR & UART_FR_TXFF) != 0u) {
    }
    UART_DR = buf[i];
  }
  mlf_systick_rephase();
}
