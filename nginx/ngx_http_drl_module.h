/*
 * ngx_http_drl_module: a distributed limit_req for nginx on libdrl's
 * async API (docs/nginx.md). Four files share these types:
 *   ngx_http_drl_conf.c     the directives, the module, the variables
 *   ngx_http_drl_worker.c   each worker's stores, limiters and async
 *                           context, watched by nginx's event loop
 *   ngx_http_drl_handler.c  the preaccess handler that decides a request
 *                           and the header filter that reports it
 *   ngx_http_drl_vars.c     $drl_status and the other variables
 * Everything here runs on the worker's one thread (nginx's event loop);
 * libdrl calls back only through drl_async_process(), on that thread.
 */
#ifndef NGX_HTTP_DRL_MODULE_H
#define NGX_HTTP_DRL_MODULE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <drl/async.h>
#include <drl/drl.h>

/* Longest zone name (it is the name in the RateLimit headers). */
#define NGX_HTTP_DRL_NAME_MAX 64
/* A worker's memory:// store (the default store=): keys it keeps unless
 * the URI says max_keys=, and of those, one limit's share (a quarter).
 * About 191 bytes a key: 19 MB a worker when full (docs/security.md). */
#define NGX_HTTP_DRL_MEMORY_MAX_KEYS 100000

/* What $drl_status says (the values limit_req's $limit_req_status uses,
 * and ERROR for a decision that failed). */
typedef enum {
	NGX_HTTP_DRL_UNSET = 0, /* no limit applied: the variable is empty */
	NGX_HTTP_DRL_PASSED,
	NGX_HTTP_DRL_REJECTED,
	NGX_HTTP_DRL_REJECTED_DRY_RUN,
	NGX_HTTP_DRL_ERROR
} ngx_http_drl_status_e;

/* One drl_zone: a named limit. Made at configuration time from the cycle's
 * pool; the limiter is made by each worker (init_process) and freed at
 * its exit. */
typedef struct {
	ngx_str_t name; /* '\0'-ended */
	ngx_str_t uri;  /* store URI as written, '\0'-ended */
	ngx_str_t spec; /* spec with on_error= appended, '\0'-ended */
	/* the limiter's key prefix, "ngx:NAME:" ('\0'-ended): a zone's
	 * state is named by the zone (two zones never count into one key,
	 * and a changed limit keeps counting: docs/algorithms.md) */
	ngx_str_t prefix;
	ngx_http_complex_value_t key;
	/* RateLimit-Policy value (tools/common/ratelimit.h); "" to leave
	 * the header out */
	char *policy;
	int nlimits;
	ngx_uint_t store_index; /* into the worker's stores */
	drl_limiter *limiter;   /* this worker's; NULL until made */
} ngx_http_drl_zone_t;

/* The http block's configuration: every zone, and each distinct URI. */
typedef struct {
	ngx_array_t zones; /* ngx_http_drl_zone_t *, each allocated apart */
	ngx_array_t uris;  /* ngx_str_t, '\0'-ended */
} ngx_http_drl_main_conf_t;

/* One `drl zone=NAME` in a location. */
typedef struct {
	ngx_http_drl_zone_t *zone;
} ngx_http_drl_limit_t;

typedef struct {
	ngx_array_t *limits;  /* ngx_http_drl_limit_t; NULL: none */
	ngx_uint_t status;    /* drl_status: the denial's status */
	ngx_flag_t dry_run;   /* drl_dry_run */
	ngx_flag_t headers;   /* drl_headers */
	ngx_uint_t log_level; /* drl_log_level: denials */
} ngx_http_drl_loc_conf_t;

typedef struct ngx_http_drl_decision_s ngx_http_drl_decision_t;

/* A request's decision, in the main request's pool (found again after an
 * internal redirect through its pool cleanup). */
typedef struct {
	ngx_uint_t next;      /* the limit whose decision is started next */
	unsigned waiting : 1; /* a decision is in flight */
	unsigned done : 1;    /* decided: rc holds the phase's answer */
	unsigned resume : 1;  /* the callback resumed the phases: answer rc */
	ngx_int_t rc;         /* NGX_DECLINED or the status to answer */
	ngx_http_drl_status_e status;
	/* the decision the variables and headers report: the first denial
	 * (dry run included), else the allowed one with the least left */
	drl_result result;
	unsigned has_result : 1;
	unsigned headers : 1;      /* drl_headers was on where it was decided */
	ngx_http_drl_zone_t *zone; /* whose decision `result` is */
	ngx_http_drl_loc_conf_t *lcf;       /* where it was decided */
	ngx_http_drl_decision_t *in_flight; /* malloc'd, see below */
	ngx_str_t policies; /* RateLimit-Policy of every limit applied */
} ngx_http_drl_ctx_t;

/* A decision in flight: malloc'd (not from the request's pool), so it
 * outlives a request that ends before its callback; ctx is set NULL by
 * the request's pool cleanup, and the callback then only frees it. */
struct ngx_http_drl_decision_s {
	ngx_http_request_t *r;
	ngx_http_drl_ctx_t *ctx;
};

extern ngx_module_t ngx_http_drl_module;

/* ngx_http_drl_worker.c: this worker's async context (NULL outside a
 * worker or when it could not be made) and its store per distinct URI. */
drl_async *ngx_http_drl_async(void);
/* Count a decision started (+1) or called back (-1): while any is in
 * flight a timer keeps a gracefully stopping worker alive. */
void ngx_http_drl_pending(ngx_int_t delta);
/* Whether the worker is stopping for good (callbacks must not touch
 * requests: drl_async_free() runs them at exit). */
ngx_uint_t ngx_http_drl_exiting(void);
/* Run drl_async_process() once more at the end of this loop iteration
 * (after a start: a decision made at start is called back without
 * another wait for events). */
void ngx_http_drl_kick(void);
ngx_int_t ngx_http_drl_init_process(ngx_cycle_t *cycle);
void ngx_http_drl_exit_process(ngx_cycle_t *cycle);
/* The URI a worker opens for `uri` into buf: connect=lazy added (unless
 * the URI sets connect=), so a store that is down when a worker starts
 * is the decisions' on_error, not a worker that cannot start. NULL when
 * it does not fit. */
char *ngx_http_drl_lazy_uri(char *buf, size_t n, const char *uri);

/* ngx_http_drl_vars.c: $drl_status and the others */
ngx_int_t ngx_http_drl_add_variables(ngx_conf_t *cf);

/* ngx_http_drl_handler.c */
ngx_int_t ngx_http_drl_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_drl_filter_init(ngx_conf_t *cf);
ngx_http_drl_ctx_t *ngx_http_drl_get_ctx(ngx_http_request_t *r);

#endif /* NGX_HTTP_DRL_MODULE_H */
