/*
 * The variables that report a request's decision, for logs and headers
 * (empty when no limit applied):
 *   $drl_status       PASSED, REJECTED, REJECTED_DRY_RUN or ERROR
 *   $drl_remaining    what is left of the limit reported (the denial, or
 *                     the allowed limit with the least left)
 *   $drl_retry_after  whole seconds until a denied request can pass
 *                     (rounded up; empty when allowed or never)
 *   $drl_limit        the capacity of that limit
 *   $drl_zone         the zone it belongs to
 *   $drl_path         who decided: store, near, local (on_error=local),
 *                     fail_open, fail_closed (on_error=allow, deny)
 */
#include "ngx_http_drl_module.h"

#include "common/result.h"

enum { V_STATUS, V_REMAINING, V_RETRY_AFTER, V_LIMIT, V_ZONE, V_PATH };

static ngx_str_t status_names[] = {
	ngx_null_string, ngx_string("PASSED"), ngx_string("REJECTED"),
	ngx_string("REJECTED_DRY_RUN"), ngx_string("ERROR")};

/* v is empty ("-" in a log). */
static ngx_int_t none(ngx_http_variable_value_t *v)
{
	v->not_found = 1;
	return NGX_OK;
}

/* Set v to len bytes at p (the request's pool). */
static ngx_int_t set(ngx_http_variable_value_t *v, u_char *p, size_t len)
{
	v->data = p;
	v->len = len;
	v->valid = 1;
	v->no_cacheable = 0;
	v->not_found = 0;
	return NGX_OK;
}

static ngx_int_t get_variable(ngx_http_request_t *r,
			      ngx_http_variable_value_t *v, uintptr_t which)
{
	ngx_http_drl_ctx_t *ctx = ngx_http_drl_get_ctx(r->main);
	u_char *p;
	int64_t n;

	if (ctx == NULL || ctx->status == NGX_HTTP_DRL_UNSET)
		return none(v);
	if (which == V_STATUS)
		return set(v, status_names[ctx->status].data,
			   status_names[ctx->status].len);
	if (!ctx->has_result)
		return none(v);
	if (which == V_ZONE)
		return set(v, ctx->zone->name.data, ctx->zone->name.len);
	if (which == V_PATH) {
		const char *s = tl_path_name(ctx->result.path);
		return set(v, (u_char *)s, ngx_strlen(s));
	}
	if (which == V_REMAINING)
		n = ctx->result.remaining;
	else if (which == V_LIMIT)
		n = ctx->result.limit;
	else if (ctx->result.would_allow ||
		 ctx->result.retry_after_us == DRL_NEVER)
		return none(v); /* retry_after: nothing to wait for */
	else
		n = tl_ceil_div(ctx->result.retry_after_us, 1000000);
	p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
	if (p == NULL)
		return NGX_ERROR;
	return set(v, p, (size_t)(ngx_sprintf(p, "%L", n) - p));
}

/* The variable $name, answered by get_variable for `which`, read anew
 * each time it is used. */
#define DRL_VARIABLE(name, which)                                              \
	{                                                                      \
		ngx_string(name), NULL, get_variable, which,                   \
			NGX_HTTP_VAR_NOCACHEABLE, 0                            \
	}

static ngx_http_variable_t variables[] = {
	DRL_VARIABLE("drl_status", V_STATUS),
	DRL_VARIABLE("drl_remaining", V_REMAINING),
	DRL_VARIABLE("drl_retry_after", V_RETRY_AFTER),
	DRL_VARIABLE("drl_limit", V_LIMIT),
	DRL_VARIABLE("drl_zone", V_ZONE),
	DRL_VARIABLE("drl_path", V_PATH),
	ngx_http_null_variable};

ngx_int_t ngx_http_drl_add_variables(ngx_conf_t *cf)
{
	for (ngx_http_variable_t *v = variables; v->name.len; v++) {
		ngx_http_variable_t *var =
			ngx_http_add_variable(cf, &v->name, v->flags);
		if (var == NULL)
			return NGX_ERROR;
		var->get_handler = v->get_handler;
		var->data = v->data;
	}
	return NGX_OK;
}
