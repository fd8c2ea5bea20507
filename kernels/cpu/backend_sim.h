/* The device simulator's own functions (kernels/cpu/backend_sim.c), for the tests that
 * open it directly; sessions reach it through the registry (backend.h, kind
 * AMP_BACKEND_SIM). */
#ifndef AMP_BACKEND_SIM_H
#define AMP_BACKEND_SIM_H

#include "backend/backend.h"

/* The device simulator: the CPU kernels behind memory the interpreter cannot dereference.
 * Its pointers are host addresses moved out of the canonical range, so a stray host read
 * of one faults (and sanitizers name it); its kernels and copies translate them, and
 * refuse a host pointer where a device one belongs. Counts its live allocations. For the
 * tests of the fallback, set->lacks ("Op,Op,...", a session's AMP_SIM_LACKS) names ops it
 * claims to have no kernel for, and set->refuses (AMP_SIM_REFUSES) ops whose kernels it
 * takes at prepare but which answer AMP_ERR_UNSUPPORTED when they run (as a CUDA kernel
 * does for a geometry its library cannot run): the executor then hands the node to the
 * fallback. */
AmpCode amp_backend_sim_open(const AmpBackendSettings *set, AmpBackend **out, AmpStatus *st);
/* Live allocations of a sim instance (0 after everything was freed); SIZE_MAX if be is
 * not the simulator. */
size_t amp_backend_sim_live(const AmpBackend *be);

#endif
