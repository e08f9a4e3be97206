/*
 * console_stm32l4_lpuart.c — clocks and console for STM32L4/L4+ boards whose debugger's
 * virtual COM port is wired to LPUART1 on PG7 (TX) / PG8 (RX), AF8: the Nucleo-144 boards
 * (NUCLEO-L4R5ZI, -L4A6ZG, ...). SYSCLK and the LPUART kernel clock both come from HSI16, so
 * the tick rate and baud divisor do not depend on a crystal being fitted.
 *
 * Built in CI (it must compile) but only runs on the real board.
 */
#include <stddef.h>
#include <stdint.h>

#include "mlf_cortex_m.h"
#include "mlf_platform.h"

#ifndef MLF_BOARD_CONSOLE_IRQ
#error "MLF_BOARD_CONSOLE_IRQ missing: the board file needs [console] irq (LPUART1's IRQ)"
#endif

#define HSI16_HZ 16000000u
#if MLF_BOARD_TICK_HZ != 16000000 || MLF_BOARD_CONSOLE_CLOCK_HZ != 16000000
#error "stm32l4 seam: SYSCLK and LPUART1 run from HSI16: timer and console clock_hz = 16000000"
#endif

#define RCC_BASE 0x40021000u
#define RCC_CR MLF_REG32(RCC_BASE + 0x00u)
#define RCC_CFGR MLF_REG32(RCC_BASE + 0x08u)
#define RCC_AHB2ENR MLF_REG32(RCC_BASE + 0x4Cu)
#define RCC_APB1ENR1 MLF_REG32(RCC_BASE + 0x58u)
#define RCC_APB1ENR2 MLF_REG32(RCC_BASE + 0x5Cu)
#define RCC_CCIPR MLF_REG32(RCC_BASE + 0x88u)
#define RCC_CR_HSION (1u << 8)
#define RCC_CR_HSIRDY (1u << 10)
#define RCC_CFGR_SW_MASK (3u << 0)
#define RCC_CFGR_SW_HSI16 (1u << 0)
#define RCC_CFGR_SWS_MASK (3u << 2)
#define RCC_CFGR_SWS_HSI16 (1u << 2)
#define RCC_AHB2ENR_GPIOGEN (1u << 6)
#define RCC_APB1ENR1_PWREN (1u << 28)
#define RCC_APB1ENR2_LPUART1EN (1u << 0)
#define RCC_CCIPR_LPUART1SEL_MASK (3u << 10)
#define RCC_CCIPR_LPUART1SEL_HSI16 (2u << 10)

#define PWR_CR2 MLF_REG32(0x40007004u)
#define PWR_CR2_IOSV (1u << 9)

#define GPIOG_BASE 0x48001800u
#define GPIOG_MODER MLF_REG32(GPIOG_BASE + 0x00u)
#define GPIOG_OSPEEDR MLF_REG32(GPIOG_BASE + 0x08u)
#define GPIOG_AFRL MLF_REG32(GPIOG_BASE + 0x20u)
#define GPIOG_AFRH MLF_REG32(GPIOG_BASE + 0x24u)
#define GPIO_MODE_ALTERNATE 2u
#define GPIO_SPEED_HIGH 2u
#define LPUART1_AF 8u
#define TX_PIN 7u
#define RX_PIN 8u

#define LPUART_CR1 MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x00u)
#define LPUART_CR3 MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x08u)
#define LPUART_BRR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x0Cu)
#define LPUART_ISR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x1Cu)
#define LPUART_RDR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x24u)
#define LPUART_TDR MLF_REG32(MLF_BOARD_CONSOLE_BASE + 0x28u)
#define LPUART_CR1_UE (1u << 0)
#define LPUART_CR1_RE (1u << 2)
#define LPUART_CR1_TE (1u << 3)
#define LPUART_CR1_RXNEIE (1u << 5)
#define LPUART_CR3_OVRDIS (1u << 12)
#define LPUART_ISR_RXNE (1u << 5)
#define LPUART_ISR_TXE (1u << 7)

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

static void set_alternate_function(uint32_t pin) {
  GPIOG_MODER = (GPIOG_MODER & ~(3u << (2u * pin))) | (GPIO_MODE_ALTERNATE << (2u * pin));
  GPIOG_OSPEEDR = (GPIOG_OSPEEDR & ~(3u << (2u * pin))) | (GPIO_SPEED_HIGH << (2u * pin));
  if (pin < 8u) {
    GPIOG_AFRL = (GPIOG_AFRL & ~(0xFu << (4u * pin))) | (LPUART1_AF << (4u * pin));
  } else {
    uint32_t shift = 4u * (pin - 8u);
    GPIOG_AFRH = (GPIOG_AFRH & ~(0xFu << shift)) | (LPUART1_AF << shift);
  }
}

void mlf_family_init(void) {
  clock_init();

  /* Port G is powered from VDDIO2, which stays isolated until declared valid. */
  RCC_APB1ENR1 |= RCC_APB1ENR1_PWREN;
  PWR_CR2 |= PWR_CR2_IOSV;
  RCC_AHB2ENR |= RCC_AHB2ENR_GPIOGEN;
  set_alternate_function(TX_PIN);
  set_alternate_function(RX_PIN);

  RCC_CCIPR = (RCC_CCIPR & ~RCC_CCIPR_LPUART1SEL_MASK) | RCC_CCIPR_LPUART1SEL_HSI16;
  RCC_APB1ENR2 |= RCC_APB1ENR2_LPUART1EN;
  LPUART_CR1 = 0;
  LPUART_BRR = (uint32_t)LPUART_DIVISOR;
  /* A byte lost while the firmware computes must not wedge reception: the protocol's
   * checksums catch the loss. */
  LPUART_CR3 = LPUART_CR3_OVRDIS;
  /* The receive interrupt only wakes the core (mlf_console_wait). */
  LPUART_CR1 = LPUART_CR1_UE | LPUART_CR1_RE | LPUART_CR1_TE | LPUART_CR1_RXNEIE;
}

/* RXNE is the interrupt's level and reading RDR clears it: nothing is latched to clear. */
static int rx_ready(void) { return (LPUART_ISR & LPUART_ISR_RXNE) != 0u; }

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  if (max == 0) {
    return 0;
  }
  mlf_console_wait(rx_ready);
  size_t count = 0;
  do {
    buf[count++] = (uint8_t)LPUART_RDR;
  } while (count < max && (LPUART_ISR & LPUART_ISR_RXNE) != 0u);
  mlf_systick_rephase();
  return count;
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while ((LPUART_ISR & LPUART_ISR_TXE) == 0u) {
    }
    LPUART_TDR = buf[i];
  }
  mlf_systick_rephase();
}
