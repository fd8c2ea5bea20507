/* libampc.so is the layers' archives linked whole (CMakeLists.txt); CMake wants one source
 * of the target's own, and this is it. */
typedef int amp_libampc_so_unit;
