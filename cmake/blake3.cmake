# BLAKE3's official C implementation, built as the static library `blake3` from the sources Debian's
# librust-blake3-dev installs under /usr/share/cargo/registry/blake3-*/c/ (the way googletest is built from
# /usr/src). Debian ships no compiled BLAKE3 library, and the sources are not copied into this repository.
# BLAKE3_C_DIR may point at another copy of the same folder.
set(BLAKE3_C_DIR "" CACHE PATH "BLAKE3's C sources (blake3.c, blake3.h, ...); found under /usr/share/cargo/registry when empty")
if(NOT BLAKE3_C_DIR)
  file(GLOB _blake3_candidates LIST_DIRECTORIES true /usr/share/cargo/registry/blake3-*/c)
  if(_blake3_candidates)
    # Several versions side by side: take the newest.
    list(SORT _blake3_candidates COMPARE NATURAL ORDER DESCENDING)
    list(GET _blake3_candidates 0 _blake3_found)
    set(BLAKE3_C_DIR "${_blake3_found}" CACHE PATH "BLAKE3's C sources" FORCE)
  endif()
endif()
if(NOT BLAKE3_C_DIR OR NOT EXISTS "${BLAKE3_C_DIR}/blake3.h" OR NOT EXISTS "${BLAKE3_C_DIR}/blake3_dispatch.c")
  message(FATAL_ERROR "BLAKE3's C sources were not found (looked in '${BLAKE3_C_DIR}' and "
                      "/usr/share/cargo/registry/blake3-*/c/): install the Debian package librust-blake3-dev "
                      "(scripts/install-deps.sh does), or set BLAKE3_C_DIR to a folder holding blake3.c and blake3.h")
endif()

set(_blake3_sources ${BLAKE3_C_DIR}/blake3.c ${BLAKE3_C_DIR}/blake3_dispatch.c ${BLAKE3_C_DIR}/blake3_portable.c)
set(_blake3_defines "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND NOT WIN32)
  # The hand-written x86-64 assembly: SSE2, SSE4.1, AVX2 and AVX-512, chosen at run time by blake3_dispatch.c.
  enable_language(ASM)
  list(APPEND _blake3_sources
    ${BLAKE3_C_DIR}/blake3_sse2_x86-64_unix.S
    ${BLAKE3_C_DIR}/blake3_sse41_x86-64_unix.S
    ${BLAKE3_C_DIR}/blake3_avx2_x86-64_unix.S
    ${BLAKE3_C_DIR}/blake3_avx512_x86-64_unix.S)
  set(_blake3_path "x86-64 assembly (SSE2/SSE4.1/AVX2/AVX-512, dispatched at run time)")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  # blake3_impl.h turns NEON on by itself on AArch64.
  list(APPEND _blake3_sources ${BLAKE3_C_DIR}/blake3_neon.c)
  set(_blake3_defines BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2 BLAKE3_NO_AVX512)
  set(_blake3_path "portable C + NEON")
else()
  set(_blake3_defines BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2 BLAKE3_NO_AVX512 BLAKE3_USE_NEON=0)
  set(_blake3_path "portable C")
endif()

# Third-party C: built without the project's warning flags.
add_library(blake3 STATIC ${_blake3_sources})
target_include_directories(blake3 SYSTEM PUBLIC ${BLAKE3_C_DIR})
if(_blake3_defines)
  target_compile_definitions(blake3 PRIVATE ${_blake3_defines})
endif()
set_target_properties(blake3 PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 99)
message(STATUS "BLAKE3: C sources at ${BLAKE3_C_DIR}, ${_blake3_path}")
