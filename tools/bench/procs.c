/*
 * One cell over processes: with --procs N, N forked children each run
 * their share of the callers (bench/runner.c), start each phase at the
 * parent's word and send their results back down a pipe; the parent
 * merges them. One process runs the cell itself. Also merging results
 * over rounds.
 */
#include "shared.h"
#include "common/clock.h"
#include "redis_target.h"

#include <drl/drl.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* All len bytes to (out) or from fd, across short transfers and EINTR;
 * false on an error or end of file. */
static bool io_all(int fd, void *buf, size_t len, bool out)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static bool write_all(int fd, const void *buf, size_t len)
{
	return io_all(fd, (void *)buf, len, true);
}

static bool read_all(int fd, void *buf, size_t len)
{
	return io_all(fd, buf, len, false);
}

/* Fold one round's results into a cell's. */
void bench_result_merge(cell_result *into, const cell_result *r)
{
	if (into->open_rc == 0 && r->open_rc != 0) {
		into->open_rc = r->open_rc;
		bench_copy_msg(into->open_msg, MSG_MAX, r->open_msg);
	}
	if (into->x_rc == 0 && r->x_rc != 0) {
		into->x_rc = r->x_rc;
		bench_copy_msg(into->x_msg, MSG_MAX, r->x_msg);
	}
	if (into->x_capacity < 0)
		into->x_capacity = r->x_capacity;
	bench_tally_merge(&into->t, &r->t);
	into->d.decisions += r->d.decisions;
	into->d.cas_attempts += r->d.cas_attempts;
	into->d.cas_conflicts += r->d.cas_conflicts;
	into->d.cas_exhausted += r->d.cas_exhausted;
	into->d.scripts += r->d.scripts;
	into->elapsed_s += r->elapsed_s;
	bench_srv_merge(&into->srv, &r->srv);
}

/* Fold one process's results into a cell's (as a round of no duration). */
static void merge_proc(cell_result *cr, const proc_result *r, int64_t *start)
{
	cell_result one = {
		.open_rc = r->open_rc,
		.t = r->t,
		.d = r->d,
		.x_capacity = r->x_capacity,
		.x_rc = r->x_rc,
	};
	bench_copy_msg(one.open_msg, MSG_MAX, r->open_msg);
	bench_copy_msg(one.x_msg, MSG_MAX, r->x_msg);
	bench_result_merge(cr, &one);
	if (*start == 0 || r->start_ns < *start)
		*start = r->start_ns;
}

/* Fork cfg->nprocs children, each running run_proc with its share of the
 * callers; start each phase in all of them at once; collect. srv (unless
 * NULL): measure the server from when every child is ready for the
 * throughput phase to when every child has finished it: ready for the
 * exactness phase (after one peek each, a few calls among thousands), or
 * done. */
