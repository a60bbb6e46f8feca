/* drld's listening addresses: see listen_addr.h. */
#include "listen_addr.h"

#include "common/args.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

bool drld_is_unix_listen(const char *s)
{
	if (strncmp(s, "unix:", 5) != 0)
		return false;
	size_t n = strlen(s + 5);
	return s[5] == '/' && n <= DRLD_UNIX_PATH_MAX;
}

bool drld_parse_listen(const char *s, struct sockaddr_storage *ss)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *h = s;
	size_t hlen;
	int64_t port;

	memset(ss, 0, sizeof *ss);
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL || close[1] != ':')
			return false;
		h = s + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return false;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= sizeof host ||
	    !tl_parse_uint(colon + 1, 0, 65535, &port))
		return false;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (s[0] != '[' && inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		return true;
	}
	if (s[0] == '[' && inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		return true;
	}
	return false;
}
