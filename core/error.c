/* Error codes, messages and the version string. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

const char *drl_strerror(int code)
{
	switch (code) {
	case DRL_OK:
		return "success";
#define DRL__ERRNO_TEXT(name, value, text)                                     \
	case DRL_##name:                                                       \
		return text;
		DRL_ERRNO_MAP(DRL__ERRNO_TEXT)
#undef DRL__ERRNO_TEXT
	}
	return "unknown error";
}

const char *drl_err_name(int code)
{
	switch (code) {
	case DRL_OK:
		return "DRL_OK";
#define DRL__ERRNO_NAME(name, value, text)                                     \
	case DRL_##name:                                                       \
		return "DRL_" #name;
		DRL_ERRNO_MAP(DRL__ERRNO_NAME)
#undef DRL__ERRNO_NAME
	}
	return "DRL_EUNKNOWN";
}

const char *drl_version(void)
{
	return DRL_VERSION_STRING;
}

/* err NULL: nothing written. fmt NULL: the message is the code's text
 * (drl_strerror), never a crash. Returns code either way. */
int drl_error_set(drl_error *err, int code, const char *fmt, ...)
{
	if (err == NULL)
		return code;
	err->code = code;
	if (fmt == NULL) {
		snprintf(err->message, sizeof err->message, "%s",
			 drl_strerror(code));
		return code;
	}
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	if (n < 0)
		err->message[0] = '\0';
	return code;
}
