/*
 * Test fixture: real redis-server / memcached processes on free loopback
 * ports (see server_fixture.h for the contract).
 *
 * How a start goes: find the binary (PATH, then /usr/sbin, /usr/bin,
 * /usr/local/bin), make a private temp dir, pick a free port by binding
 * 127.0.0.1:0, fork/exec the server with stdout/stderr going to
 * <dir>/server.log, and poll until a TCP connect (or, for a unix-socket-only
 * memcached, a unix connect) succeeds and (on Linux, through /proc) the
 * listening socket is our server's, for at most 5 s. When the server dies
 * early because another process took the port in the meantime, start over
 * on another port (a few attempts). On failure the log is copied to
 * stderr. A server that had died on its own by the time it is stopped is
 * reported on stderr with its log.
 *
 * Leftover servers: every started server is recorded in a small table. An
 * atexit handler, and a handler for SIGINT/SIGTERM/SIGHUP (only where the
 * signal still has its default action), kill what is still running, so a
 * failing or interrupted test leaves nothing behind. On Linux the server
 * also gets PR_SET_PDEATHSIG(SIGKILL): it dies with the thread that started
 * it even when the test process is killed with SIGKILL. Start servers from
 * a thread that outlives them (the main thread, in cmocka tests). Only the
 * process that started a server ever kills it: a test that forks and whose
 * child calls exit() does not take the servers down.
 *
 * Threading: start/stop may be called from several threads; the table is
 * guarded by a mutex.
 */
#include "server_fixture.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define START_ATTEMPTS 5
#define READY_TIMEOUT_MS 20000 /* a wait for an event: generous */
#define STOP_TIMEOUT_MS 2000
#define POLL_MS 10
#define MAX_ARGS 64
#define MAX_SERVERS 64
#define CLUSTER_BUS_OFFSET 10000 /* redis cluster bus port = port + this */

/* ---- registry of running servers, for cleanup at exit -------------------- */

typedef struct tracked {
	volatile pid_t pid; /* 0: free slot */
	pid_t owner;        /* getpid() of the process that started it */
	char dir[256];
	char log[280]; /* dir + "/server.log", for the signal handler */
} tracked;

static tracked table[MAX_SERVERS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int hooks_installed;

/* Kill (SIGKILL) and reap every server this process started and still
 * runs, and remove its log and (then empty) dir. Called from a signal
 * handler: async-signal-safe calls only, no locks. */
static void kill_all_now(void)
{
	pid_t self = getpid();

	for (size_t i = 0; i < MAX_SERVERS; i++) {
		pid_t pid = table[i].pid;
		if (pid > 0 && table[i].owner == self) {
			kill(pid, SIGKILL);
			kill(pid, SIGCONT);
			waitpid(pid, NULL, 0);
			unlink(table[i].log);
			rmdir(table[i].dir);
		}
	}
}

/* Remove `path` and everything below it (bounded depth). Best effort. */
static void remove_tree(const char *path, int depth)
{
	DIR *d;
	struct dirent *e;
	char child[PATH_MAX];

	if (depth > 8)
		return;
	d = opendir(path);
	if (d == NULL) {
		unlink(path);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >=
		    (int)sizeof child)
			continue;
		if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
			remove_tree(child, depth + 1);
		else
			unlink(child);
	}
	closedir(d);
	rmdir(path);
}

/* atexit: stop and reap every server this process still owns, remove
 * their directories. */
static void cleanup_at_exit(void)
{
	pid_t self = getpid();

	pthread_mutex_lock(&table_lock);
	for (size_t i = 0; i < MAX_SERVERS; i++) {
		pid_t pid = table[i].pid;
		if (pid <= 0 || table[i].owner != self)
			continue;
		kill(pid, SIGKILL);
		kill(pid, SIGCONT);
		waitpid(pid, NULL, 0);
		if (table[i].dir[0] != '\0')
			remove_tree(table[i].dir, 0);
		table[i].pid = 0;
	}
	pthread_mutex_unlock(&table_lock);
}

