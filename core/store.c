/* drl_store: a backend opened from a URI, or one the user brings. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* What b lacks for what it claims (a required method, a capability's
 * method), as the end of a sentence naming it; NULL: nothing. A bit
 * means something only from the version that brought it. */
static const char *missing(const drl_backend *b)
{
	unsigned need = DRL_CAP_COUNTER | DRL_CAP_CAS;
	if ((b->caps & need) != need || !b->incr || !b->get_many || !b->load ||
	    !b->cas || !b->destroy)
		return "lacks a required method (incr, get_many, load, cas, "
		       "destroy)";
	if (((b->caps & DRL_CAP_UPDATE) && !b->update) ||
	    ((b->caps & DRL_CAP_SCRIPT) && !b->eval) ||
	    ((b->caps & DRL_CAP_CLOCK) && !b->now))
		return "claims a capability without its method";
	/* DRL_CAP_BATCH is a promise about eval(): a store of version 1
	 * never gets batch scripts, whatever its caps say. */
	if (b->version >= 2 && (b->caps & DRL_CAP_BATCH) &&
	    !(b->caps & DRL_CAP_SCRIPT))
		return "claims DRL_CAP_BATCH without DRL_CAP_SCRIPT";
	if (b->version >= 5 && (b->caps & DRL_CAP_EVAL_START) &&
	    (!b->eval_start || !(b->caps & DRL_CAP_SCRIPT)))
		return "claims DRL_CAP_EVAL_START without eval_start or "
		       "DRL_CAP_SCRIPT";
	/* add_read_start is optional within DRL_CAP_ADD_READ */
	if (b->version >= 6 && (b->caps & DRL_CAP_ADD_READ) && !b->add_read)
		return "claims DRL_CAP_ADD_READ without add_read";
	/* channels (8 on: 7's layout, and 8's with channels, are refused
	 * before): the started slots take a channel */
	if (b->version >= 8 && (b->caps & DRL_CAP_CHANNEL) &&
	    ((!(b->caps & DRL_CAP_EVAL_START) &&
	      !((b->caps & DRL_CAP_ADD_READ) && b->add_read_start)) ||
	     !b->chan_open || !b->chan_poll || !b->chan_process ||
	     !b->chan_close))
		return "claims DRL_CAP_CHANNEL without DRL_CAP_EVAL_START or "
		       "add_read_start, or without a chan_ method";
	if (b->version >= 8 && (b->caps & DRL_CAP_COUNTER_GROUPS) &&
	    (!b->trim || (b->add_read_start && !b->trim_start)))
		return "claims DRL_CAP_COUNTER_GROUPS without trim (or "
		       "trim_start beside add_read_start)";
	if (b->version >= 9 &&
	    (((b->caps & DRL_CAP_POLICY) &&
	      (!b->eval_policy || !(b->caps & DRL_CAP_SCRIPT))) ||
	     ((b->caps & DRL_CAP_POLICY_START) &&
	      (!(b->caps & DRL_CAP_POLICY) ||
	       !(b->caps & DRL_CAP_EVAL_START)))))
		return "claims DRL_CAP_POLICY without eval_policy or "
		       "DRL_CAP_SCRIPT, or DRL_CAP_POLICY_START without "
		       "DRL_CAP_POLICY or DRL_CAP_EVAL_START";
	return NULL;
}

