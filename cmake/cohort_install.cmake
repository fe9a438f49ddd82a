# Installs cohort as a CMake package: headers, the exported INTERFACE target, cohortConfig.cmake
# with its version file, and FindNCCL.cmake beside them for consumers' find_package(cohort).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(COHORT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/cohort" CACHE STRING
    "Where cohort's CMake package files are installed")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS cohort EXPORT cohortTargets)
install(EXPORT cohortTargets NAMESPACE cohort:: DESTINATION "${COHORT_INSTALL_CMAKEDIR}")

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/cohortConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cohortConfig.cmake" INSTALL_DESTINATION "${COHORT_INSTALL_CMAKEDIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES
  "${PROJECT_BINARY_DIR}/cohortConfig.cmake"
  "${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/cohort_dependencies.cmake"
  DESTINATION "${COHORT_INSTALL_CMAKEDIR}")
