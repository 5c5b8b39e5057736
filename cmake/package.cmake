# Installing ecpi (`cmake --install build --prefix P`) and its Debian package
# (`make package`: CPack's DEB generator). The layout is what the binary
# expects: bin/ecpi, the runtime beside it in lib/ecpi/ (where `ecpi flags`
# looks), the runtime's protocol headers in include/ecpi/, the systemd unit
# (installed, not enabled) and the docs.
# The default prefix is the package's, /usr, so that the unit's ExecStart and
# the installed binary agree; `cmake --install build --prefix P` relocates
# everything but the unit's paths, which name the configured prefix.
if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  set(CMAKE_INSTALL_PREFIX /usr CACHE PATH "Install prefix" FORCE)
endif()
include(GNUInstallDirs)

install(TARGETS ecpi RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/runtime/ecpi_rt_abi.h ${PROJECT_SOURCE_DIR}/runtime/ecpi_rt_sampling.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ecpi)

set(ECPI_BIN_DIR ${CMAKE_INSTALL_FULL_BINDIR})
set(ECPI_DOC_DIR ${CMAKE_INSTALL_FULL_DATAROOTDIR}/doc/ecpi)
configure_file(${PROJECT_SOURCE_DIR}/scripts/systemd/ecpi-daemon.service.in
               ${PROJECT_BINARY_DIR}/ecpi-daemon.service @ONLY)
# lib/systemd/system: where Debian's packages put units (merged /usr or not).
install(FILES ${PROJECT_BINARY_DIR}/ecpi-daemon.service DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/ecpi)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/ecpi/docs
        FILES_MATCHING PATTERN "*.md")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ecpi)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ecpi maintainers <maintainers@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "eBPF continuous profiler: where the cycles went, why, and what to do")
set(CPACK_PACKAGE_DESCRIPTION
    "ecpi samples program counters and call stacks with BPF programs on perf events, keeps them in a\n"
    "compact profile database by build id, and reports per procedure, instruction and call path.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# The build is RelWithDebInfo (160 MB with its DWARF); the package carries the stripped binary.
set(CPACK_STRIP_FILES ON)
# Depends: computed by dpkg-shlibdeps from the libraries ecpi links
# (libbpf1, libdw1, libelf1, liblzma5, libstdc++6, ...), and the three ecpi
# loads at first use instead of at start-up, which dpkg-shlibdeps cannot see
# (include/ecpi/shared_library.h): libcurl4 (fleet/), libdebuginfod1 and
# Capstone (analyze/symbols/; libcapstone.so.N is in libcapstoneN).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
get_property(ecpi_capstone_soname GLOBAL PROPERTY ECPI_CAPSTONE_SONAME)
string(REGEX REPLACE "^libcapstone\\.so\\." "libcapstone" ecpi_capstone_package "${ecpi_capstone_soname}")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libcurl4, libdebuginfod1, ${ecpi_capstone_package}")
# What `ecpi flags` builds with, and `cachesim --valgrind` runs.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "clang, lld, valgrind")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/scripts/package/postinst
                                       ${PROJECT_SOURCE_DIR}/scripts/package/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
