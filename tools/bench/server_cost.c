/*
 * What a decision costs the Redis server: CONFIG RESETSTAT and INFO cpu
 * before a measured stretch (a cell's throughput phase, a ceiling's
 * redis-benchmark run), INFO cpu and INFO commandstats after it, on a
 * connection of its own (bench/redis_target.c). Whole-server figures:
 * whatever else the server does meanwhile counts too. A server that cannot
 * be asked (no hiredis, CONFIG renamed or refused, AUTH failing) leaves
 * the figure missing with a note; it never fails the cell.
 *
 * Command time: when the stretch ran scripts, their usec only (a script's
 * usec includes the commands it calls, which commandstats also counts);
 * otherwise the usec of every command but the bench's own bookkeeping.
 */
#include "shared.h"
#include "redis_target.h"

#include <stdlib.h>
#include <string.h>

#if DRL_HAVE_REDIS
#include <hiredis/hiredis.h>

#define PROBE_TIMEOUT_MS 2000

/* Commands that are scripts: their usec includes what they call (the
 * Redis module's commands, tx=module, count as scripts too). */
static const char *const script_cmds[] = {
	"eval",  "evalsha",  "eval_ro",  "evalsha_ro",
	"fcall", "fcall_ro", "drl.twin", "drl.decide",
};

/* Commands (or, before '|', command families) that are bookkeeping:
 * this probe's own, connection setup, script loading. */
static const char *const bookkeeping_cmds[] = {
	"info", "ping", "auth", "hello", "select",
};
static const char *const bookkeeping_families[] = {
	"config",
	"client",
	"script",
	"command",
};

static bool name_in(const char *name, size_t len, const char *const *set,
		    size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(set[i]) == len && memcmp(name, set[i], len) == 0)
			return true;
	return false;
}

#define NAME_IN(name, len, set)                                                \
	name_in(name, len, set, sizeof set / sizeof *set)

/* One command (or subcommand) name of commandstats: script, bookkeeping
 * or the rest. */
enum { CMD_SCRIPT, CMD_BOOKKEEPING, CMD_OTHER };

static int classify(const char *name, size_t len)
{
	const char *bar = memchr(name, '|', len);
	size_t flen = bar ? (size_t)(bar - name) : len;

	if (NAME_IN(name, len, script_cmds))
		return CMD_SCRIPT;
	if (NAME_IN(name, len, bookkeeping_cmds) ||
	    NAME_IN(name, flen, bookkeeping_families))
		return CMD_BOOKKEEPING;
	return CMD_OTHER;
}

/* From INFO commandstats ("cmdstat_NAME:calls=N,usec=U,..." lines): the
 * command time by the rule above, in µs. False when no line parsed. */
static bool parse_commandstats(const char *info, double *exec_us)
{
	double scripts = 0, other = 0;
	bool any = false, ran_scripts = false;

	for (const char *line = info; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *colon = memchr(line, ':', len);
		if (strncmp(line, "cmdstat_", 8) == 0 && colon) {
			const char *name = line + 8;
			size_t nlen = (size_t)(colon - name);
			const char *calls = strstr(colon, ":calls=");
			const char *usec = strstr(colon, ",usec=");
			if (calls == colon && usec && usec < line + len) {
				double c = strtod(calls + 7, NULL);
				double u = strtod(usec + 6, NULL);
				int kind = classify(name, nlen);
				any = true;
				if (kind == CMD_SCRIPT) {
					scripts += u;
					ran_scripts |= c > 0;
				} else if (kind == CMD_OTHER) {
					other += u;
				}
			}
		}
		line = end ? end + 1 : NULL;
	}
	*exec_us = ran_scripts ? scripts : other;
	return any || strstr(info, "# Commandstats") != NULL;
}

/* used_cpu_sys + used_cpu_user (seconds) from INFO cpu. */
static bool parse_cpu(const char *info, double *s)
{
	static const char *const keys[] = {"used_cpu_sys:", "used_cpu_user:"};
	double sum = 0;

	for (size_t k = 0; k < 2; k++) {
		const char *p = info;
		size_t kl = strlen(keys[k]);
		for (;;) {
			p = strstr(p, keys[k]);
			if (p == NULL)
				return false;
			if (p == info || p[-1] == '\n')
				break;
			p += kl;
		}
		char *e;
		double v = strtod(p + kl, &e);
		if (e == p + kl)
			return false;
		sum += v;
	}
	*s = sum;
	return true;
}