/* SIGINT/SIGTERM/SIGHUP: kill the servers, then die of the same signal. */
static void on_fatal_signal(int sig)
{
	kill_all_now();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Install the exit hooks once (table_lock held). Signals that already have
 * a handler are left to their owner. */
static void install_hooks(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};

	if (hooks_installed)
		return;
	hooks_installed = 1;
	atexit(cleanup_at_exit);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction old, sa;
		if (sigaction(sigs[i], NULL, &old) != 0 ||
		    old.sa_handler != SIG_DFL)
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_fatal_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

/* Record a running server for the exit hooks. */
static void track(pid_t pid, const char *dir)
{
	pthread_mutex_lock(&table_lock);
	install_hooks();
	for (size_t i = 0; i < MAX_SERVERS; i++) {
		if (table[i].pid == 0) {
			table[i].owner = getpid();
			snprintf(table[i].dir, sizeof table[i].dir, "%s", dir);
			snprintf(table[i].log, sizeof table[i].log,
				 "%s/server.log", dir);
			table[i].pid = pid;
			break;
		}
	}
	pthread_mutex_unlock(&table_lock);
}

/* Forget a server that has been reaped. */
static void untrack(pid_t pid)
{
	pthread_mutex_lock(&table_lock);
	for (size_t i = 0; i < MAX_SERVERS; i++) {
		if (table[i].pid == pid) {
			table[i].pid = 0;
			table[i].dir[0] = '\0';
		}
	}
	pthread_mutex_unlock(&table_lock);
}

/* ---- small helpers ------------------------------------------------------- */

/* Sleep `ms` milliseconds (restarting after signals). */
static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* 1 when the environment variable CI is exactly "true". */
int drl_fixture_under_ci(void)
{
	const char *ci = getenv("CI");
	return ci != NULL && strcmp(ci, "true") == 0;
}

/* Find executable `name` on PATH or in the usual system directories; the
 * full path goes to out (cap bytes). 0 found, -1 not found. */
static int find_binary(const char *name, char *out, size_t cap)
{
	static const char *const fallback[] = {
		"/usr/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin"};
	const char *path = getenv("PATH");

	if (path != NULL) {
		const char *p = path;
		while (*p != '\0') {
			const char *end = strchr(p, ':');
			size_t n = end ? (size_t)(end - p) : strlen(p);
			if (n > 0 &&
			    (size_t)snprintf(out, cap, "%.*s/%s", (int)n, p,
					     name) < cap &&
			    access(out, X_OK) == 0)
				return 0;
			if (end == NULL)
				break;
			p = end + 1;
		}
	}
	for (size_t i = 0; i < sizeof fallback / sizeof fallback[0]; i++) {
		if ((size_t)snprintf(out, cap, "%s/%s", fallback[i], name) <
			    cap &&
		    access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* A port that was free on 127.0.0.1 a moment ago, or -1. */
static int free_port(void)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	int port = -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = 0;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* 1 when 127.0.0.1:port can be bound right now (as a listener would, with
 * SO_REUSEADDR). */
static int port_free(int port)
{
	struct sockaddr_in a;
	int one = 1, ok;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((unsigned short)port);
	ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

/* A free port whose cluster bus port (port + CLUSTER_BUS_OFFSET, at most
 * 65535) was free as well a moment ago, or -1. */
static int free_cluster_port(void)
{
	for (int i = 0; i < 64; i++) {
		int port = free_port();
		if (port <= 0)
			return -1;
		if (port <= 65535 - CLUSTER_BUS_OFFSET &&
		    port_free(port + CLUSTER_BUS_OFFSET))
			return port;
	}
	return -1;
}

/* 1 when a TCP connect to 127.0.0.1:port succeeds. */
static int tcp_ready(int port)
{
	struct sockaddr_in a;
	int ok;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((unsigned short)port);
	ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

/* 1 when a connect to the unix socket at `path` succeeds. */
static int unix_ready(const char *path)
{
	struct sockaddr_un a;
	int ok;
	int fd;

	if (strlen(path) >= sizeof a.sun_path)
		return 0;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, path, strlen(path) + 1);
	ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

/* Copy the server log to stderr, prefixed, so a failing start explains
 * itself. At most 64 KiB. */
static void dump_log(const char *what, const char *dir)
{
	char path[PATH_MAX], buf[4096];
	size_t n, total = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/server.log", dir);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	fprintf(stderr, "---- %s log (%s) ----\n", what, path);
	while (total < 65536 && (n = fread(buf, 1, sizeof buf, f)) > 0) {
		fwrite(buf, 1, n, stderr);
		total += n;
	}
	fprintf(stderr, "---- end of %s log ----\n", what);
	fclose(f);
}

/* 1 when the log says the port was taken (worth another attempt). */
static int log_says_port_taken(const char *dir)
{
	char path[PATH_MAX], buf[8192];
	size_t n;
	FILE *f;

	snprintf(path, sizeof path, "%s/server.log", dir);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, "in use") != NULL ||
	       strstr(buf, "failed to listen") != NULL ||
	       strstr(buf, "Could not create server TCP") != NULL;
}

/* Close every descriptor above stderr in a freshly forked child
 * (async-signal-safe). */
static void close_inherited_fds(void)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
		return;
#endif
	for (int fd = 3; fd < 4096; fd++)
		close(fd);
}

/* Fork/exec argv with output to `logpath`. Returns the pid or -1. */
static pid_t spawn(char *const argv[], const char *logpath)
{
	pid_t parent = getpid();
	int logfd =
		open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	pid_t pid;

	if (logfd < 0) {
		fprintf(stderr, "fixture: cannot open %s: %s\n", logpath,
			strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "fixture: fork: %s\n", strerror(errno));
		close(logfd);
		return -1;
	}
	if (pid == 0) {
#ifdef __linux__
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
#endif
		(void)parent;
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		dup2(logfd, STDOUT_FILENO);
		dup2(logfd, STDERR_FILENO);
		close_inherited_fds();
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], argv);
		_exit(127);
	}
	close(logfd);
	return pid;
}

/* Whether process `pid` holds the socket listening on 127.0.0.1:port:
 * 1 yes, 0 no (someone else does, or nobody yet), -1 cannot tell (no
 * Linux /proc). Closes the race where another process binds the free port
 * first: our server then exits, but a connect to the port succeeds. */
static int owns_listener(pid_t pid, int port)
{
	char line[512], path[64], link[64], want[32];
	unsigned long inodes[16];
	size_t ninodes = 0;
	FILE *f = fopen("/proc/net/tcp", "r");
	DIR *d;
	struct dirent *e;
	int found = 0;

	if (f == NULL)
		return -1;
	/* local_address "0100007F:PORT" (hex), st "0A" is LISTEN */
	snprintf(want, sizeof want, "0100007F:%04X", (unsigned)port);
	while (fgets(line, sizeof line, f) != NULL && ninodes < 16) {
		char local[64], st[8];
		unsigned long inode;
		if (sscanf(line, " %*s %63s %*s %7s %*s %*s %*s %*s %*s %lu",
			   local, st, &inode) == 3 &&
		    strcmp(local, want) == 0 && strcmp(st, "0A") == 0)
			inodes[ninodes++] = inode;
	}
	fclose(f);
	if (ninodes == 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (d == NULL)
		return -1;
	while (!found && (e = readdir(d)) != NULL) {
		char fdpath[PATH_MAX];
		ssize_t n;
		if (e->d_name[0] == '.')
			continue;
		snprintf(fdpath, sizeof fdpath, "%s/%s", path, e->d_name);
		n = readlink(fdpath, link, sizeof link - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		for (size_t i = 0; i < ninodes && !found; i++) {
			char sock[40];
			snprintf(sock, sizeof sock, "socket:[%lu]", inodes[i]);
			found = strcmp(link, sock) == 0;
		}
	}
	closedir(d);
	return found;
}

/* Poll until the server at s accepts connections (TCP port, or the unix
 * socket `unix_path` when not NULL), the child dies, or 5 s pass. With
 * `bus_port` > 0 (a cluster node), that port must be our server's listener
 * too: redis binds it after the client port and exits when it cannot.
 * 0 ready, 1 child exited early, -1 timed out. */
static int wait_ready(drl_server *s, const char *unix_path, int bus_port)
{
	for (int waited = 0; waited <= READY_TIMEOUT_MS; waited += POLL_MS) {
		int status;
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			untrack(s->pid);
			s->pid = 0;
			return 1;
		}
		if (unix_path != NULL && unix_ready(unix_path))
			return 0;
		if (unix_path == NULL && tcp_ready(s->port)) {
			/* The listener must be our server's, not that of a
			 * process that took the port first. */
			int own = owns_listener(s->pid, s->port);
			if (own == 1 && bus_port > 0)
				own = owns_listener(s->pid, bus_port);
			if (own == 1)
				return 0;
			if (own < 0) {
				/* No /proc: at least make sure our server
				 * did not die on a failed bind meanwhile. */
				sleep_ms(POLL_MS);
				if (waitpid(s->pid, &status, WNOHANG) ==
				    s->pid) {
					untrack(s->pid);
					s->pid = 0;
					return 1;
				}
				return 0;
			}
		}
		sleep_ms(POLL_MS);
	}
	return -1;
}

/* Kill the process of s hard and reap it (failed starts). */
static void kill_and_reap(drl_server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		untrack(s->pid);
		s->pid = 0;
	}
}

/* The unix socket path among memcached's extra args ("-s PATH" or
 * "--unix-socket=PATH"), or NULL. */
static const char *memcached_unix_path(const char *const *extra)
{
	if (extra == NULL)
		return NULL;
	for (size_t i = 0; extra[i] != NULL; i++) {
		if ((strcmp(extra[i], "-s") == 0 ||
		     strcmp(extra[i], "--unix-socket") == 0) &&
		    extra[i + 1] != NULL)
			return extra[i + 1];
		if (strncmp(extra[i], "--unix-socket=", 14) == 0)
			return extra[i] + 14;
	}
	return NULL;
}

/* Which server a start is for: how to build its fixed argv. */
typedef enum kind {
	KIND_REDIS,
	KIND_MEMCACHED,
	KIND_REDIS_CLUSTER,
	KIND_REDIS_TLS,
	KIND_REDIS_TLS_CLUSTER,
	KIND_SENTINEL,
	KIND_SENTINEL_TLS
} kind;

/* The binary that runs a server of kind k. */
static const char *kind_binary(kind k)
{
	return k == KIND_MEMCACHED                            ? "memcached"
	       : k == KIND_SENTINEL || k == KIND_SENTINEL_TLS ? "redis-sentinel"
							      : "redis-server";
}

/* A sentinel's config file <dir>/sentinel.conf (Sentinel needs one it
 * can rewrite): its port (TLS only when `tls`: the plaintext one off),
 * address and dir, then `lines`, one each. 0, or -1 (message on
 * stderr). */
static int write_sentinel_conf(const drl_server *s, const char *path,
			       const char *const *lines, size_t n, int tls)
{
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "fixture: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (tls)
		fprintf(f, "port 0\ntls-port %d\n", s->port);
	else
		fprintf(f, "port %d\n", s->port);
	fprintf(f, "bind 127.0.0.1\ndir %s\n", s->dir);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n", lines[i]);
	return fclose(f) == 0 ? 0 : -1;
}

/* Spawn argv (output to logpath), record it, and wait until it is ready
 * (wait_ready's arguments): wait_ready's result, or -2 when it could not
 * be spawned. */
static int spawn_ready(drl_server *s, const char **argv, const char *logpath,
		       const char *unix_path, int bus_port)
{
	s->pid = spawn((char *const *)argv, logpath);
	if (s->pid < 0) {
		s->pid = 0;
		return -2;
	}
	track(s->pid, s->dir);
	return wait_ready(s, unix_path, bus_port);
}

/* Spawn the server of `k` on s->port with its fixed arguments and the
 * extra ones, and wait until it is ready: wait_ready's result, or -2 when
 * it could not be spawned. */
static int launch(drl_server *s, kind k, const char *bin,
		  const char *const *extra, size_t nextra)
{
	const char *argv[MAX_ARGS + 24];
	char portstr[16], logpath[PATH_MAX], nodesconf[PATH_MAX];
	size_t n = 0;

	snprintf(logpath, sizeof logpath, "%s/server.log", s->dir);
	snprintf(nodesconf, sizeof nodesconf, "%s/nodes.conf", s->dir);
	snprintf(portstr, sizeof portstr, "%d", s->port);
	argv[n++] = bin;
	if (k == KIND_SENTINEL || k == KIND_SENTINEL_TLS) {
		/* The extra "arguments" are config lines (see the header). */
		char conf[PATH_MAX];
		snprintf(conf, sizeof conf, "%s/sentinel.conf", s->dir);
		if (write_sentinel_conf(s, conf, extra, nextra,
					k == KIND_SENTINEL_TLS) != 0)
			return -2;
		argv[n++] = conf;
		argv[n] = NULL;
		return spawn_ready(s, argv, logpath, NULL, 0);
	}
	int tls = k == KIND_REDIS_TLS || k == KIND_REDIS_TLS_CLUSTER;
	int cluster = k == KIND_REDIS_CLUSTER || k == KIND_REDIS_TLS_CLUSTER;
	if (tls) {
		/* TLS only: the plaintext port off, s->port speaks TLS (the
		 * certificates are in the caller's extra arguments). */
		argv[n++] = "--port";
		argv[n++] = "0";
		argv[n++] = "--tls-port";
		argv[n++] = portstr;
	}
	if (k != KIND_MEMCACHED) {
		if (!tls) {
			argv[n++] = "--port";
			argv[n++] = portstr;
		}
		argv[n++] = "--bind";
		argv[n++] = "127.0.0.1";
		argv[n++] = "--save";
		argv[n++] = "";
		argv[n++] = "--appendonly";
		argv[n++] = "no";
		argv[n++] = "--dir";
		argv[n++] = s->dir;
		argv[n++] = "--daemonize";
		argv[n++] = "no";
		if (cluster) {
			argv[n++] = "--cluster-enabled";
			argv[n++] = "yes";
			argv[n++] = "--cluster-config-file";
			argv[n++] = nodesconf;
		}
		if (cluster && tls) {
			argv[n++] = "--tls-cluster";
			argv[n++] = "yes";
		}
	} else {
		argv[n++] = "-p";
		argv[n++] = portstr;
		argv[n++] = "-l";
		argv[n++] = "127.0.0.1";
		argv[n++] = "-U";
		argv[n++] = "0";
		/* memcached refuses to run as root without -u. */
		if (geteuid() == 0) {
			argv[n++] = "-u";
			argv[n++] = "root";
		}
	}
	for (size_t i = 0; i < nextra; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	return spawn_ready(s, argv, logpath,
			   k == KIND_MEMCACHED ? memcached_unix_path(extra)
					       : NULL,
			   cluster ? s->port + CLUSTER_BUS_OFFSET : 0);
}

/* Start the server of `k`; see drl_fixture_redis_start for the contract. */
static int start(drl_server *s, kind k, const char *const *extra)
{
	const char *binname = kind_binary(k);
	char bin[PATH_MAX];
	size_t nextra = 0;

	memset(s, 0, sizeof *s);
	s->kind = (int)k;
	s->extra = extra;
	if (find_binary(binname, bin, sizeof bin) != 0) {
		if (drl_fixture_under_ci()) {
			fprintf(stderr,
				"fixture: %s not found on PATH, /usr/sbin or "
				"/usr/bin, and CI=true: failing\n",
				binname);
			return -1;
		}
		fprintf(stderr, "fixture: %s not found: skipping\n", binname);
		return 1;
	}
	while (extra != NULL && extra[nextra] != NULL)
		nextra++;
	if (nextra > MAX_ARGS) {
		fprintf(stderr, "fixture: too many extra arguments (%zu)\n",
			nextra);
		return -1;
	}
	const char *tmp = getenv("TMPDIR");
	if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 100)
		tmp = "/tmp";
	snprintf(s->dir, sizeof s->dir, "%s/drl-%s-XXXXXX", tmp,
		 k == KIND_REDIS || k == KIND_REDIS_TLS         ? "redis"
		 : k == KIND_MEMCACHED                          ? "memcached"
		 : k == KIND_SENTINEL || k == KIND_SENTINEL_TLS ? "sentinel"
								: "cluster");
	if (mkdtemp(s->dir) == NULL) {
		fprintf(stderr, "fixture: mkdtemp %s: %s\n", s->dir,
			strerror(errno));
		s->dir[0] = '\0';
		return -1;
	}

	for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
		s->port = k == KIND_REDIS_CLUSTER || k == KIND_REDIS_TLS_CLUSTER
				  ? free_cluster_port()
				  : free_port();
		if (s->port <= 0) {
			fprintf(stderr, "fixture: no free loopback port\n");
			break;
		}
		int r = launch(s, k, bin, extra, nextra);
		if (r == 0)
			return 0;
		if (r == -2)
			break;
		if (r == 1 && log_says_port_taken(s->dir) &&
		    attempt + 1 < START_ATTEMPTS) {
			fprintf(stderr,
				"fixture: %s could not bind port %d, "
				"retrying on another port\n",
				binname, s->port);
			continue;
		}
		fprintf(stderr, "fixture: %s on port %d %s\n", binname, s->port,
			r == 1 ? "exited during startup"
			       : "did not accept connections within 5 s");
		kill_and_reap(s);
		break;
	}
	dump_log(binname, s->dir);
	kill_and_reap(s);
	remove_tree(s->dir, 0);
	s->dir[0] = '\0';
	s->port = 0;
	return -1;
}

void drl_fixture_kill(drl_server *s)
{
	if (s != NULL)
		kill_and_reap(s);
}

int drl_fixture_restart(drl_server *s)
{
	const char *binname = kind_binary((kind)s->kind);
	char bin[PATH_MAX];
	size_t nextra = 0;

	if (s->port <= 0 || s->dir[0] == '\0' ||
	    find_binary(binname, bin, sizeof bin) != 0)
		return -1;
	kill_and_reap(s);
	while (s->extra != NULL && s->extra[nextra] != NULL)
		nextra++;
	/* The port was ours a moment ago; a new listener may take a few
	 * tries while the old sockets close. */
	for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
		int r = launch(s, (kind)s->kind, bin, s->extra, nextra);
		if (r == 0)
			return 0;
		kill_and_reap(s);
		sleep_ms(200);
	}
	dump_log(binname, s->dir);
	return -1;
}

