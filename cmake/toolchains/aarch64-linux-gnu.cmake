# Cross-building for 64-bit ARM Linux on a Debian/Ubuntu host: the distribution's cross compiler
# (g++-aarch64-linux-gnu) and its multiarch :arm64 libraries (scripts/setup.sh installs both), the
# binaries run under qemu-aarch64 (qemu-user) wherever CTest or the build runs one.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: libraries, CMake packages and pkg-config files under the /usr/lib/aarch64-linux-gnu
# tree; headers shared with the host under /usr/include.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# The emulated programs load the multiarch dynamic loader and C library (libc6:arm64), the pair
# the :arm64 libraries come with: with -L /usr/aarch64-linux-gnu the cross package's loader would
# meet the multiarch libc.so.6 of another build, and pthread_create then loops forever.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