/* A command's reply when it is a status or a string (RESP2: INFO is a
 * bulk string), for the caller to free; NULL with the probe's note saying
 * why (after what) otherwise. */
static redisReply *ask(srv_probe *p, const char *cmd, const char *what)
{
	redisContext *c = p->c;
	redisReply *r = redisCommand(c, cmd);

	if (r != NULL &&
	    (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
		return r;
	if (p->out.note[0] == '\0')
		snprintf(p->out.note, sizeof p->out.note, "%s: %.120s", what,
			 r && r->type == REDIS_REPLY_ERROR ? r->str
			 : c->err                          ? c->errstr
				  : "unexpected reply");
	if (r)
		freeReplyObject(r);
	return NULL;
}

void bench_srv_begin(srv_probe *p, const char *uri)
{
	redis_target t;
	char why[MSG_MAX];

	memset(p, 0, sizeof *p);
	p->out.applies = true;
	if (!bench_redis_target_parse(uri, &t, why, sizeof why)) {
		snprintf(p->out.note, sizeof p->out.note, "%s", why);
		return;
	}
	p->c = bench_redis_connect(&t, PROBE_TIMEOUT_MS, why, sizeof why);
	if (p->c == NULL) {
		snprintf(p->out.note, sizeof p->out.note, "%s", why);
		return;
	}
	redisReply *r = ask(p, "CONFIG RESETSTAT", "CONFIG RESETSTAT");
	p->reset = r != NULL;
	if (r)
		freeReplyObject(r);
	r = ask(p, "INFO cpu", "INFO cpu");
	p->cpu = r != NULL && parse_cpu(r->str, &p->cpu0);
	if (r && !p->cpu && p->out.note[0] == '\0')
		snprintf(p->out.note, sizeof p->out.note,
			 "INFO cpu: no used_cpu_sys/used_cpu_user");
	if (r)
		freeReplyObject(r);
}

void bench_srv_end(srv_probe *p)
{
	double cpu1 = 0, exec = 0;
	redisReply *r;

	if (p->c == NULL)
		return;
	if (p->cpu && (r = ask(p, "INFO cpu", "INFO cpu")) != NULL) {
		if (parse_cpu(r->str, &cpu1) && cpu1 >= p->cpu0) {
			p->out.cpu_ok = true;
			p->out.cpu_us = (cpu1 - p->cpu0) * 1e6;
		} else if (p->out.note[0] == '\0') {
			snprintf(p->out.note, sizeof p->out.note,
				 "INFO cpu: went backwards (a restart?)");
		}
		freeReplyObject(r);
	}
	if (p->reset &&
	    (r = ask(p, "INFO commandstats", "INFO commandstats")) != NULL) {
		if (parse_commandstats(r->str, &exec)) {
			p->out.exec_ok = true;
			p->out.exec_us = exec;
		} else if (p->out.note[0] == '\0') {
			snprintf(p->out.note, sizeof p->out.note,
				 "INFO commandstats: nothing to read");
		}
		freeReplyObject(r);
	}
	redisFree(p->c);
	p->c = NULL;
}
#else  /* !DRL_HAVE_REDIS */
void bench_srv_begin(srv_probe *p, const char *uri)
{
	(void)uri;
	memset(p, 0, sizeof *p);
	p->out.applies = true;
	snprintf(p->out.note, sizeof p->out.note, "built without hiredis");
}

void bench_srv_end(srv_probe *p)
{
	(void)p;
}
#endif /* DRL_HAVE_REDIS */

void bench_srv_count(srv_cost *s, uint64_t n)
{
	s->exec_n = s->exec_ok ? n : 0;
	s->cpu_n = s->cpu_ok ? n : 0;
}

void bench_srv_merge(srv_cost *into, const srv_cost *s)
{
	into->applies |= s->applies;
	if (s->exec_ok && s->exec_n > 0) {
		into->exec_ok = true;
		into->exec_us += s->exec_us;
		into->exec_n += s->exec_n;
	}
	if (s->cpu_ok && s->cpu_n > 0) {
		into->cpu_ok = true;
		into->cpu_us += s->cpu_us;
		into->cpu_n += s->cpu_n;
	}
	if (into->note[0] == '\0' && s->note[0] != '\0')
		bench_copy_msg(into->note, sizeof into->note, s->note);
}

bool bench_srv_per(const srv_cost *s, bool exec, double *per)
{
	uint64_t n = exec ? s->exec_n : s->cpu_n;
	if (n == 0)
		return false;
	*per = (exec ? s->exec_us : s->cpu_us) / (double)n;
	return true;
}
