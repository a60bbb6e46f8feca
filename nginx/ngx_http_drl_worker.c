/*
 * Each worker's libdrl objects: one async context, one store per distinct
 * URI and one limiter per zone, all made after fork (init_process: a
 * context or a store's threads do not survive fork) and freed at the
 * worker's exit.
 *
 * The loop: the context's descriptor (drl_async_fd(), readable while
 * finished decisions wait) is watched by nginx's event module like a
 * connection's, level-triggered; on readiness drl_async_process() runs the
 * callbacks on the worker's thread. No call here waits for a store.
 *
 * Graceful stops (`nginx -s quit`, and the old workers of `-s reload`): an
 * exiting worker ends once no timer that cannot be canceled is left, and a
 * request waiting for its decision has none. So while decisions are in
 * flight a timer of ours (never canceled, re-armed if it fires) keeps the
 * worker running until the last callback.
 *
 * A decision made at start (memory://, a near-cache denial) is ready at
 * once: after a start the handler posts the descriptor's event, so its
 * callback runs at the end of this loop iteration, not after one more
 * epoll_wait() (with the descriptor readable, the level-triggered event
 * would wake the next one anyway).
 */
#include "ngx_http_drl_module.h"

#include <string.h>

static struct {
	drl_async *async;
	ngx_connection_t *conn; /* holds drl_async_fd() for the event module */
	drl_store **stores;     /* by ngx_http_drl_zone_t.store_index */
	ngx_uint_t nstores;
	ngx_http_drl_main_conf_t *mcf;
	ngx_event_t keepalive; /* set while pending > 0 */
	ngx_int_t pending;     /* decisions started, not yet called back */
	ngx_uint_t exiting;
} w;

drl_async *ngx_http_drl_async(void)
{
	return w.async;
}

ngx_uint_t ngx_http_drl_exiting(void)
{
	return w.exiting;
}

/* A day: the timer only has to exist (it is deleted when the last
 * decision is called back, and re-armed should it ever fire). */
#define KEEPALIVE_MS (86400 * 1000)

static void keepalive_fired(ngx_event_t *ev)
{
	if (w.pending > 0 && !w.exiting)
		ngx_add_timer(&w.keepalive, KEEPALIVE_MS);
}

void ngx_http_drl_pending(ngx_int_t delta)
{
	w.pending += delta;
	if (w.exiting)
		return;
	if (w.pending > 0 && !w.keepalive.timer_set)
		ngx_add_timer(&w.keepalive, KEEPALIVE_MS);
	else if (w.pending == 0 && w.keepalive.timer_set)
		ngx_del_timer(&w.keepalive);
}

char *ngx_http_drl_lazy_uri(char *buf, size_t n, const char *uri)
{
	size_t len = strlen(uri);
	int network = strncmp(uri, "redis", 5) == 0 ||
		      strncmp(uri, "memcached", 9) == 0;
	const char *add = "";

	if (network && strstr(uri, "connect=") == NULL)
		add = strchr(uri, '?') ? "&connect=lazy" : "?connect=lazy";
	if (len + strlen(add) + 1 > n)
		return NULL;
	memcpy(buf, uri, len);
	strcpy(buf + len, add);
	return buf;
}

/* The context's descriptor is readable: run the finished decisions'
 * callbacks (each resumes its request). */
static void async_ready(ngx_event_t *ev)
{
	if (w.async != NULL)
		(void)drl_async_process(w.async);
}

void ngx_http_drl_kick(void)
{
	/* nginx's event macros are several statements: braces */
	if (w.conn != NULL && !w.conn->read->posted) {
		ngx_post_event(w.conn->read, &ngx_posted_events);
	}
}

/* Open the worker's stores and make its limiters. One that fails is
 * logged and left NULL: its zone's decisions are then errors (status
 * 500/503 and $drl_status ERROR), the worker still starts. */
