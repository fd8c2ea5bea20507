/* ampc's version, the one place it is written: CMakeLists.txt reads it for project() (the
 * pkg-config and CMake packages), the command prints it (`ampc --version`), checkpoints
 * record it (producer_version). amp_version() (ampc.h) answers for the library linked,
 * which a program can compare with the header it was compiled against. */
#ifndef AMPC_VERSION_H
#define AMPC_VERSION_H

#define AMPC_VERSION_MAJOR 0
#define AMPC_VERSION_MINOR 1
#define AMPC_VERSION_PATCH 0
#define AMPC_VERSION_STRING "0.1.0"
/* One integer that orders releases: 10000 * major + 100 * minor + patch. */
#define AMPC_VERSION_NUMBER (AMPC_VERSION_MAJOR * 10000 + AMPC_VERSION_MINOR * 100 + AMPC_VERSION_PATCH)

#endif
