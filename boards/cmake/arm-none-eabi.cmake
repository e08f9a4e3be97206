# CMake toolchain file: bare-metal Cortex-M with arm-none-eabi-gcc and newlib-nano.
#
# The CPU comes from the board, not from this file:
#   cmake -S proj -B build -DCMAKE_TOOLCHAIN_FILE=<boards>/cmake/arm-none-eabi.cmake \
#         "-DMLF_CPU_FLAGS=-mcpu=cortex-m4;-mthumb;-mfloat-abi=hard;-mfpu=fpv4-sp-d16"
# (project_api.boards.Board.cmake_args() produces both). The project adds its linker script
# (Board.render_linker_script()) with `-T`; start-up code comes from the board's C seam, so
# the toolchain's crt0 is not linked (-nostartfiles).
#
# MLF_TOOLCHAIN_PREFIX selects another toolchain build (default: arm-none-eabi- on PATH; a
# full path prefix such as /opt/gcc-arm/bin/arm-none-eabi- works too).

set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(MLF_TOOLCHAIN_PREFIX "arm-none-eabi-" CACHE STRING "prefix of the GNU Arm bare-metal tools")
set(MLF_CPU_FLAGS "" CACHE STRING "the board's CPU flags (;-separated), from Board.cpu_flags()")

# try_compile() projects (compiler checks) run in their own scope: hand the variables on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MLF_TOOLCHAIN_PREFIX MLF_CPU_FLAGS)

if(NOT MLF_CPU_FLAGS)
  message(FATAL_ERROR
    "arm-none-eabi.cmake needs -DMLF_CPU_FLAGS=... (the board's CPU flags, e.g. "
    "\"-mcpu=cortex-m3;-mthumb;-mfloat-abi=soft\"; see Board.cmake_args())")
endif()

find_program(MLF_ARM_GCC "${MLF_TOOLCHAIN_PREFIX}gcc")
if(NOT MLF_ARM_GCC)
  message(FATAL_ERROR
    "${MLF_TOOLCHAIN_PREFIX}gcc not found (install gcc-arm-none-eabi and "
    "libnewlib-arm-none-eabi, or set MLF_TOOLCHAIN_PREFIX)")
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

string(REPLACE ";" " " _mlf_cpu_flags "${MLF_CPU_FLAGS}")
set(CMAKE_C_FLAGS_INIT "${_mlf_cpu_flags} -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT "${_mlf_cpu_flags} -ffunction-sections -fdata-sections")
set(CMAKE_ASM_FLAGS_INIT "${_mlf_cpu_flags}")
set(CMAKE_EXE_LINKER_FLAGS_INIT
  "${_mlf_cpu_flags} --specs=nano.specs --specs=nosys.specs -nostartfiles -Wl,--gc-sections")

# Look for headers and libraries only in the toolchain's sysroot, for programs on the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