/* Start redis-server; 0 started, 1 skip, -1 failure (see the header). */
int drl_fixture_redis_start(drl_server *s, const char *const *extra_argv)
{
	return start(s, KIND_REDIS, extra_argv);
}

/* Start a TLS-only redis-server; 0 started, 1 skip, -1 failure (see the
 * header). */
int drl_fixture_redis_tls_start(drl_server *s, const char *const *extra_argv)
{
	return start(s, KIND_REDIS_TLS, extra_argv);
}

/* Start a TLS-only redis cluster node; 0 started, 1 skip, -1 failure
 * (see the header). */
int drl_fixture_redis_tls_cluster_node_start(drl_server *s,
					     const char *const *extra_argv)
{
	return start(s, KIND_REDIS_TLS_CLUSTER, extra_argv);
}

/* Start a redis cluster node; 0 started, 1 skip, -1 failure (see the
 * header). */
int drl_fixture_redis_cluster_node_start(drl_server *s,
					 const char *const *extra_argv)
{
	return start(s, KIND_REDIS_CLUSTER, extra_argv);
}

/* Start redis-sentinel; 0 started, 1 skip, -1 failure (see the
 * header). */
int drl_fixture_redis_sentinel_start(drl_server *s,
				     const char *const *conf_lines)
{
	return start(s, KIND_SENTINEL, conf_lines);
}