static int run_forked(const cell_cfg *cfg, _Atomic uint64_t *x_total,
		      srv_probe *srv, cell_result *cr, int64_t *start)
{
	int n = cfg->nprocs;
	pid_t pid[PROCS_MAX];
	int to_child[PROCS_MAX], from_child[PROCS_MAX];
	int base = 0, forked = 0, status = 0;

	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < n; i++) {
		int a[2], b[2];
		int share = cfg->conc / n + (i < cfg->conc % n);
		if (pipe(a) != 0)
			break;
		if (pipe(b) != 0) {
			close(a[0]);
			close(a[1]);
			break;
		}
		pid[i] = fork();
		if (pid[i] < 0) {
			close(a[0]);
			close(a[1]);
			close(b[0]);
			close(b[1]);
			break;
		}
		if (pid[i] == 0) {
			proc_result res;
			proc_ctx p = {.cfg = cfg,
				      .nthreads = share,
				      .base_id = base,
				      .x_total = x_total,
				      .to_parent = b[1],
				      .from_parent = a[0]};
			for (int j = 0; j < i; j++) {
				close(to_child[j]);
				close(from_child[j]);
			}
			close(a[1]);
			close(b[0]);
			bench_run_proc(&p, &res);
			_exit(write_all(b[1], &res, sizeof res) ? 0 : 1);
		}
		close(a[0]);
		close(b[1]);
		to_child[i] = a[1];
		from_child[i] = b[0];
		base += share;
		forked++;
	}
	if (forked < n) {
		fprintf(stderr, "drl bench: cannot start %d processes: %s\n", n,
			strerror(errno));
		status = -1;
	}
	int phases = cfg->xspec ? 2 : 1;
	for (int ph = 0; ph < phases && status == 0; ph++) {
		int64_t len = ph == 0 ? cfg->duration_ns : cfg->exact_cap_ns;
		for (int i = 0; i < forked; i++) {
			char c;
			if (!read_all(from_child[i], &c, 1))
				status = -1;
		}
		if (srv && ph == 0 && status == 0)
			bench_srv_begin(srv, cfg->store);
		else if (srv && ph == 1)
			bench_srv_end(srv);
		int64_t t0 = tl_mono_ns();
		for (int i = 0; i < forked; i++)
			if (!write_all(to_child[i], &t0, sizeof t0))
				status = -1;
		if (ph == 0 && cfg->progress)
			while (tl_mono_ns() < t0 + len) {
				bench_progress_line(
					cfg, (double)(tl_mono_ns() - t0) / 1e9,
					(double)len / 1e9, 0);
				tl_sleep_ns(INT64_C(100000000));
			}
	}
	for (int i = 0; i < forked; i++) {
		proc_result res;
		close(to_child[i]);
		if (status == 0 && read_all(from_child[i], &res, sizeof res))
			merge_proc(cr, &res, start);
		else
			status = -1;
		close(from_child[i]);
	}
	if (srv)
		bench_srv_end(srv); /* no exactness phase (or cut short) */
	for (int i = 0; i < forked; i++) {
		int ws;
		while (waitpid(pid[i], &ws, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
			status = -1;
	}
	return status;
}

/* Run one cell: in this process (one process) or forked. */
void bench_run_cell(const cell_cfg *cfg, cell_result *cr)
{
	int64_t start = 0;
	_Atomic uint64_t *x_total =
		mmap(NULL, sizeof *x_total, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	memset(cr, 0, sizeof *cr);
	cr->x_capacity = -1;
	if (x_total == MAP_FAILED) {
		cr->open_rc = DRL_ENOMEM;
		bench_copy_msg(cr->open_msg, MSG_MAX, "mmap failed");
		return;
	}
	atomic_store(x_total, 0);
	/* A single Redis: what the throughput phase cost the server, asked
	 * by this process whatever the number of processes. */
	srv_probe probe = {0};
	srv_probe *srv = bench_is_single_redis_uri(cfg->store) ? &probe : NULL;
	int forked_rc = 0;
	if (cfg->nprocs <= 1) {
		proc_result res;
		proc_ctx p = {.cfg = cfg,
			      .nthreads = cfg->conc,
			      .x_total = x_total,
			      .to_parent = -1,
			      .from_parent = -1,
			      .srv = srv};
		bench_run_proc(&p, &res);
		merge_proc(cr, &res, &start);
	} else {
		forked_rc = run_forked(cfg, x_total, srv, cr, &start);
		if (forked_rc != 0 && cr->open_rc == 0) {
			cr->open_rc = DRL_EINTERNAL;
			bench_copy_msg(cr->open_msg, MSG_MAX,
				       "a benchmark process failed or died");
		}
	}
	if (srv) {
		cr->srv = probe.out;
		cr->srv.applies = true;
		/* a lost process's calls are not in t.calls: no figures */
		if (forked_rc != 0)
			cr->srv.exec_ok = cr->srv.cpu_ok = false;
		bench_srv_count(&cr->srv, cr->t.calls);
	}
	if (cfg->progress)
		fputs("\r\033[K", stderr);
	cr->elapsed_s = (double)(cr->t.end_ns - start) / 1e9;
	munmap((void *)x_total, sizeof *x_total);
}
