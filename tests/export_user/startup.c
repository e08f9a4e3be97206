/* The test's own start-up for a bare-metal user firmware (not the generated project's):
 * copy .data and .tdata, zero .tbss and .bss, enable the FPU, call main, exit through
 * semihosting with its status. Output goes through semihosting too (user_write). */
#include <stdint.h>

extern char __data_lma[], __data_start[], __data_end[];
extern char __tdata_lma[], __tls_start[], __tdata_end[], __tbss_end[];
extern char __bss_start[], __bss_end[], __stack_top[];
int main(void);
void user_start(void);
void user_write(const char* text);
void user_exit(int status);

#if defined(__arm__)
static int semihost(int op, const void* arg) {
  register int r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static void unexpected(void) { user_exit(99); }

__attribute__((section(".vectors"), used)) static const void* const vectors[16] = {
    __stack_top,
    (const void*)user_start,
    (const void*)unexpected,
    (const void*)unexpected,
    (const void*)unexpected,
    (const void*)unexpected,
    (const void*)unexpected,
    0,
    0,
    0,
    0,
    (const void*)unexpected,
    (const void*)unexpected,
    0,
    (const void*)unexpected,
    (const void*)unexpected};
#elif defined(__riscv)
int semihost(int op, const void* arg);
__asm__(
    ".section .text.start\n.global _start\n_start:\n"
    ".option push\n.option norelax\nla gp, __global_pointer$\n.option pop\n"
    "la sp, __stack_top\nla tp, __tls_start\ncall user_start\n1: j 1b\n"
    ".section .text.semihost\n.balign 16\n.option push\n.option norvc\n.global semihost\n"
    "semihost:\nslli zero, zero, 0x1f\nebreak\nsrai zero, zero, 7\nret\n.option pop\n");
#endif

static void copy(char* to, const char* from, const char* end_of_to) {
  while (to < end_of_to) *to++ = *from++;
}

static void zero(char* at, const char* end) {
  while (at < end) *at++ = 0;
}

void user_start(void) {
  copy(__data_start, __data_lma, __data_end);
  copy(__tls_start, __tdata_lma, __tdata_end);
  zero(__tdata_end, __tbss_end);
  zero(__bss_start, __bss_end);
#if defined(__arm__) && defined(__ARM_FP)
  *(volatile uint32_t*)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10, CP11 full access */
  __asm__ volatile("dsb\nisb");
#endif
  user_exit(main());
}

void user_write(const char* text) { semihost(0x04, text); /* SYS_WRITE0 */ }

void user_exit(int status) {
  const uint32_t block[2] = {0x20026u, (uint32_t)status}; /* ADP_Stopped_ApplicationExit */
  semihost(0x20, block);                                  /* SYS_EXIT_EXTENDED */
  semihost(0x18, (const void*)0x20026u);                  /* SYS_EXIT */
  for (;;) {
  }
}