/* Start a TLS-only redis-sentinel; 0 started, 1 skip, -1 failure (see
 * the header). */
int drl_fixture_redis_sentinel_tls_start(drl_server *s,
					 const char *const *conf_lines)
{
	return start(s, KIND_SENTINEL_TLS, conf_lines);
}

/* Start memcached; 0 started, 1 skip, -1 failure (see the header). */
int drl_fixture_memcached_start(drl_server *s, const char *const *extra_argv)
{
	return start(s, KIND_MEMCACHED, extra_argv);
}

/* Stop and reap the server, remove its dir. A no-op on a stopped or
 * zeroed drl_server, so calling it twice is safe. */
void drl_fixture_stop(drl_server *s)
{
	if (s == NULL)
		return;
	if (s->pid > 0) {
		int status;

		/* A server that died on its own explains why tests failed. */
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			if (WIFSIGNALED(status))
				fprintf(stderr,
					"fixture: server pid %d (port %d) "
					"had died of signal %d\n",
					(int)s->pid, s->port, WTERMSIG(status));
			else
				fprintf(stderr,
					"fixture: server pid %d (port %d) "
					"had exited with status %d\n",
					(int)s->pid, s->port,
					WEXITSTATUS(status));
			dump_log("server", s->dir);
			untrack(s->pid);
			s->pid = 0;
		}
	}
	if (s->pid > 0) {
		int status;
		int reaped = 0;

		kill(s->pid, SIGTERM);
		kill(s->pid, SIGCONT); /* a paused server must see SIGTERM */
		for (int waited = 0; waited < STOP_TIMEOUT_MS;
		     waited += POLL_MS) {
			pid_t r = waitpid(s->pid, &status, WNOHANG);
			if (r == s->pid || (r < 0 && errno == ECHILD)) {
				reaped = 1;
				break;
			}
			sleep_ms(POLL_MS);
		}
		if (!reaped) {
			kill(s->pid, SIGKILL);
			while (waitpid(s->pid, &status, 0) < 0 &&
			       errno == EINTR)
				;
		}
		untrack(s->pid);
		s->pid = 0;
	}
	if (s->dir[0] != '\0') {
		remove_tree(s->dir, 0);
		s->dir[0] = '\0';
	}
}

