# What `cmake --install` puts where (FHS places under the prefix; with
# --prefix /usr, configuration in /etc), in two components:
#   server  the tern executable, its man page, the configuration the
#           package installs, the systemd unit and the logrotate snippet
#   dev     libtern: static libraries, headers under include/tern, a CMake
#           package (find_package(tern): tern::tern) and a pkg-config file
# and the Debian packages CPack makes of them (cpack -G DEB: tern and
# libtern-dev).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# -- server ----------------------------------------------------------------------
install(TARGETS tern_bin RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT server)
install(FILES dist/man/tern.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT server)
install(FILES conf/tern.toml DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME tern.toml.example COMPONENT server)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT server)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright COMPONENT server)
# The configuration goes to /etc when the prefix is /usr (a package,
# whatever prefix the build was configured with), else to PREFIX/etc; the
# unit names the executable and the configuration where they went. Decided
# when installing, since `cmake --install --prefix` and CPack choose the
# prefix then. (file(INSTALL) puts $DESTDIR in front itself.)
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  if(prefix STREQUAL \"/usr\")
    set(etc /etc)
  else()
    set(etc \"\${prefix}/etc\")
  endif()
  file(INSTALL \"${PROJECT_SOURCE_DIR}/dist/tern.toml\" DESTINATION \"\${etc}/tern\")
  file(INSTALL \"${PROJECT_SOURCE_DIR}/dist/logrotate/tern\" DESTINATION \"\${etc}/logrotate.d\")
  file(READ \"${PROJECT_SOURCE_DIR}/dist/systemd/tern.service\" unit)
  string(REPLACE /usr/sbin/tern \"\${prefix}/${CMAKE_INSTALL_SBINDIR}/tern\" unit \"\${unit}\")
  string(REPLACE /etc/tern/ \"\${etc}/tern/\" unit \"\${unit}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/dist/tern.service\" \"\${unit}\")
  file(INSTALL \"${PROJECT_BINARY_DIR}/dist/tern.service\" DESTINATION \"\${prefix}/lib/systemd/system\")
" COMPONENT server)

# -- dev: libtern ------------------------------------------------------------------
set(TERN_LIBRARY_PARTS base net http http2 files upstream fastcgi proxy tls)
# The http library's HTTP/1 half has a folder of its own (see src/CMakeLists.txt).
install(DIRECTORY src/http1 DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tern COMPONENT dev FILES_MATCHING PATTERN "*.h")
foreach(part ${TERN_LIBRARY_PARTS})
  set_target_properties(tern_${part} PROPERTIES EXPORT_NAME ${part})
  install(DIRECTORY src/${part} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tern COMPONENT dev
          FILES_MATCHING PATTERN "*.h")
  list(APPEND TERN_LIBRARY_TARGETS tern_${part})
endforeach()
install(TARGETS ${TERN_LIBRARY_TARGETS} tern EXPORT ternTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tern)
set(TERN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tern)
install(EXPORT ternTargets NAMESPACE tern:: DESTINATION ${TERN_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/ternConfig.cmake.in ${PROJECT_BINARY_DIR}/ternConfig.cmake
                              INSTALL_DESTINATION ${TERN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ternConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ternConfig.cmake ${PROJECT_BINARY_DIR}/ternConfigVersion.cmake
        DESTINATION ${TERN_CMAKE_DIR} COMPONENT dev)
# The prefix from where the file lies, so that it holds wherever the
# package is installed.
file(RELATIVE_PATH TERN_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" TERN_PC_PREFIX "${TERN_PC_PREFIX}")
configure_file(cmake/tern.pc.in ${PROJECT_BINARY_DIR}/tern.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tern.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/libtern-dev RENAME copyright COMPONENT dev)

# -- Debian packages ---------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tern)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_CONTACT "tern maintainers <tern@example.org>")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME tern)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION httpd)
set(CPACK_DEBIAN_SERVER_DESCRIPTION
    "small, fast HTTP/1.1 and HTTP/2 web server\ntern serves static files, FastCGI (PHP) applications and reverse-proxied\nupstreams over HTTP/1.1 and HTTP/2, plain or over TLS, with an event loop\nper worker thread (epoll or io_uring). MIT license.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/dist/debian/postinst ${PROJECT_SOURCE_DIR}/dist/debian/conffiles)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtern-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "tern's reactor network library (static, with headers)\nlibtern: event loops, TCP and UDP servers and clients, timers, buffers,\nHTTP/1.1, HTTP/2 and TLS, for C++20. find_package(tern) or pkg-config tern.\nMIT license.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libspdlog-dev, liburing-dev, libc-ares-dev, libssl-dev, zlib1g-dev, libbrotli-dev, pkg-config")
include(CPack)
