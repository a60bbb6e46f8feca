/*
 * The module, its directives and their configuration (docs/nginx.md):
 *
 *   drl_zone KEY zone=NAME spec=SPEC [store=URI] [on_error=allow|deny|local];
 *   drl zone=NAME;                       (several per location)
 *   drl_status CODE;                     (429)
 *   drl_dry_run on|off;                  (off)
 *   drl_headers on|off;                  (off)
 *   drl_log_level info|notice|warn|error; (error)
 *
 * Every zone's store URI and spec are checked here, in the master (so
 * `nginx -t` rejects a bad one with the library's message), by opening
 * the store without connecting and making the limiter, then freeing
 * both: workers make their own after fork (ngx_http_drl_worker.c).
 */
#include "ngx_http_drl_module.h"

#include "common/memory_uri.h"
#include "common/ratelimit.h"

#include <string.h>

static ngx_int_t drl_preconfiguration(ngx_conf_t *cf);
static ngx_int_t drl_postconfiguration(ngx_conf_t *cf);
static void *drl_create_main_conf(ngx_conf_t *cf);
static void *drl_create_loc_conf(ngx_conf_t *cf);
static char *drl_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *drl_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *drl_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

/* As limit_req_log_level. */
static ngx_conf_enum_t drl_log_levels[] = {
	{ngx_string("info"), NGX_LOG_INFO},
	{ngx_string("notice"), NGX_LOG_NOTICE},
	{ngx_string("warn"), NGX_LOG_WARN},
	{ngx_string("error"), NGX_LOG_ERR},
	{ngx_null_string, 0}};

/* As limit_req_status. */
static ngx_conf_num_bounds_t drl_status_bounds = {ngx_conf_check_num_bounds,
						  400, 599};

/* Each: name, where it may appear and its arguments, the setter, the
 * configuration it sets (loc), the field's offset there, the setter's
 * extra (bounds, enum values). */
static ngx_command_t drl_commands[] = {
	{ngx_string("drl_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
	 drl_zone_directive, 0, 0, NULL},
	{ngx_string("drl"),
	 NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF |
		 NGX_CONF_TAKE1,
	 drl_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
	{ngx_string("drl_status"),
	 NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF |
		 NGX_CONF_TAKE1,
	 ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET,
	 offsetof(ngx_http_drl_loc_conf_t, status), &drl_status_bounds},
	{ngx_string("drl_dry_run"),
	 NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF |
		 NGX_CONF_FLAG,
	 ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
	 offsetof(ngx_http_drl_loc_conf_t, dry_run), NULL},
	{ngx_string("drl_headers"),
	 NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF |
		 NGX_CONF_FLAG,
	 ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
	 offsetof(ngx_http_drl_loc_conf_t, headers), NULL},
	{ngx_string("drl_log_level"),
	 NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF |
		 NGX_CONF_TAKE1,
	 ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET,
	 offsetof(ngx_http_drl_loc_conf_t, log_level), &drl_log_levels},
	ngx_null_command};

static ngx_http_module_t drl_module_ctx = {
	drl_preconfiguration,  /* preconfiguration */
	drl_postconfiguration, /* postconfiguration */
	drl_create_main_conf,  /* create main configuration */
	NULL,                  /* init main configuration */
	NULL,                  /* create server configuration */
	NULL,                  /* merge server configuration */
	drl_create_loc_conf,   /* create location configuration */
	drl_merge_loc_conf     /* merge location configuration */
};

ngx_module_t ngx_http_drl_module = {
	NGX_MODULE_V1,
	&drl_module_ctx,           /* module context */
	drl_commands,              /* module directives */
	NGX_HTTP_MODULE,           /* module type */
	NULL,                      /* init master */
	NULL,                      /* init module */
	ngx_http_drl_init_process, /* init process */
	NULL,                      /* init thread */
	NULL,                      /* exit thread */
	ngx_http_drl_exit_process, /* exit process */
	NULL,                      /* exit master */
	NGX_MODULE_V1_PADDING};

static ngx_int_t drl_preconfiguration(ngx_conf_t *cf)
{
	return ngx_http_drl_add_variables(cf);
}

/* The handler runs in the preaccess phase, as limit_req's does. */
static ngx_int_t drl_postconfiguration(ngx_conf_t *cf)
{
	ngx_http_core_main_conf_t *cmcf =
		ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
	ngx_http_handler_pt *h = ngx_array_push(
		&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);

	if (h == NULL)
		return NGX_ERROR;
	*h = ngx_http_drl_handler;
	return ngx_http_drl_filter_init(cf);
}

static void *drl_create_main_conf(ngx_conf_t *cf)
{
	ngx_http_drl_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof *mcf);

	if (mcf == NULL)
		return NULL;
	if (ngx_array_init(&mcf->zones, cf->pool, 4,
			   sizeof(ngx_http_drl_zone_t *)) != NGX_OK ||
	    ngx_array_init(&mcf->uris, cf->pool, 2, sizeof(ngx_str_t)) !=
		    NGX_OK)
		return NULL;
	return mcf;
}

static void *drl_create_loc_conf(ngx_conf_t *cf)
{
	ngx_http_drl_loc_conf_t *lcf = ngx_pcalloc(cf->pool, sizeof *lcf);

	if (lcf == NULL)
		return NULL;
	lcf->limits = NGX_CONF_UNSET_PTR;
	lcf->status = NGX_CONF_UNSET_UINT;
	lcf->dry_run = NGX_CONF_UNSET;
	lcf->headers = NGX_CONF_UNSET;
	lcf->log_level = NGX_CONF_UNSET_UINT;
	return lcf;
}

/* As limit_req: a level with no `drl` of its own inherits its parent's
 * list as a whole. */
static char *drl_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
	ngx_http_drl_loc_conf_t *prev = parent, *conf = child;

	ngx_conf_merge_ptr_value(conf->limits, prev->limits, NULL);
	ngx_conf_merge_uint_value(conf->status, prev->status,
				  NGX_HTTP_TOO_MANY_REQUESTS);
	ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
	ngx_conf_merge_value(conf->headers, prev->headers, 0);
	ngx_conf_merge_uint_value(conf->log_level, prev->log_level,
				  NGX_LOG_ERR);
	return NGX_CONF_OK;
}

