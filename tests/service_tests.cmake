# Tests of the transport room and of the whole service over loopback gRPC.
add_executable(server_test
  server/validation_test.cc
  server/robustness_test.cc
  server/scheduler_test.cc
  server/deepnorm_test.cc
  server/config_test.cc
  server/metrics_test.cc
  server/memory_budget_test.cc
  server/memory_trim_test.cc
  server/live_calls_test.cc
  server/machine_steal_test.cc)
target_include_directories(server_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(server_test PRIVATE normd_transport normd_client normd_common normd_testing
  GTest::gtest_main GTest::gmock)
gtest_discover_tests(server_test DISCOVERY_TIMEOUT 60)

# normd's global operator new, in a program of its own: the replacement is the whole
# program's, as in normd.
add_executable(aligned_new_test common/aligned_new_test.cc)
target_include_directories(aligned_new_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(aligned_new_test PRIVATE normd_aligned_new normd_proto GTest::gtest_main)
gtest_discover_tests(aligned_new_test DISCOVERY_TIMEOUT 60)

# The client library and normbench's pieces that need no server: the latency histogram
# against exact percentiles, tensor helpers, workloads, --verify's reference.
add_executable(client_test client/histogram_test.cc client/client_lib_test.cc)
target_include_directories(client_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(client_test PRIVATE normd_load GTest::gtest_main)
gtest_discover_tests(client_test DISCOVERY_TIMEOUT 60)

add_executable(integration_test integration/service_test.cc integration/serving_test.cc
  integration/error_codes_test.cc integration/retry_test.cc
  integration/transport_test.cc integration/chunked_call_test.cc integration/shared_memory_test.cc
  integration/hostile_input_test.cc integration/fault_test.cc integration/tsan_control_test.cc)
target_include_directories(integration_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(integration_test PRIVATE normd_transport normd_load normd_testing
  GTest::gtest_main)
gtest_discover_tests(integration_test DISCOVERY_TIMEOUT 60)

# The Python suites, Debian's /usr/bin/python3 (python3-torch, -numpy, -grpcio,
# -prometheus-client) against the built binaries, by directory:
#   conformance/: every op against PyTorch (conformance), normctl end to end (normctl);
#   operations/:  configuration, JSON logs, metrics scraped by Debian's prometheus, the
#                 drain on SIGTERM also under normbench load (operations); TLS, mutual TLS,
#                 rotation and bearer tokens with openssl-made certificates (security);
#                 normbench (normbench); the memory budget under max-size requests (memory).
set(NORMD_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch, numpy and grpcio")
foreach(entry conformance/conformance conformance/normctl operations/operations
              operations/security operations/normbench operations/memory)
  get_filename_component(dir ${entry} DIRECTORY)
  get_filename_component(suite ${entry} NAME)
  add_test(NAME python_${suite}
    COMMAND ${NORMD_PYTHON} -m unittest -v test_${suite}
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${dir})
  set_tests_properties(python_${suite} PROPERTIES
    TIMEOUT 600
    ENVIRONMENT "NORMD_BIN=$<TARGET_FILE:normd>;NORMCTL_BIN=$<TARGET_FILE:normctl>;NORMBENCH_BIN=$<TARGET_FILE:normbench>;NORMD_EXAMPLE_BIN=$<TARGET_FILE:normd-example>;NORMD_PROTO_DIR=${PROJECT_SOURCE_DIR}/proto;PYTHONDONTWRITEBYTECODE=1;NORMD_SANITIZE=${NORMD_SANITIZE}")
endforeach()

# The rejection benchmark's own checks, at a low rate and without reading its timings:
# every call on the held-full queue answered UNAVAILABLE, none lost or answered with
# another id, and every held request answered OK once the backend's gate opens.
add_test(NAME rejection_bench_checks
  COMMAND $<TARGET_FILE:normd-rejection-bench> --rate 1000 --duration 0.5)
set_tests_properties(rejection_bench_checks PROPERTIES TIMEOUT 120)

# The overload benchmark's invariants, briefly and without reading its timings: at twice
# the measured capacity every call is answered once, OK or with a documented refusal,
# normd stays within --max-memory and serves afterwards.
add_test(NAME overload_bench_checks
  COMMAND ${NORMD_PYTHON} ${PROJECT_SOURCE_DIR}/bench/overload_bench.py --build ${CMAKE_BINARY_DIR}
          --duration 2)
set_tests_properties(overload_bench_checks PROPERTIES TIMEOUT 300
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;NORMD_SANITIZE=${NORMD_SANITIZE}")

# The wire contract: buf lint (STANDARD rules, proto/buf.yaml) and buf breaking against the
# committed v1 baseline, with the buf that tools/package.json pins (scripts/install-deps.sh
# --test installs it).
set(NORMD_BUF ${PROJECT_SOURCE_DIR}/tools/node_modules/.bin/buf CACHE FILEPATH "buf CLI")
add_test(NAME buf_lint COMMAND ${NORMD_BUF} lint proto WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME buf_breaking
  COMMAND ${NORMD_BUF} breaking proto --against proto/normd/v1/baseline.binpb
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})

# The rooms: kernels and scheduling never reach gRPC or protobuf, neither through their
# link dependencies nor through a symbol their objects use.
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/rooms/link_deps.txt CONTENT
"normd_kernels: $<TARGET_PROPERTY:normd_kernels,LINK_LIBRARIES> $<TARGET_PROPERTY:normd_kernels,INTERFACE_LINK_LIBRARIES>
normd_scheduling: $<TARGET_PROPERTY:normd_scheduling,LINK_LIBRARIES> $<TARGET_PROPERTY:normd_scheduling,INTERFACE_LINK_LIBRARIES>
")
add_test(NAME room_check
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/rooms/check_rooms.sh ${CMAKE_BINARY_DIR}/rooms/link_deps.txt
          $<TARGET_FILE:normd_kernels> $<TARGET_FILE:normd_scheduling>)

# The client as a package: installed into a scratch prefix, then a small consumer project
# (find_package(normd CONFIG), normd::client) is configured, built and run against a live
# normd.
add_test(NAME client_package
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/package/consumer_test.sh ${CMAKE_BINARY_DIR}
          $<TARGET_FILE:normd>)
set_tests_properties(client_package PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)

# The container image and the Kubernetes manifests, as an operator meets them.
add_test(NAME dockerfile_lint
  COMMAND ${PROJECT_SOURCE_DIR}/tools/node_modules/.bin/dockerfilelint Dockerfile
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME k8s_manifests
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/k8s/manifests_test.sh ${PROJECT_SOURCE_DIR})
# Builds the image with podman from a locally made debian:12 and runs normd from it (about
# 10 minutes on 2 cores, 4 GB of scratch storage, removed afterwards). Needs root.
add_test(NAME container_image
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/container/image_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(container_image PROPERTIES TIMEOUT 2400 RUN_SERIAL TRUE)
