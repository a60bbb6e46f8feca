/*
 * Deciding a request (preaccess phase, as limit_req) and reporting the
 * decision in headers.
 *
 * The handler starts the first limit's decision with drl_async_allow()
 * and returns NGX_AGAIN: the request waits, off the loop, reading nothing
 * (ngx_http_test_reading notices a client that goes away). The callback
 * (on the worker's thread, from drl_async_process()) records the answer,
 * starts the next limit's, or, when all are decided, resumes the phases;
 * the handler, called again, answers with what was decided. Limits are
 * decided one after the other in the order of the `drl` lines, and the
 * first denial stops: the limits after it are not consumed.
 *
 * A request that ends while a decision is in flight: its pool cleanup
 * unlinks the decision (ctx NULL), and the callback then only frees it.
 */
#include "ngx_http_drl_module.h"

#include "common/ratelimit.h"
#include "common/result.h"

static ngx_http_output_header_filter_pt next_header_filter;

/* The request's pool is going: a decision in flight must not come back
 * to it. */
static void ctx_cleanup(void *data)
{
	ngx_http_drl_ctx_t *ctx = data;

	if (ctx->in_flight != NULL)
		ctx->in_flight->ctx = NULL;
	ctx->in_flight = NULL;
}

/* The request's decision, also after an internal redirect (which clears
 * the modules' contexts): found again through its pool cleanup. */
ngx_http_drl_ctx_t *ngx_http_drl_get_ctx(ngx_http_request_t *r)
{
	ngx_http_drl_ctx_t *ctx =
		ngx_http_get_module_ctx(r, ngx_http_drl_module);

	if (ctx != NULL)
		return ctx;
	for (ngx_pool_cleanup_t *c = r->pool->cleanup; c != NULL; c = c->next)
		if (c->handler == ctx_cleanup) {
			ctx = c->data;
			ngx_http_set_ctx(r, ctx, ngx_http_drl_module);
			return ctx;
		}
	return NULL;
}

/* Whether rc is the store failing (no on_error= answered for it). */
static ngx_flag_t store_failure(int rc)
{
	return rc == DRL_ESTORE || rc == DRL_ETIMEDOUT ||
	       rc == DRL_EUNAVAILABLE;
}

/* A decision that failed: logged; 503 when the store failed (or is not
 * there), 500 otherwise. */
static ngx_int_t failed(ngx_http_request_t *r, ngx_http_drl_ctx_t *ctx,
			ngx_http_drl_zone_t *z, int rc, const char *msg)
{
	ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
		      "drl zone \"%V\": %s: %s", &z->name, drl_err_name(rc),
		      msg);
	ctx->status = NGX_HTTP_DRL_ERROR;
	return store_failure(rc) || rc == DRL_EBUSY
		       ? NGX_HTTP_SERVICE_UNAVAILABLE
		       : NGX_HTTP_INTERNAL_SERVER_ERROR;
}

/* Record zone z's decision res in ctx: NGX_DECLINED to go on with the
 * next limit, or the status to answer (a denial, not a dry run). */
static ngx_int_t record(ngx_http_request_t *r, ngx_http_drl_ctx_t *ctx,
			ngx_http_drl_zone_t *z, const drl_result *res)
{
	ngx_http_drl_loc_conf_t *lcf = ctx->lcf;

	if (!res->would_allow) {
		/* dry run: drl_dry_run, or the spec's shadow=1 */
		ngx_flag_t dry = lcf->dry_run || res->allowed;
		ngx_log_error(lcf->log_level, r->connection->log, 0,
			      "limiting requests%s by drl zone \"%V\", "
			      "retry after %L ms",
			      dry ? ", dry run," : "", &z->name,
			      res->retry_after_us == DRL_NEVER
				      ? (int64_t)-1
				      : res->retry_after_us / 1000);
		/* reported: the denial that answers, else the first dry one */
		if (!dry || ctx->status != NGX_HTTP_DRL_REJECTED_DRY_RUN) {
			ctx->result = *res;
			ctx->zone = z;
			ctx->has_result = 1;
		}
		ctx->status = dry ? NGX_HTTP_DRL_REJECTED_DRY_RUN
				  : NGX_HTTP_DRL_REJECTED;
		return dry ? NGX_DECLINED : (ngx_int_t)lcf->status;
	}
	if (ctx->status == NGX_HTTP_DRL_UNSET)
		ctx->status = NGX_HTTP_DRL_PASSED;
	if (ctx->status == NGX_HTTP_DRL_PASSED &&
	    (!ctx->has_result || res->remaining < ctx->result.remaining)) {
		ctx->result = *res;
		ctx->zone = z;
		ctx->has_result = 1;
	}
	return NGX_DECLINED;
}

