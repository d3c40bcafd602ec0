/*
 * simapi - tests' side of `paycb-sim api` (simapi.h). Every call is one request on its own
 * connection (httpc), so a test can use it from any point without state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "httpc.h"
#include "sim.h"
#include "simapi.h"

int
simapi_get(int port, const char *path, json_t **out)
{
	struct httpc_resp *r = malloc(sizeof(*r));
	int rc = -1;

	*out = NULL;
	if (r != NULL && httpc_request(port, "GET", path, NULL, NULL, 0, 5000, r) == 0 &&
	    r->status == 200 && (*out = json_loadb(r->body, r->body_len, 0, NULL)) != NULL)
		rc = 0;
	free(r);
	return rc;
}

int
simapi_post(int port, const char *path, const char *form)
{
	struct httpc_resp *r = malloc(sizeof(*r));
	int rc = -1;

	if (r != NULL &&
	    httpc_request(port, "POST", path, "Content-Type: application/x-www-form-urlencoded\r\n",
	                  form, strlen(form), 5000, r) == 0 &&
	    r->status == 200)
		rc = 0;
	free(r);
	return rc;
}

struct up {
	int port;
};

static int
answers(void *arg)
{
	const struct up *u = arg;
	json_t *j;

	if (simapi_get(u->port, "/_sim/stats", &j) != 0)
		return 0;
	json_decref(j);
	return 1;
}

int
simapi_start(const char *conf, const char *keys, int port, const char *log)
{
	struct up u = {port};
	char p[16], confbuf[1024], keysbuf[1024];
	pid_t pid;

	snprintf(p, sizeof(p), "%d", port);
	/* execv takes its arguments as char *: writable copies keep the caller's strings const. */
	snprintf(confbuf, sizeof(confbuf), "%s", conf);
	snprintf(keysbuf, sizeof(keysbuf), "%s", keys);
	fflush(stdout);
	if ((pid = fork()) == 0) {
		char *argv[] = {"bin/paycb-sim", "api",    "-c", confbuf, "--keys",
		                keysbuf,         "--port", p,    NULL};
		FILE *fp = freopen(log, "a", stdout);

		if (fp == NULL || dup2(fileno(stdout), 2) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || harness_wait_until(answers, &u, 20000) != 0)
		return -1;
	return (int)pid;
}

int
simapi_order_at(int port, const char *channel, const char *merchant, const char *order,
                long long minor, const char *currency, const char *state, const char *txn)
{
	char form[512];

	snprintf(form, sizeof(form),
	         "merchant=%s&channel=%s&out_trade_no=%s&amount=%lld&currency=%s&state=%s%s%s",
	         merchant, channel, order, minor, currency, state, txn ? "&transaction_id=" : "",
	         txn ? txn : "");
	return simapi_post(port, "/_sim/order", form);
}

int
simapi_order(int port, const char *merchant, const char *order, long long minor,
             const char *currency, const char *state, const char *txn)
{
	return simapi_order_at(port, "wxpay", merchant, order, minor, currency, state, txn);
}

int
simapi_ledger(int port, const char *channel, const char *merchant, const char *order,
              long long *refunded, long long *nrefunds, long long *posts)
{
	char path[400];
	json_t *j;

	snprintf(path, sizeof(path), "/_sim/ledger?merchant=%s&out_trade_no=%s&channel=%s",
	         merchant, order, channel);
	if (simapi_get(port, path, &j) != 0)
		return -1;
	*refunded = json_integer_value(json_object_get(j, "refunded"));
	*nrefunds = (long long)json_array_size(json_object_get(j, "refunds"));
	*posts = json_integer_value(json_object_get(j, "refund_posts"));
	json_decref(j);
	return 0;
}

long long
simapi_stat(int port, const char *key)
{
	json_t *j;
	long long v;

	if (simapi_get(port, "/_sim/stats", &j) != 0)
		return -1;
	v = json_integer_value(json_object_get(j, key));
	json_decref(j);
	return v;
}

int
simapi_conf(const char *base, const char *keys_dir, const char *merchant, int port,
            char *const *sets, int nsets, const char *out, char *err, size_t errlen)
{
	struct sim_mfiles mf;
	char url[64];

	if (sim_keys_make(keys_dir, merchant, 0, &mf, err, errlen) != 0)
		return -1;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	sim_mfiles_api(&mf, url);
	return sim_conf_write(base, out, &mf, 1, sets, nsets, err, errlen);
}
