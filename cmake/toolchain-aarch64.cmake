# Cross build for aarch64 Linux on an x86-64 Debian host (.ci/arm64 makes
# what it needs): Debian's gcc-aarch64-linux-gnu, the target's libraries in
# a sysroot of unpacked arm64 packages (ULPPROF_ARM64_SYSROOT), and the tests
# run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
#         -DULPPROF_ARM64_SYSROOT=/path/to/sysroot
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# try_compile re-reads this file in a fresh project: pass the sysroot on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ULPPROF_ARM64_SYSROOT)
if(NOT ULPPROF_ARM64_SYSROOT AND DEFINED ENV{ULPPROF_ARM64_SYSROOT})
  set(ULPPROF_ARM64_SYSROOT "$ENV{ULPPROF_ARM64_SYSROOT}")
endif()
if(NOT ULPPROF_ARM64_SYSROOT)
  message(FATAL_ERROR "toolchain-aarch64: set ULPPROF_ARM64_SYSROOT (the unpacked arm64 "
    "packages: .ci/arm64 makes it)")
endif()
set(ULPPROF_ARM64_SYSROOT "${ULPPROF_ARM64_SYSROOT}" CACHE PATH "Unpacked arm64 packages")
set(_ulp_multi aarch64-linux-gnu)
set(_ulp_libdirs "${ULPPROF_ARM64_SYSROOT}/usr/lib/${_ulp_multi}"
  "${ULPPROF_ARM64_SYSROOT}/lib/${_ulp_multi}")

# Headers and libraries from the sysroot (and the cross toolchain's own
# /usr/aarch64-linux-gnu), programs from the host.
set(CMAKE_FIND_ROOT_PATH "${ULPPROF_ARM64_SYSROOT}" /usr/${_ulp_multi})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE ${_ulp_multi})

# pkg-config reads the sysroot's .pc files only, and prefixes their paths.
set(ENV{PKG_CONFIG_LIBDIR} "${ULPPROF_ARM64_SYSROOT}/usr/lib/${_ulp_multi}/pkgconfig:${ULPPROF_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${ULPPROF_ARM64_SYSROOT}")
set(ENV{PKG_CONFIG_PATH} "")

# HDF5: Debian's serial build, found by path under the sysroot.  The host's
# h5cc would name the libraries of a static link the sysroot lacks (-lcurl,
# -lcrypto): a wrapper that fails sends FindHDF5 to its search by path.
set(HDF5_C_COMPILER_EXECUTABLE /bin/false CACHE FILEPATH "Not the host's h5cc" FORCE)
set(HDF5_PREFER_PARALLEL OFF)

# The linker finds what the sysroot's shared libraries need (libhdf5 needs
# libcurl, libsz...), and qemu's loader finds them at run time.
string(REPLACE ";" ":" _ulp_path "${_ulp_libdirs}")
foreach(_kind EXE SHARED MODULE)
  set(CMAKE_${_kind}_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_ulp_path}")
endforeach()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${_ulp_multi}
  -E LD_LIBRARY_PATH=${_ulp_path})
