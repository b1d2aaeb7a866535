# Tests of the transport room and of the whole service over loopback gRPC.
add_executable(server_test
  server/validation_test.cc)
target_include_directories(server_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(server_test PRIVATE normd_server_lib GTest::gtest_main GTest::gmock)
gtest_discover_tests(server_test DISCOVERY_TIMEOUT 60)

add_executable(integration_test integration/service_test.cc)
target_include_directories(integration_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(integration_test PRIVATE normd_server_lib normd_client GTest::gtest_main)
gtest_discover_tests(integration_test DISCOVERY_TIMEOUT 60)
