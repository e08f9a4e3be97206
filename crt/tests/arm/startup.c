/*
 * startup.c — the smallest Cortex-M start-up for running the C tests under
 * qemu-system-arm -M mps2-an385 with semihosting: a vector table whose reset vector is
 * newlib's rdimon _start (which zeroes .bss, sets up the heap and stdio over semihosting,
 * calls main and exits with its status). .data needs no copy: QEMU loads it in place.
 */
extern void _start(void);
extern char __stack_top[];

__attribute__((section(".vectors"), used)) const void* const vectors[16] = {
    __stack_top,
    (const void*)_start,
};

/* newlib's init/fini array walkers want these; there is nothing to run. */
void _init(void) {}
void _fini(void) {}