/* "NAME=value" of an argument: the value into *v when arg starts with
 * NAME=. */
static ngx_flag_t param(ngx_str_t *arg, const char *name, ngx_str_t *v)
{
	size_t n = strlen(name);

	if (arg->len <= n || ngx_strncmp(arg->data, name, n) != 0 ||
	    arg->data[n] != '=')
		return 0;
	v->data = arg->data + n + 1;
	v->len = arg->len - n - 1;
	return 1;
}

/* The name of a NAME=VALUE parameter (all of it when it has no '='):
 * what an error may show of a parameter it does not know, whose value
 * may be a password. */
static ngx_str_t param_name(const ngx_str_t *arg)
{
	ngx_str_t n = *arg;
	u_char *eq = ngx_strlchr(arg->data, arg->data + arg->len, '=');

	if (eq != NULL)
		n.len = (size_t)(eq - arg->data);
	return n;
}

/* Whether v is the string lit. */
static ngx_flag_t is(const ngx_str_t *v, const char *lit)
{
	return v->len == strlen(lit) && ngx_strncmp(v->data, lit, v->len) == 0;
}

/* The zone called name, or NULL. */
static ngx_http_drl_zone_t *find_zone(ngx_http_drl_main_conf_t *mcf,
				      const ngx_str_t *name)
{
	ngx_http_drl_zone_t **zones = mcf->zones.elts;

	for (ngx_uint_t i = 0; i < mcf->zones.nelts; i++)
		if (is(name, (char *)zones[i]->name.data))
			return zones[i];
	return NULL;
}

/* A '\0'-ended copy of s from the configuration's pool. */
static ngx_int_t dup_str(ngx_conf_t *cf, ngx_str_t *out, const u_char *s,
			 size_t len)
{
	out->data = ngx_pnalloc(cf->pool, len + 1);
	if (out->data == NULL)
		return NGX_ERROR;
	ngx_memcpy(out->data, s, len);
	out->data[len] = '\0';
	out->len = len;
	return NGX_OK;
}

/* The index of uri in mcf->uris, added when new; NGX_ERROR when out of
 * memory. Zones on one URI share one store in each worker. */
static ngx_int_t uri_index(ngx_conf_t *cf, ngx_http_drl_main_conf_t *mcf,
			   ngx_str_t *uri)
{
	ngx_str_t *u = mcf->uris.elts;

	for (ngx_uint_t i = 0; i < mcf->uris.nelts; i++)
		if (u[i].len == uri->len &&
		    ngx_strncmp(u[i].data, uri->data, uri->len) == 0)
			return (ngx_int_t)i;
	u = ngx_array_push(&mcf->uris);
	if (u == NULL)
		return NGX_ERROR;
	*u = *uri;
	return (ngx_int_t)mcf->uris.nelts - 1;
}

/* nginx -t's word on z's store URI: the library's message, the URI
 * without its password. */
