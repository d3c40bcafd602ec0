/*
 * admin - /healthz, /readyz and /metrics on libmicrohttpd (see admin.h).
 */
#include "admin.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "cfg.h"
#include "log.h"
#include "metrics.h"

struct admin {
	struct MHD_Daemon *d;
	admin_ready_fn ready;
	void *arg;
	/* SHA-256 of the bearer token; compared in constant time, whatever the length sent. */
	unsigned char token[32];
	int has_token;
	char last_why[256]; /* the reason last logged, so a failing probe logs once per change */
};

/* admin_authorized - the request carries the bearer token, or none is required. */
static int
admin_authorized(const struct admin *a, struct MHD_Connection *c)
{
	static const char prefix[] = "Bearer ";
	const char *h;
	unsigned char got[32];

	if (!a->has_token)
		return 1;
	h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (h == NULL || strncmp(h, prefix, sizeof(prefix) - 1) != 0)
		return 0;
	h += sizeof(prefix) - 1;
	if (SHA256((const unsigned char *)h, strlen(h), got) == NULL)
		return 0;
	return CRYPTO_memcmp(got, a->token, sizeof(got)) == 0;
}

static enum MHD_Result
admin_reply(struct MHD_Connection *c, unsigned code, const char *type, void *body, size_t len,
            enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result rc;

	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result
admin_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
             const char *version, const char *upload, size_t *upload_len, void **con_cls)
{
	struct admin *a = cls;
	char why[256];

	(void)version;
	(void)upload;
	if (*con_cls == NULL) {
		/* The first call only announces the request; answer on the second. */
		*con_cls = a;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	if (!admin_authorized(a, c)) {
		struct MHD_Response *r =
		    MHD_create_response_from_buffer(13, "unauthorized\n", MHD_RESPMEM_PERSISTENT);
		enum MHD_Result rc;

		if (r == NULL)
			return MHD_NO;
		MHD_add_response_header(r, "Content-Type", "text/plain");
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
		rc = MHD_queue_response(c, 401, r);
		MHD_destroy_response(r);
		return rc;
	}
	if (strcmp(method, "GET") != 0)
		return admin_reply(c, 405, "text/plain", "method not allowed\n", 19,
		                   MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/healthz") == 0)
		return admin_reply(c, 200, "text/plain", "ok\n", 3, MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/readyz") == 0) {
		char safe[512];

		why[0] = '\0';
		if (a->ready == NULL || a->ready(a->arg, why, sizeof(why)) == 0) {
			if (a->last_why[0] != '\0')
				log_info(NULL, "event=ready");
			a->last_why[0] = '\0';
			return admin_reply(c, 200, "text/plain", "ready\n", 6,
			                   MHD_RESPMEM_PERSISTENT);
		}
		/* The reason (host names, server messages) is for the operator's log only. */
		if (strcmp(why, a->last_why) != 0) {
			log_warn(NULL, "event=not_ready detail=\"%s\"",
			         log_quoted(safe, sizeof(safe), why));
			snprintf(a->last_why, sizeof(a->last_why), "%s", why[0] ? why : "?");
		}
		return admin_reply(c, 503, "text/plain", "not ready\n", 10, MHD_RESPMEM_PERSISTENT);
	}
	if (strcmp(url, "/metrics") == 0) {
		char *text = NULL;
		size_t len = 0;
		if (metrics_render(&text, &len) != 0)
			return admin_reply(c, 500, "text/plain", "render failed\n", 14,
			                   MHD_RESPMEM_PERSISTENT);
		return admin_reply(c, 200, "text/plain; version=0.0.4", text, len,
		                   MHD_RESPMEM_MUST_FREE);
	}
	return admin_reply(c, 404, "text/plain", "not found\n", 10, MHD_RESPMEM_PERSISTENT);
}

int
admin_start(const char *addr, int port, admin_ready_fn ready, void *arg, const char *token_file,
            struct admin **out, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	struct admin *a;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)port);
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
		snprintf(err, errlen, "admin address '%s' is not an IPv4 address", addr);
		return -1;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	a->ready = ready;
	a->arg = arg;
	if (token_file != NULL && token_file[0] != '\0') {
		char *tok = NULL;
		size_t tlen = 0;

		if (cfg_read_secret(token_file, &tok, &tlen, err, errlen) != 0) {
			free(a);
			return -1;
		}
		SHA256((const unsigned char *)tok, tlen, a->token);
		a->has_token = 1;
		explicit_bzero(tok, tlen);
		free(tok);
	}
	a->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	                        admin_handle, a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
	                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
	                        MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_END);
	if (a->d == NULL) {
		snprintf(err, errlen, "cannot listen on %s:%d for the admin listener", addr, port);
		free(a);
		return -1;
	}
	*out = a;
	return 0;
}

void
admin_stop(struct admin *a)
{
	if (a == NULL)
		return;
	MHD_stop_daemon(a->d);
	free(a);
}
