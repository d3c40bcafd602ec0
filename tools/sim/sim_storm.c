/*
 * sim_storm - sends a storm's copies from one thread: every copy has its own connection,
 * opened beforehand, and all are written at their instant and read back through one epoll
 * set.
 *
 * A thread per copy would put 1,000 of the simulator's threads on the run queue at the same
 * moment as ingest's, and on a box where both share the cores the measured answer time would
 * then include the simulator's own scheduling: a copy's answer is only read once its thread
 * gets a core. The channels' senders are not on paycb's cores in production, so the storm
 * keeps its side to one thread that writes every copy in a few milliseconds and takes each
 * answer's time the moment its last byte is read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "sim.h"

/* How often copies that were sent are checked against their timeout. */
#define STORM_SCAN_US 10000

/* Orders copy indexes by instant (qsort_r's argument is the copies). */
static int
by_instant(const void *a, const void *b, void *arg)
{
	const struct sim_storm_req *r = arg;
	long long x = r[*(const int *)a].at_us, y = r[*(const int *)b].at_us;

	return x < y ? -1 : x > y;
}

/* One copy ends: its answer (or status 0) goes to the caller, its connection is closed. */
static void
end_copy(int ep, struct sim_storm_req *r, int i, long long now, void (*done)(void *, int),
         void *arg)
{
	struct sim_storm_req *q = &r[i];

	q->done = 1;
	if (q->t_send > 0)
		q->a.us = now - q->t_send;
	if (q->c.fd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, q->c.fd, NULL);
		sim_conn_close(&q->c);
	}
	done(arg, i);
}

/* Writes what is left of a copy's request; 0 when all of it is out or the rest must wait. */
static int
send_rest(struct sim_storm_req *q)
{
	while (q->sent < (size_t)q->hlen + q->blen) {
		struct iovec iov[2];
		struct msghdr mh;
		int n = 0;
		ssize_t k;

		if (q->sent < (size_t)q->hlen)
			iov[n++] = (struct iovec){q->head + q->sent, (size_t)q->hlen - q->sent};
		{
			size_t off = q->sent > (size_t)q->hlen ? q->sent - (size_t)q->hlen : 0;
			iov[n++] = sim_iov_out((const char *)q->body + off, q->blen - off);
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)n;
		k = sendmsg(q->c.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		q->sent += (size_t)k;
	}
	return 0;
}

/* Reads what has arrived; 1 when the answer is whole (or failed), 0 to wait for more. */
static int
read_some(struct sim_storm_req *q)
{
	int keep;

	for (;;) {
		ssize_t k;
		int r;

		if (q->got >= q->c.cap - 1) {
			q->a.status = 0;
			return 1;
		}
		k = recv(q->c.fd, q->c.buf + q->got, q->c.cap - 1 - q->got, MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			q->a.status = 0;
			return 1;
		}
		if (k == 0) {
			if (q->got == 0 || sim_http_parse(q->c.buf, q->got, 1, &q->a, &keep) != 0)
				q->a.status = 0;
			return 1;
		}
		q->got += (size_t)k;
		if ((r = sim_http_parse(q->c.buf, q->got, 0, &q->a, &keep)) <= 0) {
			if (r < 0)
				q->a.status = 0;
			return 1;
		}
	}
}

void
sim_storm_open(struct sim_storm_req *r, int n, const char *addr, int port, int timeout_ms)
{
	/* A copy whose connection did not open is answered status 0 when its instant comes. */
	for (int i = 0; i < n; i++) {
		sim_conn_init(&r[i].c, addr, port);
		sim_conn_open(&r[i].c, timeout_ms);
	}
}

void
sim_storm_run(struct sim_storm_req *r, int n, int timeout_ms, void (*done)(void *, int), void *arg)
{
	struct epoll_event evs[256];
	int *idx = calloc((size_t)n + 1, sizeof(int));
	int ep = epoll_create1(EPOLL_CLOEXEC), next = 0, left = n;
	long long scan_at = 0, tmo = (long long)timeout_ms * 1000;

	if (idx == NULL || ep < 0) {
		/* Nothing can be sent: every copy is booked as unanswered. */
		for (int i = 0; i < n; i++)
			end_copy(-1, r, i, clock_mono_us(), done, arg);
		goto done;
	}
	for (int i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, (size_t)n, sizeof(int), by_instant, r);
	while (left > 0) {
		long long now = clock_mono_us();
		int wait_ms = STORM_SCAN_US / 1000, k;

		/* Every copy whose instant has come is written now, in instant order. */
		while (next < n && r[idx[next]].at_us <= now) {
			struct sim_storm_req *q = &r[idx[next]];
			struct epoll_event ev = {EPOLLIN | EPOLLOUT, {.u32 = (uint32_t)idx[next]}};

			next++;
			q->t_send = clock_mono_us();
			if (q->c.fd < 0 || send_rest(q) != 0 ||
			    epoll_ctl(ep, EPOLL_CTL_ADD, q->c.fd, &ev) != 0) {
				q->a.status = 0;
				end_copy(ep, r, (int)(q - r), clock_mono_us(), done, arg);
				left--;
			}
		}
		if (next < n) {
			long long until = r[idx[next]].at_us - clock_mono_us();
			if (until < STORM_SCAN_US)
				wait_ms = until > 0 ? (int)((until + 999) / 1000) : 0;
		}
		k = epoll_wait(ep, evs, (int)(sizeof(evs) / sizeof(evs[0])), wait_ms);
		for (int j = 0; j < k; j++) {
			struct sim_storm_req *q = &r[evs[j].data.u32];
			int finished = 0;

			if (q->done)
				continue;
			if (evs[j].events & EPOLLOUT) {
				if (send_rest(q) != 0) {
					q->a.status = 0;
					finished = 1;
				} else if (q->sent == (size_t)q->hlen + q->blen) {
					struct epoll_event ev = {EPOLLIN, {.u32 = evs[j].data.u32}};
					epoll_ctl(ep, EPOLL_CTL_MOD, q->c.fd, &ev);
				}
			}
			if (!finished && (evs[j].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
				finished = read_some(q);
			if (finished) {
				end_copy(ep, r, (int)evs[j].data.u32, clock_mono_us(), done, arg);
				left--;
			}
		}
		/* Copies sent longer ago than the timeout end unanswered, as a channel's would. */
		if ((now = clock_mono_us()) >= scan_at) {
			scan_at = now + STORM_SCAN_US;
			for (int j = 0; j < next; j++) {
				struct sim_storm_req *q = &r[idx[j]];

				if (!q->done && now - q->t_send > tmo) {
					q->a.status = 0;
					end_copy(ep, r, idx[j], now, done, arg);
					left--;
				}
			}
		}
	}
done:
	if (ep >= 0)
		close(ep);
	free(idx);
}