static void bad_store(ngx_conf_t *cf, ngx_http_drl_zone_t *z,
		      const drl_error *err)
{
	char shown[DRL_URI_SHOW_MAX];

	ngx_conf_log_error(
		NGX_LOG_EMERG, cf, 0, "drl_zone \"%V\": store=\"%s\": %s",
		&z->name,
		drl_uri_redact(shown, sizeof shown, (char *)z->uri.data),
		err->message);
}

/* Open z's store (not connecting) and make its limiter, then free both:
 * the library's message for a bad URI or spec, NULL when they are good.
 * Fills z->policy and z->nlimits. */
static char *check_zone(ngx_conf_t *cf, ngx_http_drl_zone_t *z)
{
	char lazy[4096];
	drl_store *store = NULL;
	drl_limiter *lim = NULL;
	drl_error err;
	int rc;

	if (ngx_http_drl_lazy_uri(lazy, sizeof lazy, (char *)z->uri.data) ==
	    NULL) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "drl_zone \"%V\": store URI too long",
				   &z->name);
		return NGX_CONF_ERROR;
	}
	rc = drl_store_open(&store, lazy, &err);
	if (rc != 0) {
		bad_store(cf, z, &err);
		return NGX_CONF_ERROR;
	}
	rc = drl_limiter_new(&lim, store, (char *)z->spec.data,
			     (char *)z->prefix.data, &err);
	drl_limiter_free(lim);
	drl_store_free(store);
	if (rc != 0) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "drl_zone \"%V\": spec=\"%V\": %s", &z->name,
				   &z->spec, err.message);
		return NGX_CONF_ERROR;
	}
	z->policy = ngx_pnalloc(cf->pool, TL_POLICY_HEADER_MAX);
	if (z->policy == NULL)
		return NGX_CONF_ERROR;
	z->nlimits =
		tl_ratelimit_policy(z->policy, TL_POLICY_HEADER_MAX,
				    (char *)z->name.data, (char *)z->spec.data);
	return NULL;
}

/* A memory:// zone store (the default) keeps at most
 * NGX_HTTP_DRL_MEMORY_MAX_KEYS keys a worker, a quarter of them one
 * limit's, unless its URI names its own bounds: the keys are the
 * clients' to choose (issue 45, hole 9). Rewrites z->uri. */
static ngx_int_t bound_memory(ngx_conf_t *cf, ngx_http_drl_zone_t *z)
{
	char bounded[TL_MEMORY_URI_MAX];
	drl_error err;

	if (ngx_strncasecmp(z->uri.data, (u_char *)"memory:", 7) != 0)
		return NGX_OK;
	if (tl_memory_uri(bounded, sizeof bounded, (char *)z->uri.data,
			  NGX_HTTP_DRL_MEMORY_MAX_KEYS, 0, &err) != 0) {
		bad_store(cf, z, &err);
		return NGX_ERROR;
	}
	return dup_str(cf, &z->uri, (u_char *)bounded, strlen(bounded));
}

/* Whether a zone name is fit for the RateLimit headers: 1..64 bytes of
 * letters, digits, '_', '-' and '.' (a quoted string there). */