static void on_decision(drl_async *a, int rc, const drl_result *res,
			const drl_error *err, void *arg);

/* Start the decision of the next limit with a key: NGX_AGAIN (started:
 * the callback goes on), NGX_DECLINED (every limit decided, none
 * refused), or the status to answer. */
static ngx_int_t start_next(ngx_http_request_t *r, ngx_http_drl_ctx_t *ctx)
{
	ngx_http_drl_limit_t *limits = ctx->lcf->limits->elts;
	drl_error err;
	ngx_str_t key;

	for (; ctx->next < ctx->lcf->limits->nelts; ctx->next++) {
		ngx_http_drl_zone_t *z = limits[ctx->next].zone;
		if (ngx_http_complex_value(r, &z->key, &key) != NGX_OK)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
		if (key.len == 0)
			continue; /* as limit_req: an empty key is not limited */
		if (key.len > DRL_KEY_MAX)
			return failed(r, ctx, z, DRL_EINVAL,
				      "the key is longer than 1 MiB");
		if (z->limiter == NULL || ngx_http_drl_async() == NULL)
			return failed(r, ctx, z, DRL_EUNAVAILABLE,
				      "this worker could not open its store "
				      "(see the log at its start)");
		ngx_http_drl_decision_t *d =
			ngx_alloc(sizeof *d, r->connection->log);
		if (d == NULL)
			return NGX_HTTP_INTERNAL_SERVER_ERROR;
		d->r = r;
		d->ctx = ctx;
		int rc = drl_async_allow(ngx_http_drl_async(), z->limiter,
					 key.data, key.len, 1, on_decision, d,
					 &err);
		if (rc != 0) {
			ngx_free(d);
			return failed(r, ctx, z, rc, err.message);
		}
		ngx_http_drl_pending(1);
		ngx_http_drl_kick();
		ctx->in_flight = d;
		ctx->waiting = 1;
		r->read_event_handler = ngx_http_test_reading;
		r->write_event_handler = ngx_http_request_empty_handler;
		return NGX_AGAIN;
	}
	return NGX_DECLINED;
}

/* A decision came back (the worker's thread, drl_async_process()). */
static void on_decision(drl_async *a, int rc, const drl_result *res,
			const drl_error *err, void *arg)
{
	ngx_http_drl_decision_t *d = arg;
	ngx_http_drl_ctx_t *ctx = d->ctx;
	ngx_http_request_t *r = d->r;

	ngx_free(d);
	ngx_http_drl_pending(-1);
	if (ngx_http_drl_exiting())
		return;    /* the worker is stopping: no request is touched */
	if (ctx == NULL) { /* the request is gone */
		ngx_log_error(
			NGX_LOG_INFO, ngx_cycle->log, 0,
			"drl: a decision came back after its request "
			"ended (%s)",
			rc == 0 ? (res->would_allow ? "allowed" : "denied")
				: drl_err_name(rc));
		return;
	}
	ctx->in_flight = NULL;
	ctx->waiting = 0;

	ngx_http_drl_limit_t *limits = ctx->lcf->limits->elts;
	ngx_http_drl_zone_t *z = limits[ctx->next].zone;
	ngx_int_t out = rc != 0 ? failed(r, ctx, z, rc, err->message)
				: record(r, ctx, z, res);
	if (out == NGX_DECLINED) {
		ctx->next++;
		out = start_next(r, ctx);
		if (out == NGX_AGAIN)
			return;
	}
	ctx->done = 1;
	ctx->resume = 1;
	ctx->rc = out;

	ngx_connection_t *c = r->connection;
	r->read_event_handler = ngx_http_block_reading;
	r->write_event_handler = ngx_http_core_run_phases;
	ngx_http_core_run_phases(r);
	ngx_http_run_posted_requests(c);
}

/* The RateLimit-Policy value of every limit in the location, joined. */
static void join_policies(ngx_http_request_t *r, ngx_http_drl_ctx_t *ctx)
{
	ngx_http_drl_limit_t *limits = ctx->lcf->limits->elts;
	size_t len = 0;

	for (ngx_uint_t i = 0; i < ctx->lcf->limits->nelts; i++)
		len += ngx_strlen(limits[i].zone->policy) + 2;
	ctx->policies.data = ngx_pnalloc(r->pool, len + 1);
	if (ctx->policies.data == NULL)
		return;
	u_char *p = ctx->policies.data;
	for (ngx_uint_t i = 0; i < ctx->lcf->limits->nelts; i++) {
		const char *one = limits[i].zone->policy;
		if (*one == '\0')
			continue;
		if (p != ctx->policies.data)
			p = ngx_cpymem(p, ", ", 2);
		p = ngx_cpymem(p, one, ngx_strlen(one));
	}
	ctx->policies.len = (size_t)(p - ctx->policies.data);
}

