/*
 * libdrl — the store interface's former name (up to 0.3.0), kept so code
 * written for it still compiles. New code includes <drl/sys/backend.h>.
 */
#ifndef DRL_BACKEND_COMPAT_H
#define DRL_BACKEND_COMPAT_H
#include <drl/sys/backend.h>
#endif