static void make_limiters(ngx_cycle_t *cycle)
{
	ngx_str_t *uris = w.mcf->uris.elts;
	ngx_http_drl_zone_t **zones = w.mcf->zones.elts;
	char lazy[4096], shown[DRL_URI_SHOW_MAX];
	drl_error err;

	for (ngx_uint_t i = 0; i < w.nstores; i++) {
		const char *uri = (char *)uris[i].data;
		if (ngx_http_drl_lazy_uri(lazy, sizeof lazy, uri) == NULL ||
		    drl_store_open(&w.stores[i], lazy, &err) != 0) {
			w.stores[i] = NULL;
			ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
				      "drl: cannot open store \"%s\": %s",
				      drl_uri_redact(shown, sizeof shown, uri),
				      err.message);
		}
	}
	for (ngx_uint_t i = 0; i < w.mcf->zones.nelts; i++) {
		ngx_http_drl_zone_t *z = zones[i];
		drl_store *s = w.stores[z->store_index];
		z->limiter = NULL;
		if (s != NULL &&
		    drl_limiter_new(&z->limiter, s, (char *)z->spec.data,
				    (char *)z->prefix.data, &err) != 0) {
			z->limiter = NULL;
			ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
				      "drl zone \"%V\": %s", &z->name,
				      err.message);
		}
	}
}

ngx_int_t ngx_http_drl_init_process(ngx_cycle_t *cycle)
{
	drl_error err;

	ngx_memzero(&w, sizeof w);
	if (cycle->conf_ctx[ngx_http_module.index] == NULL)
		return NGX_OK; /* no http block */
	w.mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_drl_module);
	if (w.mcf == NULL || w.mcf->zones.nelts == 0)
		return NGX_OK;

	w.keepalive.handler = keepalive_fired;
	w.keepalive.log = cycle->log;
	w.keepalive.cancelable = 0;
	w.nstores = w.mcf->uris.nelts;
	w.stores = ngx_pcalloc(cycle->pool, w.nstores * sizeof *w.stores);
	if (w.stores == NULL)
		return NGX_ERROR;
	if (drl_async_new(&w.async, NULL, &err) != 0) {
		ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
			      "drl: cannot make the async context: %s",
			      err.message);
		return NGX_ERROR;
	}
	w.conn = ngx_get_connection(drl_async_fd(w.async), cycle->log);
	if (w.conn == NULL) {
		drl_async_free(w.async);
		w.async = NULL;
		return NGX_ERROR;
	}
	w.conn->read->handler = async_ready;
	w.conn->read->log = cycle->log;
	w.conn->write->log = cycle->log;
	/* level-triggered: a callback that finishes while others run
	 * leaves the descriptor readable, and the next round sees it */
	if (ngx_add_event(w.conn->read, NGX_READ_EVENT, NGX_LEVEL_EVENT) !=
	    NGX_OK) {
		ngx_free_connection(w.conn);
		w.conn = NULL;
		drl_async_free(w.async);
		w.async = NULL;
		return NGX_ERROR;
	}
	make_limiters(cycle);
	return NGX_OK;
}

void ngx_http_drl_exit_process(ngx_cycle_t *cycle)
{
	if (w.mcf == NULL)
		return;
	w.exiting = 1;
	if (w.keepalive.timer_set)
		ngx_del_timer(&w.keepalive);
	if (w.conn != NULL) {
		if (w.conn->read->posted) {
			ngx_delete_posted_event(w.conn->read);
		}
		/* the context closes the descriptor: stop watching it */
		ngx_del_event(w.conn->read, NGX_READ_EVENT, 0);
		w.conn->fd = (ngx_socket_t)-1; /* not nginx's to close */
		ngx_free_connection(w.conn);
		w.conn = NULL;
	}
	/* decisions still in flight (a fast stop) are called back here
	 * and, seeing w.exiting, touch no request */
	drl_async_free(w.async);
	w.async = NULL;
	ngx_http_drl_zone_t **zones = w.mcf->zones.elts;
	for (ngx_uint_t i = 0; i < w.mcf->zones.nelts; i++) {
		drl_limiter_free(zones[i]->limiter);
		zones[i]->limiter = NULL;
	}
	for (ngx_uint_t i = 0; i < w.nstores; i++)
		drl_store_free(w.stores[i]);
	w.nstores = 0;
	w.mcf = NULL;
}