ngx_int_t ngx_http_drl_handler(ngx_http_request_t *r)
{
	ngx_http_drl_loc_conf_t *lcf =
		ngx_http_get_module_loc_conf(r, ngx_http_drl_module);
	ngx_http_drl_ctx_t *ctx;
	ngx_pool_cleanup_t *cln;

	if (r != r->main) /* subrequests are not limited */
		return NGX_DECLINED;
	ctx = ngx_http_drl_get_ctx(r);
	if (ctx != NULL) {
		if (ctx->waiting)
			return NGX_AGAIN;
		if (ctx->resume) { /* the callback resumed the phases */
			ctx->resume = 0;
			return ctx->rc;
		}
		/* limited once already (before an internal redirect), as
		 * limit_req */
		return NGX_DECLINED;
	}
	if (lcf->limits == NULL || lcf->limits->nelts == 0)
		return NGX_DECLINED;

	ctx = ngx_pcalloc(r->pool, sizeof *ctx);
	cln = ngx_pool_cleanup_add(r->pool, 0);
	if (ctx == NULL || cln == NULL)
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	cln->handler = ctx_cleanup;
	cln->data = ctx;
	ngx_http_set_ctx(r, ctx, ngx_http_drl_module);
	ctx->lcf = lcf;
	ctx->headers = lcf->headers ? 1 : 0;
	if (ctx->headers)
		join_policies(r, ctx);

	ngx_int_t rc = start_next(r, ctx);
	if (rc == NGX_AGAIN)
		return NGX_AGAIN;
	ctx->done = 1;
	ctx->rc = rc;
	return rc;
}

/* Add a response header. */
static ngx_int_t add_header(ngx_http_request_t *r, const char *name,
			    u_char *value, size_t len)
{
	ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);

	if (h == NULL)
		return NGX_ERROR;
	h->hash = 1;
	h->key.data = (u_char *)name;
	h->key.len = ngx_strlen(name);
	h->value.data = value;
	h->value.len = len;
	return NGX_OK;
}

/* drl_headers on: RateLimit-Policy (every limit of the location),
 * RateLimit (the decision reported: the denial, or the allowed limit
 * with the least left), Retry-After on a denial that a retry can pass;
 * the same fields as drld (tools/common/ratelimit.c). */
static ngx_int_t header_filter(ngx_http_request_t *r)
{
	ngx_http_drl_ctx_t *ctx;

	if (r != r->main)
		return next_header_filter(r);
	ctx = ngx_http_drl_get_ctx(r);
	if (ctx == NULL || !ctx->headers || !ctx->done)
		return next_header_filter(r);
	if (ctx->policies.len &&
	    add_header(r, "RateLimit-Policy", ctx->policies.data,
		       ctx->policies.len) != NGX_OK)
		return NGX_ERROR;
	if (ctx->has_result && tl_ratelimit_has_numbers(&ctx->result)) {
		u_char *v = ngx_pnalloc(r->pool, TL_RATELIMIT_HEADER_MAX);
		if (v == NULL)
			return NGX_ERROR;
		tl_ratelimit_value((char *)v, TL_RATELIMIT_HEADER_MAX,
				   (char *)ctx->zone->name.data,
				   ctx->zone->nlimits, &ctx->result);
		if (add_header(r, "RateLimit", v, ngx_strlen(v)) != NGX_OK)
			return NGX_ERROR;
	}
	if (ctx->status == NGX_HTTP_DRL_REJECTED &&
	    ctx->result.retry_after_us != DRL_NEVER) {
		u_char *v = ngx_pnalloc(r->pool, NGX_INT64_LEN);
		if (v == NULL)
			return NGX_ERROR;
		u_char *e = ngx_sprintf(
			v, "%L",
			(int64_t)tl_ceil_div(ctx->result.retry_after_us,
					     1000000));
		if (add_header(r, "Retry-After", v, (size_t)(e - v)) != NGX_OK)
			return NGX_ERROR;
	}
	return next_header_filter(r);
}

ngx_int_t ngx_http_drl_filter_init(ngx_conf_t *cf)
{
	next_header_filter = ngx_http_top_header_filter;
	ngx_http_top_header_filter = header_filter;
	return NGX_OK;
}
