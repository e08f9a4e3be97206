"""The benchmark suite of mlf-project-api (issue 9): ``python bench/run.py [--smoke]``.

Every figure is an exact count (``arm-none-eabi-size``, QEMU ``-icount`` instruction counts,
bytes reported by the runtime on the device) or a ratio measured in one run; wall-clock
figures (build time, streaming) are reported, never asserted.
"""
