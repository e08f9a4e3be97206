# CMake toolchain file: bare-metal 32-bit RISC-V with Debian's riscv64-unknown-elf-gcc (a
# multilib compiler: rv32 and rv64) and picolibc.
#
# The CPU comes from the board, not from this file:
#   cmake -S proj -B build -DCMAKE_TOOLCHAIN_FILE=<boards>/cmake/riscv64-unknown-elf.cmake \
#         "-DMLF_CPU_FLAGS=-march=rv32imac;-mabi=ilp32;-misa-spec=2.2"
# (project_api.board.Board.cmake_args() produces both). -march and -mabi select the multilib
# of both libgcc and picolibc, so they go to the linker too; without them GCC builds for its
# rv64imafdc default. The project adds its linker script (Board.render_linker_script()) with
# `-T`, which keeps picolibc.specs from adding its own; start-up code comes from the board's C
# seam, so picolibc's crt0 is not linked (-nostartfiles).
#
# MLF_TOOLCHAIN_PREFIX selects another toolchain build (default: riscv64-unknown-elf- on PATH;
# a full path prefix works too).

set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR riscv32)

set(MLF_TOOLCHAIN_PREFIX "riscv64-unknown-elf-" CACHE STRING "prefix of the GNU RISC-V bare-metal tools")
set(MLF_CPU_FLAGS "" CACHE STRING "the board's CPU flags (;-separated), from Board.cpu_flags()")

# try_compile() projects (compiler checks) run in their own scope: hand the variables on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MLF_TOOLCHAIN_PREFIX MLF_CPU_FLAGS)

if(NOT MLF_CPU_FLAGS)
  message(FATAL_ERROR
    "riscv64-unknown-elf.cmake needs -DMLF_CPU_FLAGS=... (the board's CPU flags, e.g. "
    "\"-march=rv32imac;-mabi=ilp32;-misa-spec=2.2\"; see Board.cmake_args())")
endif()

find_program(MLF_RISCV_GCC "${MLF_TOOLCHAIN_PREFIX}gcc")
if(NOT MLF_RISCV_GCC)
  message(FATAL_ERROR
    "${MLF_TOOLCHAIN_PREFIX}gcc not found (install gcc-riscv64-unknown-elf and "
    "picolibc-riscv64-unknown-elf, or set MLF_TOOLCHAIN_PREFIX)")
endif()

set(CMAKE_C_COMPILER "${MLF_TOOLCHAIN_PREFIX}gcc")
set(CMAKE_CXX_COMPILER "${MLF_TOOLCHAIN_PREFIX}g++")
set(CMAKE_ASM_COMPILER "${MLF_TOOLCHAIN_PREFIX}gcc")
# gcc-ar/gcc-ranlib index link-time-optimised objects (MLF_LTO) through GCC's plugin.
set(CMAKE_AR "${MLF_TOOLCHAIN_PREFIX}gcc-ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "${MLF_TOOLCHAIN_PREFIX}gcc-ranlib" CACHE FILEPATH "")
set(CMAKE_OBJCOPY "${MLF_TOOLCHAIN_PREFIX}objcopy" CACHE FILEPATH "")
set(CMAKE_SIZE "${MLF_TOOLCHAIN_PREFIX}size" CACHE FILEPATH "")

# No executable can run on the build machine: check the compiler by building a library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# picolibc.specs adds picolibc's headers when compiling and its multilib directory, libc and
# --gc-sections when linking (CMake links with the C flags, and the specs may be read only
# once); it makes errno thread-local, which the seam's start-up sets up.
string(REPLACE ";" " " _mlf_cpu_flags "${MLF_CPU_FLAGS}")
set(CMAKE_C_FLAGS_INIT "${_mlf_cpu_flags} --specs=picolibc.specs -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT "${_mlf_cpu_flags} --specs=picolibc.specs -ffunction-sections -fdata-sections")
set(CMAKE_ASM_FLAGS_INIT "${_mlf_cpu_flags}")
set(CMAKE_EXE_LINKER_FLAGS_INIT
  "${_mlf_cpu_flags} -nostartfiles -Wl,--gc-sections")

# Look for headers and libraries only in the toolchain's sysroot, for programs on the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
