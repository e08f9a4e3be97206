"""Running built firmware: host processes, QEMU machines, real boards."""