/* SIGSTOP the server: it keeps its sockets but answers nothing. */
int drl_fixture_pause(drl_server *s)
{
	if (s == NULL || s->pid <= 0)
		return -1;
	return kill(s->pid, SIGSTOP) == 0 ? 0 : -1;
}

/* SIGCONT a paused server. */
int drl_fixture_resume(drl_server *s)
{
	if (s == NULL || s->pid <= 0)
		return -1;
	return kill(s->pid, SIGCONT) == 0 ? 0 : -1;
}

int drl_fixture_start_redis(drl_server *redis, int *have)
{
	int rc = drl_fixture_redis_start(redis, NULL);
	if (rc < 0)
		return -1;
	*have = rc == 0;
	return 0;
}

void drl_fixture_stop_redis(drl_server *redis, int have)
{
	if (have)
		drl_fixture_stop(redis);
}

int drl_fixture_start_pair(drl_server *redis, int *have_redis, drl_server *mc,
			   int *have_mc)
{
	if (drl_fixture_start_redis(redis, have_redis) < 0)
		return -1;
	int rc = drl_fixture_memcached_start(mc, NULL);
	if (rc < 0)
		return -1;
	*have_mc = rc == 0;
	return 0;
}

void drl_fixture_stop_pair(drl_server *redis, int have_redis, drl_server *mc,
			   int have_mc)
{
	drl_fixture_stop_redis(redis, have_redis);
	if (have_mc)
		drl_fixture_stop(mc);
}
