/*
 * console_stm32l4_lpuart.c — clocks and console for STM32L4/L4+ boards whose debugger's
 * virtual COM port is wired to LPUART1 (the Nucleo-144 boards NUCLEO-L4R5ZI, -L4A6ZG, ...:
 * PG7 TX / PG8 RX, AF8, given by the board file). SYSCLK and the LPUART kernel clock both
 * come from HSI16, so the tick rate and baud divisor do not depend on a crystal being fitted.
 *
 * Built in CI (it must compile) but only runs on the real board.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"
#include "mlf_stm32.h"

#define HSI16_HZ 16000000u
#if MLF_BOARD_TICK_HZ != 16000000 || MLF_BOARD_CONSOLE_CLOCK_HZ != 16000000
#error "stm32l4 seam: SYSCLK and LPUART1 run from HSI16: timer and console clock_hz = 16000000"
#endif

#define RCC_BASE 0x40021000u
#define RCC_CR MLF_REG32(RCC_BASE + 0x00u)
#define RCC_CFGR MLF_REG32(RCC_BASE + 0x08u)
#define RCC_APB1ENR1 MLF_REG32(RCC_BASE + 0x58u)
#define RCC_CCIPR MLF_REG32(RCC_BASE + 0x88u)
#define RCC_CR_HSION (1u << 8)
#define RCC_CR_HSIRDY (1u << 10)
#define RCC_CFGR_SW_MASK (3u << 0)
#define RCC_CFGR_SW_HSI16 (1u << 0)
#define RCC_CFGR_SWS_MASK (3u << 2)
#define RCC_CFGR_SWS_HSI16 (1u << 2)
#define RCC_APB1ENR1_PWREN (1u << 28)
#define RCC_CCIPR_LPUART1SEL_MASK (3u << 10)
#define RCC_CCIPR_LPUART1SEL_HSI16 (2u << 10)

#define PWR_CR2 MLF_REG32(0x40007004u)
#define PWR_CR2_IOSV (1u << 9)

/* LPUART divisor: 256 * f_ck / baud, valid from 0x300 (f_ck <= 3 * baud is refused). */
#define LPUART_DIVISOR \
  ((256ull * MLF_BOARD_CONSOLE_CLOCK_HZ + MLF_BOARD_CONSOLE_BAUD / 2u) / MLF_BOARD_CONSOLE_BAUD)
#if LPUART_DIVISOR < 0x300 || LPUART_DIVISOR > 0xFFFFF
#error "stm32l4 seam: console baud out of range for LPUART1 at 16 MHz"
#endif

static void clock_init(void) {
  /* Reset leaves SYSCLK on MSI 4 MHz; HSI16 needs no flash wait states in range 1. */
  RCC_CR |= RCC_CR_HSION;
  while ((RCC_CR & RCC_CR_HSIRDY) == 0u) {
  }
  RCC_CFGR = (RCC_CFGR & ~RCC_CFGR_SW_MASK) | RCC_CFGR_SW_HSI16;
  while ((RCC_CFGR & RCC_CFGR_SWS_MASK) != RCC_CFGR_SWS_HSI16) {
  }
}

void mlf_family_init(void) {
  clock_init();

  /* Port G is powered from VDDIO2, which stays isolated until declared valid. */
  RCC_APB1ENR1 |= RCC_APB1ENR1_PWREN;
  PWR_CR2 |= PWR_CR2_IOSV;
  RCC_CCIPR = (RCC_CCIPR & ~RCC_CCIPR_LPUART1SEL_MASK) | RCC_CCIPR_LPUART1SEL_HSI16;
  mlf_stm32_console_pins();
  mlf_stm32_uart_enable((uint32_t)LPUART_DIVISOR);
}

size_t mlf_platform_read(uint8_t* buf, size_t max) { return mlf_stm32_uart_read(buf, max); }

void mlf_platform_write(const uint8_t* buf, size_t n) { mlf_stm32_uart_write(buf, n); }
