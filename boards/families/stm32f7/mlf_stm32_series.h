/*
 * mlf_stm32_series.h — STM32F7: GPIO ports on AHB1 (as on the F4), clocked from RCC_AHB1ENR. Read
 * by the shared STM32 code (families/stm32/mlf_stm32.h).
 */
#ifndef MLF_STM32_SERIES_H_
#define MLF_STM32_SERIES_H_

#define MLF_STM32_GPIO_BASE 0x40020000u
#define MLF_STM32_GPIO_PORT_STRIDE 0x400u
#define MLF_STM32_RCC_GPIO_ENR MLF_REG32(0x40023800u + 0x30u)

/* Arduino D7 of the Nucleo-144 boards: PF13 (PI3 on the 32F746G-DISCO). */
#define MLF_STM32_TIMESTAMP_DEFAULT_PORT 5u
#define MLF_STM32_TIMESTAMP_DEFAULT_PIN 13u

#endif /* MLF_STM32_SERIES_H_ */
