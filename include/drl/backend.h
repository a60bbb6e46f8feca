/*
 * libdrl — the store interface's former name, kept so code written for
 * releases before 0.4 still compiles. New code includes <drl/sys/backend.h>.
 */
#ifndef DRL_BACKEND_COMPAT_H
#define DRL_BACKEND_COMPAT_H
#include <drl/sys/backend.h>
#endif
