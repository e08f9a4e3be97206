"""Build: a generated project → firmware, with CMake and the board's toolchain."""

from __future__ import annotations

from .cmake import BuildResult, build, parse_memory_usage
from .tools import CMakeTool, find_cmake, find_ninja

__all__ = ["BuildResult", "CMakeTool", "build", "find_cmake", "find_ninja", "parse_memory_usage"]
