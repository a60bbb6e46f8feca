/*
 * JS arguments in, JS errors out. Every check here throws a TypeError
 * (wrong type) or RangeError (a value out of range) with a message naming
 * the argument; a drl error becomes an Error whose message is the
 * library's own and whose .code is the library's name for it.
 */
#include "addon.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

napi_value make_drl_error(napi_env env, int code, const char *message,
			  int type_error)
{
	napi_value msg, codev, e = NULL;
	napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
	napi_create_string_utf8(env, drl_err_name(code), NAPI_AUTO_LENGTH,
				&codev);
	if (code == DRL_EINVAL && type_error)
		napi_create_type_error(env, NULL, msg, &e);
	else if (code == DRL_EINVAL || code == DRL_ERANGE)
		napi_create_range_error(env, NULL, msg, &e);
	else
		napi_create_error(env, NULL, msg, &e);
	if (e != NULL)
		napi_set_named_property(env, e, "code", codev);
	return e;
}

napi_value throw_drl(napi_env env, int code, const char *message,
		     int type_error)
{
	napi_value e = make_drl_error(env, code, message, type_error);
	if (e != NULL)
		napi_throw(env, e);
	return NULL;
}

int get_key(napi_env env, napi_value v, keybuf *k)
{
	bool is_buf = false;
	/* A string (napi_string_expected otherwise): no napi_typeof first,
	 * one Node-API call less per decision. */
	k->owned = NULL;
	if (napi_get_value_string_utf8(env, v, k->small, sizeof k->small,
				       &k->len) == napi_ok) {
		/* V8 stops before a character that does not fit whole (up
		 * to 4 bytes): with 4 bytes of room left over, none was cut. */
		k->bytes = k->small;
		if (k->len + 4 < sizeof k->small)
			return 0;
		/* Perhaps cut: ask for the whole length, then copy. */
		napi_get_value_string_utf8(env, v, NULL, 0, &k->len);
		if ((k->owned = malloc(k->len + 1)) == NULL) {
			throw_drl(env, DRL_ENOMEM, "key: out of memory", 0);
			return -1;
		}
		napi_get_value_string_utf8(env, v, k->owned, k->len + 1,
					   &k->len);
		k->bytes = k->owned;
		return 0;
	}
	if (napi_is_buffer(env, v, &is_buf) == napi_ok && is_buf) {
		void *data = NULL;
		napi_get_buffer_info(env, v, &data, &k->len);
		/* An empty Buffer has no data (NULL): its bytes are "", so the
		 * library refuses it as the empty string, for its length, not
		 * as a NULL key. */
		k->bytes = k->len ? data : "";
		return 0;
	}
	napi_throw_type_error(env, "DRL_EINVAL",
			      "key must be a string or a Buffer");
	return -1;
}

void keybuf_free(keybuf *k)
{
	free(k->owned);
	k->owned = NULL;
}

/* 0 when v is of type `type`; else -1 with a TypeError "WHAT must be a
 * NAME" thrown. */
static int want_type(napi_env env, napi_value v, napi_valuetype type,
		     const char *what, const char *name)
{
	napi_valuetype t;
	char msg[160];
	napi_typeof(env, v, &t);
	if (t == type)
		return 0;
	snprintf(msg, sizeof msg, "%s must be a %s", what, name);
	napi_throw_type_error(env, "DRL_EINVAL", msg);
	return -1;
}

int get_points(napi_env env, napi_value v, const char *what, int64_t *out)
{
	double d = 0;
	/* napi_number_expected for anything else: then the TypeError. */
	if (napi_get_value_double(env, v, &d) != napi_ok &&
	    want_type(env, v, napi_number, what, "number") != 0)
		return -1;
	return points_of(env, d, what, out);
}

int points_of(napi_env env, double d, const char *what, int64_t *out)
{
	char msg[160];
	/* The usual case first, without floor(): a whole number in range. */
	if (d >= 0 && d <= 9007199254740991.0 && d == (double)(int64_t)d) {
		*out = (int64_t)d;
		return 0;
	}
	if (!isfinite(d) || d != floor(d)) {
		snprintf(msg, sizeof msg, "%s must be a whole number, got %g",
			 what, d);
		napi_throw_range_error(env, "DRL_EINVAL", msg);
		return -1;
	}
	/* 2^53: past it a Number cannot say which integer it is. */
	if (fabs(d) > 9007199254740991.0) {
		snprintf(msg, sizeof msg,
			 "%s %.0f is above 2^53 - 1 (Number.MAX_SAFE_INTEGER)",
			 what, d);
		napi_throw_range_error(env, "DRL_EINVAL", msg);
		return -1;
	}
	*out = (int64_t)d;
	return 0;
}

char *get_string(napi_env env, napi_value v, const char *what)
{
	size_t n = 0;
	char msg[160];
	if (want_type(env, v, napi_string, what, "string") != 0)
		return NULL;
	napi_get_value_string_utf8(env, v, NULL, 0, &n);
	char *s = malloc(n + 1);
	if (s == NULL) {
		throw_drl(env, DRL_ENOMEM, "out of memory", 0);
		return NULL;
	}
	napi_get_value_string_utf8(env, v, s, n + 1, &n);
	if (strlen(s) != n) {
		free(s);
		snprintf(msg, sizeof msg, "%s must not contain NUL", what);
		napi_throw_type_error(env, "DRL_EINVAL", msg);
		return NULL;
	}
	return s;
}

lim *get_lim(napi_env env, napi_value v)
{
	bool ok = false;
	void *p = NULL;
	/* Not an external: napi_invalid_arg, nothing thrown (no
	 * napi_typeof first: one Node-API call less per decision). */
	if (napi_get_value_external(env, v, &p) == napi_ok && p &&
	    napi_check_object_type_tag(env, v, &lim_tag, &ok) == napi_ok && ok)
		return p;
	napi_throw_type_error(env, "DRL_EINVAL",
			      "not a limiter handle (use RateLimiterDrl)");
	return NULL;
}
