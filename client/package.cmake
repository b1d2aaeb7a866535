# Installs the client as a CMake package:
#   cmake --install build --prefix /opt/normd
#   find_package(normd CONFIG REQUIRED)    # with CMAKE_PREFIX_PATH=/opt/normd
#   target_link_libraries(app PRIVATE normd::client)
# The package holds normd::client, normd::proto (the generated messages and stubs it
# exposes) and their headers; the Debian packages of gRPC, protobuf and Abseil are its
# dependencies.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(normd_proto PROPERTIES EXPORT_NAME proto)
target_include_directories(normd_proto PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS normd_client normd_proto EXPORT normdTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT client
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/normd
        ${CMAKE_CURRENT_BINARY_DIR}/include/normd
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT client)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/gen/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT client
        FILES_MATCHING PATTERN "*.pb.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/proto/normd ${PROJECT_SOURCE_DIR}/proto/google
        ${PROJECT_SOURCE_DIR}/proto/grpc
        DESTINATION ${CMAKE_INSTALL_DATADIR}/normd/proto COMPONENT client
        FILES_MATCHING PATTERN "*.proto")

set(NORMD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/normd)
install(EXPORT normdTargets NAMESPACE normd:: DESTINATION ${NORMD_CMAKE_DIR} COMPONENT client)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/normdConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/normdConfig.cmake INSTALL_DESTINATION ${NORMD_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/normdConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/normdConfig.cmake
        ${CMAKE_CURRENT_BINARY_DIR}/normdConfigVersion.cmake
        DESTINATION ${NORMD_CMAKE_DIR} COMPONENT client)