static ngx_flag_t good_name(ngx_str_t *s)
{
	if (s->len == 0 || s->len > NGX_HTTP_DRL_NAME_MAX)
		return 0;
	for (size_t i = 0; i < s->len; i++) {
		u_char c = s->data[i];
		if (!(isalnum(c) || c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

/* drl_zone KEY zone=NAME spec=SPEC [store=URI] [on_error=POLICY] */
static char *drl_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_drl_main_conf_t *mcf =
		ngx_http_conf_get_module_main_conf(cf, ngx_http_drl_module);
	ngx_str_t *args = cf->args->elts, name = ngx_null_string,
		  spec = ngx_null_string, on_error = ngx_null_string, v;
	ngx_str_t uri = ngx_string("memory://");
	ngx_http_compile_complex_value_t ccv;
	ngx_http_drl_zone_t *z, **slot;

	for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
		if (param(&args[i], "zone", &v))
			name = v;
		else if (param(&args[i], "spec", &v))
			spec = v;
		else if (param(&args[i], "store", &v))
			uri = v;
		else if (param(&args[i], "on_error", &v))
			on_error = v;
		else {
			/* The name only: a misspelled store= holds a URI,
			 * and nginx -t output goes to terminals and CI logs. */
			ngx_str_t pname = param_name(&args[i]);
			ngx_conf_log_error(
				NGX_LOG_EMERG, cf, 0,
				"drl_zone: invalid parameter \"%V%s\""
				" (zone=, spec=, store=, on_error=)",
				&pname, pname.len < args[i].len ? "=..." : "");
			return NGX_CONF_ERROR;
		}
	}
	if (!good_name(&name)) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "drl_zone: zone=NAME is required: 1 to 64 "
				   "letters, digits, '_', '-' or '.'");
		return NGX_CONF_ERROR;
	}
	if (find_zone(mcf, &name) != NULL) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "drl_zone \"%V\" is already defined", &name);
		return NGX_CONF_ERROR;
	}
	if (spec.len == 0) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "drl_zone \"%V\": spec=SPEC is required",
				   &name);
		return NGX_CONF_ERROR;
	}
	if (on_error.len != 0 && !is(&on_error, "allow") &&
	    !is(&on_error, "deny") && !is(&on_error, "local")) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "drl_zone \"%V\": on_error=\"%V\": expected "
				   "allow, deny or local",
				   &name, &on_error);
		return NGX_CONF_ERROR;
	}

	/* each zone apart: `drl` keeps pointers to it */
	z = ngx_pcalloc(cf->pool, sizeof *z);
	slot = ngx_array_push(&mcf->zones);
	if (z == NULL || slot == NULL)
		return NGX_CONF_ERROR;
	*slot = z;
	z->prefix.len = name.len + 5;
	z->prefix.data = ngx_pnalloc(cf->pool, z->prefix.len + 1);
	if (z->prefix.data == NULL)
		return NGX_CONF_ERROR;
	*ngx_sprintf(z->prefix.data, "ngx:%V:", &name) = '\0';
	if (dup_str(cf, &z->name, name.data, name.len) != NGX_OK ||
	    dup_str(cf, &z->uri, uri.data, uri.len) != NGX_OK ||
	    bound_memory(cf, z) != NGX_OK)
		return NGX_CONF_ERROR;
	/* on_error= is one more segment of the spec (docs/failure.md) */
	z->spec.len = spec.len + (on_error.len ? on_error.len + 10 : 0);
	z->spec.data = ngx_pnalloc(cf->pool, z->spec.len + 1);
	if (z->spec.data == NULL)
		return NGX_CONF_ERROR;
	u_char *p = ngx_cpymem(z->spec.data, spec.data, spec.len);
	if (on_error.len)
		p = ngx_sprintf(p, ";on_error=%V", &on_error);
	*p = '\0';

	ngx_memzero(&ccv, sizeof ccv);
	ccv.cf = cf;
	ccv.value = &args[1];
	ccv.complex_value = &z->key;
	if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
		return NGX_CONF_ERROR;

	char *bad = check_zone(cf, z);
	if (bad != NULL)
		return bad;
	ngx_int_t idx = uri_index(cf, mcf, &z->uri);
	if (idx == NGX_ERROR)
		return NGX_CONF_ERROR;
	z->store_index = (ngx_uint_t)idx;
	return NGX_CONF_OK;
}

/* drl zone=NAME: the zone must be defined above, in the http block. */
static char *drl_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_drl_loc_conf_t *lcf = conf;
	ngx_http_drl_main_conf_t *mcf =
		ngx_http_conf_get_module_main_conf(cf, ngx_http_drl_module);
	ngx_str_t *args = cf->args->elts, name;
	ngx_http_drl_zone_t *zone;
	ngx_http_drl_limit_t *l;

	if (!param(&args[1], "zone", &name)) {
		ngx_str_t pname = param_name(&args[1]);
		ngx_conf_log_error(
			NGX_LOG_EMERG, cf, 0,
			"drl: invalid parameter \"%V%s\" (zone=NAME)", &pname,
			pname.len < args[1].len ? "=..." : "");
		return NGX_CONF_ERROR;
	}
	zone = find_zone(mcf, &name);
	if (zone == NULL) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
				   "drl: unknown zone \"%V\" (define it with "
				   "drl_zone in the http block, above)",
				   &name);
		return NGX_CONF_ERROR;
	}
	if (lcf->limits == NGX_CONF_UNSET_PTR || lcf->limits == NULL) {
		lcf->limits = ngx_array_create(cf->pool, 2, sizeof *l);
		if (lcf->limits == NULL)
			return NGX_CONF_ERROR;
	}
	l = lcf->limits->elts;
	for (ngx_uint_t i = 0; i < lcf->limits->nelts; i++)
		if (l[i].zone == zone)
			return "is duplicate";
	l = ngx_array_push(lcf->limits);
	if (l == NULL)
		return NGX_CONF_ERROR;
	l->zone = zone;
	return NGX_CONF_OK;
}
