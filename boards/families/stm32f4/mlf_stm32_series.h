/*
 * mlf_stm32_series.h — STM32F4: GPIO ports on AHB1, clocked from RCC_AHB1ENR. Read by the
 * shared STM32 code (families/stm32/mlf_stm32.h).
 */
#ifndef MLF_STM32_SERIES_H_
#define MLF_STM32_SERIES_H_

#define MLF_STM32_GPIO_BASE 0x40020000u
#define MLF_STM32_GPIO_PORT_STRIDE 0x400u
#define MLF_STM32_RCC_GPIO_ENR MLF_REG32(0x40023800u + 0x30u)

/* Arduino D7 of the Nucleo-64 boards: PA8. */
#define MLF_STM32_TIMESTAMP_DEFAULT_PORT 0u
#define MLF_STM32_TIMESTAMP_DEFAULT_PIN 8u

#endif /* MLF_STM32_SERIES_H_ */