int drl_store_from_backend(drl_store **out, drl_backend *b, drl_error *err)
{
	if (out == NULL || b == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_store_from_backend: NULL argument");
	*out = NULL;
	if (b->version < 1 || b->version > DRL_BACKEND_VERSION)
		return drl_error_set(err, DRL_EINVAL,
				     "backend \"%s\" was written for store "
				     "interface version %d; this library knows "
				     "1 to %d",
				     b->name ? b->name : "?", b->version,
				     DRL_BACKEND_VERSION);
	/* Version 8 changed the started slots' signatures and dropped the
	 * channel twins, 9 moved the slots after chan_open
	 * (include/drl/sys/backend.h): from a store of 5 to 7 only the slots
	 * up to add_read() are where they were, so it is taken only when it
	 * starts no calls; from one of 8, when it has no channels and no
	 * counter groups (the slots up to chan_open()). */
	if ((b->version >= 5 && b->version <= 7 &&
	     (b->eval_start || (b->version >= 6 && b->add_read_start) ||
	      (b->version >= 7 &&
	       (b->caps & (DRL_CAP_CHANNEL | DRL_CAP_COUNTER_GROUPS))))) ||
	    /* and version 9 folded 8's chan_fd and chan_deadline into
	     * chan_poll: the slots after chan_open moved */
	    (b->version == 8 &&
	     (b->caps & (DRL_CAP_CHANNEL | DRL_CAP_COUNTER_GROUPS))))
		return drl_error_set(err, DRL_EINVAL,
				     "backend \"%s\" was written for store "
				     "interface version %d and starts calls, "
				     "whose slots changed in version %d: "
				     "rebuild it for version %d "
				     "(docs/stores.md)",
				     b->name ? b->name : "?", b->version,
				     DRL_BACKEND_VERSION, DRL_BACKEND_VERSION);
	const char *why = missing(b);
	if (why)
		return drl_error_set(err, DRL_EINVAL, "backend \"%s\" %s",
				     b->name ? b->name : "?", why);
	drl_store *s = calloc(1, sizeof *s);
	if (!s)
		return drl_error_set(err, DRL_ENOMEM, "out of memory");
	s->backend = b;
	drl__breaker_default(&s->breaker);
	*out = s;
	return 0;
}

/* The opener for `scheme`: openers[0..n) first, then the built-in ones. */
static drl_store_open_fn find_opener(const char *scheme,
				     const drl_store_opener *openers, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (openers[i].scheme && openers[i].open &&
		    strcmp(openers[i].scheme, scheme) == 0)
			return openers[i].open;
	return drl__backend_lookup(scheme);
}

int drl_store_open(drl_store **out, const char *uri, drl_error *err)
{
	return drl_store_open_with(out, uri, NULL, 0, err);
}

/* Parse `text`, take the core's options (the breaker's) and open the
 * backend with the opener for its scheme. On success *out is the backend,
 * *breaker what the URI asked of the breaker (turned off for a store over
 * several servers unless asked for). */
static int open_backend(drl_backend **out, drl__breaker *breaker,
			const char *text, const drl_store_opener *openers,
			size_t n, drl_error *err)
{
	*out = NULL;
	if (openers == NULL && n > 0)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_store_open_with: %zu openers at NULL",
				     n);
	if (text == NULL || text[0] == '\0')
		text = drl__backend_default_uri();
	drl__uri u;
	int rc = drl__uri_parse(&u, text, err);
	if (rc)
		return rc;
	drl_store_open_fn open = find_opener(u.scheme, openers, n);
	if (!open) {
		rc = drl_error_set(err, DRL_EINVAL,
				   "unknown store scheme \"%s\" (this build "
				   "knows: %s%s)",
				   u.scheme, drl__backend_schemes(),
				   n > 0 ? ", and the ones the application "
					   "registered"
					 : "");
		drl__uri_clear(&u);
		return rc;
	}
	/* The breaker's options are the core's: taken before the store
	 * checks that it knows every option it was given. A store over
	 * several independent servers (a memcached pool) has no store-wide
	 * breaker unless asked for: one dead server would otherwise shut
	 * out the keys of the live ones too. */
	bool explicit = drl_uri_option(&u, "breaker_failures") != NULL;
	rc = drl__breaker_options(breaker, &u, err);
	drl_backend *b = NULL;
	if (rc == 0) {
		rc = open(&b, &u, err);
		if (rc == 0 && b == NULL)
			rc = drl_error_set(err, DRL_EINVAL,
					   "the %s:// store's opener returned "
					   "no store",
					   u.scheme);
		else if (rc > 0)
			rc = DRL_EINVAL; /* an opener broke the contract */
	}
	if (rc == 0 && u.servers > 1 && !explicit)
		breaker->failures_max = 0;
	drl__uri_clear(&u);
	if (rc == 0)
		*out = b;
	return rc;
}

int drl_backend_open_with(drl_backend **out, const char *uri,
			  const drl_store_opener *openers, size_t n,
			  drl_error *err)
{
	if (out == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_backend_open_with: out is NULL");
	drl__breaker breaker;
	return open_backend(out, &breaker, uri, openers, n, err);
}

int drl_store_open_with(drl_store **out, const char *uri,
			const drl_store_opener *openers, size_t n,
			drl_error *err)
{
	if (out == NULL)
		return drl_error_set(err, DRL_EINVAL,
				     "drl_store_open: out is NULL");
	*out = NULL;
	drl__breaker breaker;
	drl_backend *b;
	int rc = open_backend(&b, &breaker, uri, openers, n, err);
	if (rc)
		return rc;
	rc = drl_store_from_backend(out, b, err);
	if (rc) {
		b->destroy(b);
		return rc;
	}
	drl__breaker_init(&(*out)->breaker, breaker.failures_max,
			  breaker.open_us, breaker.max_us);
	return 0;
}

/* every field of drl_store_stats is one of DRL__STATS_FIELDS */
#define ONE(field) +1
_Static_assert(sizeof(drl_store_stats) ==
		       (0 DRL__STATS_FIELDS(ONE)) * sizeof(uint64_t),
	       "DRL__STATS_FIELDS lists drl_store_stats");
#undef ONE

int drl_store_stats_get(const drl_store *store, drl_store_stats *out)
{
	if (store == NULL || out == NULL)
		return DRL_EINVAL;
	drl_store *s = (drl_store *)store; /* atomics: loads only */
#define LOAD(field)                                                            \
	out->field =                                                           \
		atomic_load_explicit(&s->stats.field, memory_order_relaxed);
	DRL__STATS_FIELDS(LOAD)
#undef LOAD
	return 0;
}

void drl_store_free(drl_store *store)
{
	if (!store)
		return;
	drl__aio_store_gone(store);
	store->backend->destroy(store->backend);
	free(store);
}
