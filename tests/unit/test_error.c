/*
 * Error codes and messages: the X-macro list, drl_strerror(),
 * drl_err_name(), drl_error_set() and drl_version().
 */
#include <drl/drl.h>
#include <drl/backend.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Every code of DRL_ERRNO_MAP with its expected name and text. */
struct code_row {
	int code;
	const char *name;
	const char *text;
};

static const struct code_row rows[] = {
#define ROW(name, value, text) {DRL_##name, "DRL_" #name, text},
	DRL_ERRNO_MAP(ROW)
#undef ROW
};

#define NROWS (sizeof rows / sizeof rows[0])

/* Codes no list entry uses. */
static const int unknown_codes[] = {1, 2, -100, -13, 12345, INT_MAX, INT_MIN};

#define NUNKNOWN (sizeof unknown_codes / sizeof unknown_codes[0])

/* Each code is negative, equal to its list value, and gets exactly the
 * name and text the list gives it. */
static void test_map_matches_functions(void **state)
{
	(void)state;
	assert_true(NROWS >= 9);
	for (size_t i = 0; i < NROWS; i++) {
		assert_true(rows[i].code < 0);
		assert_non_null(drl_strerror(rows[i].code));
		assert_non_null(drl_err_name(rows[i].code));
		assert_string_equal(drl_strerror(rows[i].code), rows[i].text);
		assert_string_equal(drl_err_name(rows[i].code), rows[i].name);
	}
	assert_int_equal(DRL_EINVAL, -1);
	assert_string_equal(drl_err_name(DRL_EINVAL), "DRL_EINVAL");
}

/* No two codes share a value, a name or a text; none uses DRL_OK's. */
static void test_codes_distinct(void **state)
{
	(void)state;
	for (size_t i = 0; i < NROWS; i++) {
		assert_int_not_equal(rows[i].code, DRL_OK);
		assert_string_not_equal(drl_strerror(rows[i].code),
					drl_strerror(DRL_OK));
		assert_string_not_equal(drl_err_name(rows[i].code),
					drl_err_name(DRL_OK));
		for (size_t j = i + 1; j < NROWS; j++) {
			assert_int_not_equal(rows[i].code, rows[j].code);
			assert_string_not_equal(drl_strerror(rows[i].code),
						drl_strerror(rows[j].code));
			assert_string_not_equal(drl_err_name(rows[i].code),
						drl_err_name(rows[j].code));
		}
	}
}

/* DRL_OK has its own text and name. */
static void test_ok(void **state)
{
	(void)state;
	assert_int_equal(DRL_OK, 0);
	assert_non_null(drl_strerror(DRL_OK));
	assert_string_equal(drl_err_name(DRL_OK), "DRL_OK");
}

/* Every unknown code gets one generic text and name, never NULL, and
 * different from every known code's. */
static void test_unknown_codes(void **state)
{
	const char *text = drl_strerror(unknown_codes[0]);
	const char *name = drl_err_name(unknown_codes[0]);

	(void)state;
	assert_non_null(text);
	assert_non_null(name);
	assert_true(strlen(text) > 0);
	for (size_t i = 0; i < NUNKNOWN; i++) {
		assert_string_equal(drl_strerror(unknown_codes[i]), text);
		assert_string_equal(drl_err_name(unknown_codes[i]), name);
	}
	for (size_t i = 0; i < NROWS; i++) {
		assert_string_not_equal(drl_strerror(rows[i].code), text);
		assert_string_not_equal(drl_err_name(rows[i].code), name);
	}
	assert_string_not_equal(drl_strerror(DRL_OK), text);
}

/* drl_error_set fills code and the formatted message, returns the code. */
static void test_error_set_fills(void **state)
{
	drl_error err;

	(void)state;
	memset(&err, 'x', sizeof err);
	assert_int_equal(
		drl_error_set(&err, DRL_ESTORE, "bad %s #%d", "part", 7),
		DRL_ESTORE);
	assert_int_equal(err.code, DRL_ESTORE);
	assert_string_equal(err.message, "bad part #7");

	assert_int_equal(drl_error_set(&err, DRL_EINVAL, "%s", ""), DRL_EINVAL);
	assert_int_equal(err.code, DRL_EINVAL);
	assert_string_equal(err.message, "");
}

/* A message longer than the buffer is cut to DRL_ERROR_MESSAGE_MAX - 1
 * bytes and NUL-terminated, its start kept; the bytes after it are left
 * alone. */
static void test_error_set_truncates(void **state)
{
	char longmsg[3 * DRL_ERROR_MESSAGE_MAX];
	struct {
		drl_error err;
		char guard[16];
	} s;

	(void)state;
	for (size_t i = 0; i < sizeof longmsg - 1; i++)
		longmsg[i] = (char)('a' + i % 26);
	longmsg[sizeof longmsg - 1] = '\0';
	memset(&s, 'x', sizeof s);

	assert_int_equal(drl_error_set(&s.err, DRL_ERANGE, "%s", longmsg),
			 DRL_ERANGE);
	assert_int_equal(s.err.code, DRL_ERANGE);
	assert_int_equal(s.err.message[DRL_ERROR_MESSAGE_MAX - 1], '\0');
	assert_int_equal(strlen(s.err.message), DRL_ERROR_MESSAGE_MAX - 1);
	assert_memory_equal(s.err.message, longmsg, DRL_ERROR_MESSAGE_MAX - 1);
	for (size_t i = 0; i < sizeof s.guard; i++)
		assert_int_equal(s.guard[i], 'x');

	/* Exactly the capacity: fits with its NUL. */
	longmsg[DRL_ERROR_MESSAGE_MAX - 1] = '\0';
	drl_error_set(&s.err, DRL_EINVAL, "%s", longmsg);
	assert_string_equal(s.err.message, longmsg);
}

/* A NULL error struct is allowed: the code still comes back. */
static void test_error_set_null(void **state)
{
	(void)state;
	assert_int_equal(drl_error_set(NULL, DRL_ENOMEM, "x %d", 1),
			 DRL_ENOMEM);
	assert_int_equal(drl_error_set(NULL, DRL_OK, "fine"), DRL_OK);
}

/* drl_version() is the header's version string, "MAJOR.MINOR.PATCH". */
static void test_version(void **state)
{
	char expect[32];

	(void)state;
	assert_non_null(drl_version());
	assert_string_equal(drl_version(), DRL_VERSION_STRING);
	snprintf(expect, sizeof expect, "%d.%d.%d", DRL_VERSION_MAJOR,
		 DRL_VERSION_MINOR, DRL_VERSION_PATCH);
	assert_string_equal(drl_version(), expect);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_matches_functions),
		cmocka_unit_test(test_codes_distinct),
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_unknown_codes),
		cmocka_unit_test(test_error_set_fills),
		cmocka_unit_test(test_error_set_truncates),
		cmocka_unit_test(test_error_set_null),
		cmocka_unit_test(test_version),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
