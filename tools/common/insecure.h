/*
 * Saying out loud that a store URI turns certificate checks off
 * (tools/common/insecure.c), for the drl tools and drld.
 */
#ifndef TL_INSECURE_H
#define TL_INSECURE_H

/* When `uri` says tls_verify=no, a warning on stderr from `who` ("drl",
 * "drld"): the connection is encrypted but the server unverified. Says
 * nothing for any other URI, or one that does not parse (opening it
 * reports that). */
void tl_warn_insecure(const char *who, const char *uri);

#endif /* TL_INSECURE_H */
