/* Error codes, messages and the version string. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

/* A code with its name and text. */
typedef struct code_row {
	int code;
	const char *name, *text;
} code_row;

/* Every code, from the one list (drl.h). */
#define DRL__ERRNO_ROW(name, value, text) {DRL_##name, "DRL_" #name, text},
static const code_row rows[] = {DRL__ERRNO_ROW(OK, 0, "success")
					DRL_ERRNO_MAP(DRL__ERRNO_ROW)};
#undef DRL__ERRNO_ROW

/* code's row, or NULL for a code not in the list. */
static const code_row *find(int code)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (rows[i].code == code)
			return &rows[i];
	return NULL;
}

const char *drl_strerror(int code)
{
	const code_row *r = find(code);
	return r ? r->text : "unknown error";
}

const char *drl_err_name(int code)
{
	const code_row *r = find(code);
	return r ? r->name : "DRL_EUNKNOWN";
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
