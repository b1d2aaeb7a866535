# Tests of the transport room and of the whole service over loopback gRPC.
add_executable(server_test
  server/validation_test.cc
  server/robustness_test.cc
  server/scheduler_test.cc
  server/machine_steal_test.cc)
target_include_directories(server_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(server_test PRIVATE normd_server_lib normd_common GTest::gtest_main
  GTest::gmock)
gtest_discover_tests(server_test DISCOVERY_TIMEOUT 60)

add_executable(integration_test integration/service_test.cc integration/serving_test.cc
  integration/transport_test.cc)
target_include_directories(integration_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(integration_test PRIVATE normd_server_lib normd_load GTest::gtest_main)
gtest_discover_tests(integration_test DISCOVERY_TIMEOUT 60)

# The PyTorch conformance suite and the normctl CLI suite: Debian's /usr/bin/python3 with
# python3-torch, python3-numpy and python3-grpcio, against the built binaries.
set(NORMD_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch, numpy and grpcio")
foreach(suite conformance normctl)
  add_test(NAME python_${suite}
    COMMAND ${NORMD_PYTHON} -m unittest -v test_${suite}
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/conformance)
  set_tests_properties(python_${suite} PROPERTIES
    TIMEOUT 600
    ENVIRONMENT "NORMD_BIN=$<TARGET_FILE:normd>;NORMCTL_BIN=$<TARGET_FILE:normctl>;NORMD_PROTO_DIR=${PROJECT_SOURCE_DIR}/proto;PYTHONDONTWRITEBYTECODE=1")
endforeach()

# The rejection benchmark's own checks, at a low rate and without reading its timings:
# every call on the held-full queue answered UNAVAILABLE, none lost or answered with
# another id, and every held request answered OK once the backend's gate opens.
add_test(NAME rejection_bench_checks
  COMMAND $<TARGET_FILE:normd-rejection-bench> --rate 1000 --duration 0.5)
set_tests_properties(rejection_bench_checks PROPERTIES TIMEOUT 120)
