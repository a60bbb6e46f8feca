/*
 * drld's loader of envoyproxy/ratelimit's YAML directory
 * (drld/envoy/envoy_config.c): a load is one snapshot of a Kubernetes
 * ConfigMap volume while its "..data" link flips on.
 *
 * The flips happen through the loader's test hook, at exactly the moments
 * that once made a mixed config (issue 45, hole 7): after the load read
 * the first half of the files from version 1, "..data" flips to version
 * 2 (the second half is read there), and during the check that nothing
 * changed it flips back to 1 before the first half is looked at and to 2
 * before the second: every file then looks as it was read, though the
 * halves came from two versions. SIGHUP during continuous flips hit that
 * in 1 to 3 reloads of 30.
 */
#include "envoy/envoy_config.h"

#include <drl/drl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NFILES 4

static char dir[64];

/* Point dir/..data at ..vV by a rename, as the kubelet does. */
static void flip(int v)
{
	char tmp[128], link[128], target[16];
	snprintf(tmp, sizeof tmp, "%s/..data_tmp", dir);
	snprintf(link, sizeof link, "%s/..data", dir);
	snprintf(target, sizeof target, "..v%d", v);
	assert_int_equal(symlink(target, tmp), 0);
	assert_int_equal(rename(tmp, link), 0);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* dir: ..v1 and ..v2 with NFILES domains each (requests_per_unit: the
 * version), ..data -> ..v1, dNN.yaml -> ..data/dNN.yaml. */
static void make_volume(void)
{
	char path[160], text[200];
	snprintf(dir, sizeof dir, "/tmp/drl-envoy-config-XXXXXX");
	assert_non_null(mkdtemp(dir));
	for (int v = 1; v <= 2; v++) {
		snprintf(path, sizeof path, "%s/..v%d", dir, v);
		assert_int_equal(mkdir(path, 0700), 0);
		for (int i = 0; i < NFILES; i++) {
			snprintf(path, sizeof path, "%s/..v%d/d%02d.yaml", dir,
				 v, i);
			snprintf(text, sizeof text,
				 "domain: d%02d\ndescriptors:\n  - key: k\n"
				 "    rate_limit: {unit: hour, "
				 "requests_per_unit: %d}\n",
				 i, v);
			write_file(path, text);
		}
	}
	flip(1);
	for (int i = 0; i < NFILES; i++) {
		char target[32];
		snprintf(target, sizeof target, "..data/d%02d.yaml", i);
		snprintf(path, sizeof path, "%s/d%02d.yaml", dir, i);
		assert_int_equal(symlink(target, path), 0);
	}
}

static void remove_volume(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* The flips of the header comment. */
static void aba(int step, size_t i)
{
	if (step == DRLD_ENVOY_HOOK_READ && i == NFILES / 2 - 1)
		flip(2);
	else if (step == DRLD_ENVOY_HOOK_CHECK && i == 0)
		flip(1);
	else if (step == DRLD_ENVOY_HOOK_CHECK && i == NFILES / 2)
		flip(2);
}

static void test_attack_snapshot_while_data_flips(void **state)
{
	(void)state;
	drl_store *store = NULL;
	struct drld_envoy_stats *stats = NULL;
	struct drld_envoy_config *c = NULL;
	char msg[DRLD_ENVOY_MSG_MAX];
	make_volume();
	assert_int_equal(drl_store_open(&store, "memory://", NULL), 0);
	assert_int_equal(drld_envoy_stats_new(&stats), 0);
	drld_envoy_load_hook = aba;
	int rc = drld_envoy_config_load(&c, dir, store, 0, stats, msg,
					sizeof msg);
	drld_envoy_load_hook = NULL;
	if (rc != 0)
		fail_msg("load: %s", msg);
	assert_int_equal(c->ndomains, NFILES);
	uint32_t first =
		c->domains[0].root.children[0].limit->requests_per_unit;
	for (size_t i = 1; i < c->ndomains; i++) {
		uint32_t v =
			c->domains[i].root.children[0].limit->requests_per_unit;
		if (v != first)
			fail_msg("a mixed config: %s is version %u, %s version "
				 "%u",
				 c->domains[0].name, first, c->domains[i].name,
				 v);
	}
	drld_envoy_config_release(c);
	drld_envoy_stats_free(stats);
	drl_store_free(store);
	remove_volume();
}

/* A plain directory (no ..data) loads as before, and an error names the
 * file as the directory shows it. */
static void test_plain_directory(void **state)
{
	(void)state;
	drl_store *store = NULL;
	struct drld_envoy_stats *stats = NULL;
	struct drld_envoy_config *c = NULL;
	char msg[DRLD_ENVOY_MSG_MAX], path[160];
	snprintf(dir, sizeof dir, "/tmp/drl-envoy-config-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/a.yaml", dir);
	write_file(path, "domain: a\ndescriptors:\n  - key: k\n    rate_limit: "
			 "{unit: second, requests_per_unit: 3}\n");
	assert_int_equal(drl_store_open(&store, "memory://", NULL), 0);
	assert_int_equal(drld_envoy_stats_new(&stats), 0);
	assert_int_equal(drld_envoy_config_load(&c, dir, store, 0, stats, msg,
						sizeof msg),
			 0);
	assert_int_equal(c->ndomains, 1);
	assert_int_equal(
		c->domains[0].root.children[0].limit->requests_per_unit, 3);
	drld_envoy_config_release(c);
	snprintf(path, sizeof path, "%s/b.yaml", dir);
	write_file(path, "domain: b\ndescriptors: [\n");
	assert_int_equal(drld_envoy_config_load(&c, dir, store, 0, stats, msg,
						sizeof msg),
			 -1);
	if (strstr(msg, path) == NULL)
		fail_msg("the message names no %s: %s", path, msg);
	drld_envoy_stats_free(stats);
	drl_store_free(store);
	remove_volume();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attack_snapshot_while_data_flips),
		cmocka_unit_test(test_plain_directory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
