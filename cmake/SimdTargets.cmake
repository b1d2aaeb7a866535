# Which of Highway's x86 SIMD targets the kernels are compiled for.
#   NORMD_SIMD_TARGETS=all       (default) every target Highway's dynamic dispatch offers:
#                                what a binary built to run on other machines needs;
#   NORMD_SIMD_TARGETS=runnable  only those the CPU of the build machine executes, found by
#                                running Highway's own detection once at configure time.
# Why "runnable": a test run exercises only the targets its CPU executes; the others are
# compiled and never run there. CI's test build uses it (scripts/test.sh under CI=true): on a
# CPU without AVX-512 the AVX3 and AVX3_DL code took a third of the SIMD kernels' compile
# time, and the image built in the same CI run compiles every target (scripts/container/
# build.sh), so the AVX-512 code still has to compile there. Sanitized builds compile one
# target anyway (HWY_COMPILE_ONLY_STATIC, CMakeLists.txt).
set(NORMD_SIMD_TARGETS all CACHE STRING "Highway SIMD targets to compile: all or runnable")
set_property(CACHE NORMD_SIMD_TARGETS PROPERTY STRINGS all runnable)
if(NOT NORMD_SIMD_TARGETS MATCHES "^(all|runnable)$")
  message(FATAL_ERROR "NORMD_SIMD_TARGETS must be all or runnable, not '${NORMD_SIMD_TARGETS}'")
endif()

if(NORMD_SIMD_TARGETS STREQUAL "runnable" AND NOT NORMD_SANITIZE)
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    message(FATAL_ERROR "NORMD_SIMD_TARGETS=runnable is implemented for x86-64 only")
  endif()
  try_run(normd_simd_run normd_simd_compile
    SOURCE_FROM_CONTENT supported_targets.cc
      # Highway's own names: the targets this build would compile (HWY_TARGETS) that the
      # CPU does not execute; its static target (the fallback) always stays.
      "#include <cstdio>\n#include \"hwy/targets.h\"\nint main() { std::printf(\"%lld\", static_cast<long long>(HWY_TARGETS & ~hwy::SupportedTargets() & ~HWY_STATIC_TARGET)); }\n"
    # The build's HWY_WANT_AVX3_DL (CMakeLists.txt), which try_run does not inherit.
    COMPILE_DEFINITIONS -DHWY_WANT_AVX3_DL
    LINK_LIBRARIES hwy::hwy
    COMPILE_OUTPUT_VARIABLE normd_simd_compile_log
    RUN_OUTPUT_VARIABLE normd_simd_disabled)
  if(NOT normd_simd_compile OR NOT normd_simd_run EQUAL 0 OR
     NOT normd_simd_disabled MATCHES "^[0-9]+$")
    message(FATAL_ERROR "NORMD_SIMD_TARGETS=runnable: Highway's target detection failed to "
                        "build or run:\n${normd_simd_compile_log}")
  endif()
  add_compile_definitions(HWY_DISABLED_TARGETS=${normd_simd_disabled})
  message(STATUS "normd: SIMD targets: runnable on this CPU only "
                 "(HWY_DISABLED_TARGETS=${normd_simd_disabled})")
endif()
