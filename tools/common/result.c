/* A decision as the drl tools print it: see result.h. */
#include "result.h"

#include <drl/drl.h>

const char *tl_path_name(int path)
{
	switch (path) {
	case DRL_PATH_STORE:
		return "store";
	case DRL_PATH_LOCAL:
		return "local";
	case DRL_PATH_FAIL_OPEN:
		return "fail_open";
	case DRL_PATH_FAIL_CLOSED:
		return "fail_closed";
	case DRL_PATH_NEAR:
		return "near";
	}
	return "unknown";
}

long long tl_ceil_div(int64_t us, int64_t unit)
{
	if (us < 0)
		return -1;
	return (long long)(us / unit + (us % unit != 0));
}
