/*
 * sim_run - `paycb-sim run`: one scenario from orders to the checked outcome.
 *
 * 1. Load the configuration and the merchants' private keys; plan the scenario.
 * 2. Create the orders as the merchant's order service would (and, with --api, register
 *    the payments in the channel API's ledger).
 * 3. Sign every notification (in parallel, before the clock starts, so signing does not
 *    compete with ingest for the CPU while latencies are measured).
 * 4. Deliver: the engine pushes every chain until acknowledged, the poller times ack -> PAID,
 *    and a progress line is printed every second.
 * 5. Settle: check the database every half second until every case is as expected or
 *    --wait runs out, then print the report and every mismatch (with --api, the channel's
 *    ledger judges the reconciler's refunds). Exit 0 only when all held.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "sim.h"

#define SIM_CHECK_EVERY_MS 500

struct signer {
	struct sim_plan *p;
	const struct sim_merchant *m;
	int from, step, failed;
};

static void *
sign_some(void *arg)
{
	struct signer *s = arg;
	time_t now = time(NULL);

	for (int i = s->from; i < s->p->nnotes; i += s->step)
		if (sim_note_sign(&s->m[s->p->notes[i].merchant], &s->p->notes[i], now) != 0)
			s->failed++;
	return NULL;
}

/* presign - signs every notification on every CPU; returns the number that failed. */
static int
presign(struct sim_plan *p, const struct sim_merchant *m)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	int threads = n > 0 && n < 64 ? (int)n : 2, failed = 0;
	struct signer s[64];
	pthread_t t[64];
	int started[64];

	for (int i = 0; i < threads; i++) {
		s[i] = (struct signer){p, m, i, threads, 0};
		started[i] = pthread_create(&t[i], NULL, sign_some, &s[i]) == 0;
		if (!started[i])
			sign_some(&s[i]);
	}
	for (int i = 0; i < threads; i++) {
		if (started[i])
			pthread_join(t[i], NULL);
		failed += s[i].failed;
	}
	return failed;
}

/* ladder_budget_s - how long the retry ladder takes to make a row dead, roughly: every
 * step's delay plus a sweep per step, plus slack for processing. */
static long long
ladder_budget_s(const struct conf *cf)
{
	long long s = 5;

	for (int i = 0; i < cf->retry.ladder_s.n; i++)
		s += cf->retry.ladder_s.v[i] + cf->retrier.sweep_interval_s;
	return s + 2 * cf->retrier.sweep_interval_s;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void
progress(const struct sim_stats *st, long long t0, int pending)
{
	fprintf(stderr,
	        "[%4llds] sent %lld  acked %lld  lost-acks %lld  failed %lld  no-answer %lld  "
	        "chains-open %d  paid %d/%d\n",
	        (clock_mono_us() - t0) / 1000000, (long long)st->sent, (long long)st->ok,
	        (long long)st->lost, (long long)st->failed, (long long)st->errors, pending,
	        (int)st->paid_seen, st->paid_expected);
}

/* expected - what the plan says the outcome table must show. */
struct expected {
	long long paid, closed, refunded, refunding, pending, rr, rr_done, dead, rows, copies;
	long long unroutable, dropped, api_refunds;
};

static void
expect(const struct sim_plan *p, int ladder_fits, int full, struct expected *x)
{
	memset(x, 0, sizeof(*x));
	x->copies = p->ndels;
	for (int i = 0; i < p->ncases; i++) {
		const struct sim_case *c = &p->cases[i];
		const char *st = sim_case_status(c, full);
		enum sim_kind k = c->kind;
		int pay_rows, ref_rows;

		sim_case_rows(c, &pay_rows, &ref_rows);
		x->rows += pay_rows + ref_rows;
		x->unroutable += sim_case_unroutable(c) != NULL;
		if (k != K_NO_ORDER) {
			x->paid += strcmp(st, "PAID") == 0;
			x->closed += strcmp(st, "CLOSED") == 0;
			x->refunded += strcmp(st, "REFUNDED") == 0;
			x->refunding += strcmp(st, "REFUNDING") == 0;
			x->pending += strcmp(st, "PENDING") == 0;
		}
		if (!full)
			continue;
		x->rr += k == K_AFTER_CLOSE || k == K_PAID_TWICE || k == K_TWICE_REFUND ||
		         k == K_CLOSE_REFUND || k == K_CLOSED_OTHER;
		x->rr_done += k == K_TWICE_REFUND || k == K_CLOSE_REFUND || c->api_refund;
		x->dropped += c->dropped;
		x->api_refunds += c->api_refund;
		x->dead += k == K_MISMATCH || (k == K_NO_ORDER && ladder_fits);
	}
}

static void
row(const char *name, long long found, long long want, const char *note)
{
	if (want < 0)
		printf("  %-38s %10lld %10s  %s\n", name, found, "-", note ? note : "");
	else
		printf("  %-38s %10lld %10lld  %s\n", name, found, want,
		       note            ? note
		       : found == want ? ""
		                       : "<-");
}

static void
lat_line(const char *name, struct sim_lat *l)
{
	char a[32], b[32], c[32], d[32];

	printf("  %-22s %10s %10s %10s %10s %8zu\n", name, sim_fmt_us(sim_lat_pct(l, 500), a, 32),
	       sim_fmt_us(sim_lat_pct(l, 990), b, 32), sim_fmt_us(sim_lat_pct(l, 999), c, 32),
	       sim_fmt_us(sim_lat_pct(l, 1000), d, 32), l->n);
}

/* report_answers - the answers by channel and status, the pushes and the throughput. */
static void
report_answers(const struct sim_stats *st, long long rate, long long dur)
{
	printf("\nanswers by channel and HTTP status:\n");
	for (int ch = 0; ch < SIM_NCH; ch++) {
		int any = 0;

		for (int s = 0; s < SIM_STATUS_MAX; s++) {
			long long v = st->status[ch][s];

			if (v == 0)
				continue;
			if (!any)
				printf("  %-7s", sim_ch_name((enum sim_ch)ch));
			if (s == 0)
				printf(" no-answer=%lld", v);
			else
				printf(" %d=%lld", s, v);
			any = 1;
		}
		if (any)
			printf("\n");
	}
	printf("  pushes %lld: acknowledged %lld, acknowledgements dropped (lost) %lld, "
	       "failure answers %lld, no answer %lld, chains given up %lld, abandoned %lld\n",
	       (long long)st->sent, (long long)st->ok, (long long)st->lost, (long long)st->failed,
	       (long long)st->errors, (long long)st->gave_up, (long long)st->abandoned);
	printf("  throughput %lld acknowledged/s over %lld.%03lld s\n", rate, dur / 1000000,
	       dur % 1000000 / 1000);
}

/* report_outcome - the outcome table: what the database holds against the plan. */
static void
report_outcome(const struct sim_opts *o, long long ok, const struct sim_outcome *r,
               const struct expected *x, int ladder_fits, long long ladder_s)
{
	printf("\noutcome in the database                   found   expected\n");
	if (!o->ingest_only)
		row("orders PAID", r->paid, x->paid, NULL);
	row("orders CLOSED", r->closed, x->closed, NULL);
	if (!o->ingest_only) {
		row("orders REFUNDED", r->refunded, x->refunded, NULL);
		row("orders REFUNDING (refunded in part)", r->refunding, x->refunding, NULL);
	}
	row("orders still PENDING", r->pending_orders, x->pending, NULL);
	row("callback rows (one per notification)", r->pay_rows + r->refund_rows, x->rows, NULL);
	row("copies pushed (deliveries)", x->copies, -1, NULL);
	row("duplicates absorbed (ok answers - rows)", ok - r->pay_rows - r->refund_rows, -1, NULL);
	if (!o->ingest_only) {
		row("order_events", r->events, -1, "2 per paid order");
		row("refund_requests", r->refund_requests, x->rr, NULL);
		row("  of them DONE (their refund came)", r->rr_done, x->rr_done, NULL);
		row("  REQUESTED though refunded", r->rr_stale, 0, NULL);
		row("orders: refund events != refunded", r->refund_sums_off, 0, NULL);
		row("dead letters (dead rows, DLQ sent)", r->dlq_sent, x->dead, NULL);
		row("no-order rows pending retry", r->no_order_pending, ladder_fits ? 0 : -1,
		    ladder_fits ? NULL : "the ladder outlasts --wait");
	}
	if (x->unroutable > 0)
		row("unroutable notifications kept", r->unroutable, x->unroutable, NULL);
	if (o->api != NULL && !o->ingest_only) {
		row("dropped notifications found by query", r->dropped_recovered, x->dropped, NULL);
		row("payments recovered by query (all)", r->recovered, -1,
		    "dropped ones, and late ones the query found first");
		row("refunds the reconciler made, DONE", r->api_refunds_done, x->api_refunds, NULL);
		row("refunds in the channel's ledger", r->ledger_refunds, -1,
		    "1 per refund request at the most");
		row("payments the channel refunded twice", r->ledger_twice, 0, NULL);
	}
	printf("  (retry ladder ends after about %lld s: no-order rows %s)\n", ladder_s,
	       ladder_fits ? "must be dead within the wait" : "may still be pending retry");
}

/* report_kv - the key=value lines of --report, for tools/bench.sh. */
static void
report_kv(const char *kv, struct sim_stats *st, const struct sim_outcome *r, long long rate,
          long long elapsed_us)
{
	sim_report_kv(kv, NULL, "sent", st->sent);
	sim_report_kv(kv, NULL, "ok", st->ok);
	sim_report_kv(kv, NULL, "lost", st->lost);
	sim_report_kv(kv, NULL, "failed", st->failed);
	sim_report_kv(kv, NULL, "no_answer", st->errors);
	sim_report_kv(kv, NULL, "ack_rate", rate);
	for (int ch = 0; ch < SIM_NCH; ch++) {
		long long v = 0;

		for (int s = 0; s < SIM_STATUS_MAX; s++)
			v += st->status[ch][s];
		sim_report_kv(kv, "sent_", sim_ch_name((enum sim_ch)ch), v);
	}
	sim_report_kv(kv, NULL, "ack_p50_us", sim_lat_pct(&st->ack, 500));
	sim_report_kv(kv, NULL, "ack_p99_us", sim_lat_pct(&st->ack, 990));
	sim_report_kv(kv, NULL, "ack_p999_us", sim_lat_pct(&st->ack, 999));
	sim_report_kv(kv, NULL, "ack_max_us", sim_lat_pct(&st->ack, 1000));
	sim_report_kv(kv, NULL, "e2e_p50_us", sim_lat_pct(&st->e2e, 500));
	sim_report_kv(kv, NULL, "e2e_p99_us", sim_lat_pct(&st->e2e, 990));
	sim_report_kv(kv, NULL, "e2e_p999_us", sim_lat_pct(&st->e2e, 999));
	sim_report_kv(kv, NULL, "e2e_samples", (long long)st->e2e.n);
	sim_report_kv(kv, NULL, "mismatches", r->mismatches);
	sim_report_kv(kv, NULL, "recovered_by_query", r->recovered);
	sim_report_kv(kv, NULL, "reconciler_refunds_done", r->api_refunds_done);
	sim_report_kv(kv, NULL, "ledger_refunds", r->ledger_refunds);
	sim_report_kv(kv, NULL, "ledger_refunded_twice", r->ledger_twice);
	sim_report_kv(kv, NULL, "elapsed_us", elapsed_us);
	/* The simulator's own CPU time, for the bench's table per component: all of it (the
	 * orders, the signing and the checks included), and the delivery's alone, from the
	 * first push until every chain was answered, which is the load generator's cost. */
	sim_report_kv(kv, NULL, "cpu_ms", sim_cpu_ms());
	sim_report_kv(kv, NULL, "deliver_cpu_ms", st->deliver_cpu_ms);
}

static void
report(const struct sim_opts *o, const struct sim_plan *p, struct sim_stats *st,
       const struct sim_outcome *r, const struct expected *x, int ladder_fits, long long ladder_s,
       long long elapsed_us)
{
	long long dur = st->last_ok_us - st->first_send_us, ok = st->ok;
	long long rate = dur > 0 ? ok * 1000000 / dur : 0;

	report_answers(st, rate, dur);
	printf("\nlatency                       p50        p99      p99.9        max  samples\n");
	lat_line("acknowledgement", &st->ack);
	if (!o->ingest_only)
		lat_line("ack -> order PAID", &st->e2e);
	report_outcome(o, ok, r, x, ladder_fits, ladder_s);
	printf("\ncases by kind                 cases  as expected  expected outcome\n");
	for (int k = 0; k < K_NKINDS; k++)
		if (r->kind_cases[k] > 0)
			printf("  %-24s %8lld %12lld  %s\n", sim_kind_name((enum sim_kind)k),
			       r->kind_cases[k], r->kind_ok[k],
			       o->ingest_only ? "ingest only: one row per notification"
			                      : sim_kind_expect((enum sim_kind)k));
	printf("\nresult: %s: %lld of %d cases as expected in %lld.%lld s\n",
	       r->mismatches == 0 ? "OK" : "MISMATCH", r->cases_ok, p->ncases, elapsed_us / 1000000,
	       elapsed_us % 1000000 / 100000);
	report_kv(o->report, st, r, rate, elapsed_us);
}

/* ingest_listening - whether something accepts connections on the ingest port. */
static int
ingest_listening(const char *addr, int port)
{
	struct sim_conn c;
	int rc;

	sim_conn_init(&c, addr, port);
	rc = sim_conn_open(&c, 2000);
	sim_conn_close(&c);
	free(c.buf);
	return rc == 0;
}

/* One run's state, from the configuration to the outcome. */
struct run {
	struct sim_opts *o;
	struct conf cf;
	struct sim_merchant *m;
	int nm;
	struct sim_plan plan;
	struct sim_stats st;
	struct sim_outcome res;
	struct db db;
	int db_up;
	struct sim_engine *eng;
	struct sim_poller *pl;
	char keys[SIM_PATH];
	long long ladder_s, t0, deadline;
	int ladder_fits, checked;
};

/* run_load - the configuration, the private keys and the plan; 0 or an exit code. */
static int
run_load(struct run *r)
{
	struct sim_opts *o = r->o;
	struct rlimit rl;
	char err[2048] = "", tmp[SIM_PATH];

	if (conf_bootstrap(o->conf, PROG_SIM, &r->cf, "paycb-sim") != 0)
		return EXIT_CONFIG;
	/* Storms hold a connection per copy. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	snprintf(tmp, sizeof(tmp), "%s", o->conf);
	snprintf(r->keys, sizeof(r->keys), "%s/keys", dirname(tmp));
	if (o->keys_dir == NULL)
		o->keys_dir = r->keys;
	if (sim_merchants_load(&r->cf, o->keys_dir, &r->m, &r->nm, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim: keys in %s: %s\n", o->keys_dir, err);
		return EXIT_CONFIG;
	}
	if (sim_plan_build(&r->plan, r->m, r->nm, o, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim: %s\n", err);
		return EXIT_USAGE;
	}
	r->ladder_s = ladder_budget_s(&r->cf);
	r->ladder_fits = r->ladder_s <= o->wait_s;
	printf("paycb-sim run %s: scenario %s, %d orders, %d notifications, %d deliveries, "
	       "%d merchants, seed %llu, concurrency %d, channel time compressed %lldx\n",
	       r->plan.run, o->scenario, r->plan.ncases, r->plan.nnotes, r->plan.ndels, r->nm,
	       (unsigned long long)o->seed, o->concurrency, o->compress);
	fflush(stdout);
	return 0;
}

/* run_prepare - ingest and the database answer; the orders exist, the notifications are
 * signed and the poller runs. 0 or an exit code. */
static int
run_prepare(struct run *r)
{
	char err[2048] = "";
	long long t0;

	if (!ingest_listening(r->cf.ingest.listen_addr, (int)r->cf.ingest.listen_port)) {
		fprintf(stderr,
		        "paycb-sim: nothing listens on %s:%lld (is paycb-ingest running?)\n",
		        r->cf.ingest.listen_addr, r->cf.ingest.listen_port);
		return EXIT_UNAVAILABLE;
	}
	if (db_open(&r->db, &r->cf.db) != DB_OK) {
		fprintf(stderr, "paycb-sim: database: %s\n", r->db.last_error);
		return EXIT_UNAVAILABLE;
	}
	r->db_up = 1;
	t0 = clock_mono_us();
	if (sim_orders_create(&r->db, &r->plan, r->m, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim: %s\n", err);
		return EXIT_UNAVAILABLE;
	}
	fprintf(stderr, "paycb-sim: %d orders created in %lld ms\n", r->plan.ncases,
	        (clock_mono_us() - t0) / 1000);
	if (r->o->api != NULL && sim_ledger_register(r->o, &r->plan, r->m, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim: %s\n", err);
		return EXIT_UNAVAILABLE;
	}
	t0 = clock_mono_us();
	if (presign(&r->plan, r->m) != 0) {
		fprintf(stderr, "paycb-sim: signing failed\n");
		return EXIT_SOFTWARE;
	}
	fprintf(stderr, "paycb-sim: %d notifications signed in %lld ms\n", r->plan.nnotes,
	        (clock_mono_us() - t0) / 1000);
	if (!r->o->ingest_only &&
	    sim_poller_start(&r->pl, &r->cf.db, &r->plan, &r->st, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim: %s\n", err);
		return EXIT_UNAVAILABLE;
	}
	return 0;
}

/* run_deliver - the engine pushes every chain until done or --wait runs out. */
static int
run_deliver(struct run *r)
{
	char err[2048] = "";
	long long cpu0 = sim_cpu_ms();

	r->t0 = clock_mono_us();
	r->deadline = r->t0 + (long long)r->o->wait_s * 1000000;
	if (sim_engine_start(&r->eng, &r->plan, r->m, r->o, r->cf.ingest.listen_addr,
	                     (int)r->cf.ingest.listen_port, &r->st, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim: %s\n", err);
		return EXIT_SOFTWARE;
	}
	/* Deliveries first, then the database settles; both within --wait. */
	for (long long next = r->t0 + 1000000;
	     sim_engine_pending(r->eng) > 0 && clock_mono_us() < r->deadline;) {
		sleep_ms(50);
		if (r->o->progress && clock_mono_us() >= next) {
			progress(&r->st, r->t0, sim_engine_pending(r->eng));
			next += 1000000;
		}
	}
	r->st.deliver_cpu_ms = sim_cpu_ms() - cpu0;
	return 0;
}

/* run_settle - checks the database every half second until all is as expected or the
 * deadline. 0 or an exit code. */
static int
run_settle(struct run *r)
{
	for (long long next = 0, printed = -1;;) {
		long long now = clock_mono_us();

		if (now >= next) {
			if (sim_check(&r->db, &r->plan, r->m, r->nm, r->o, r->ladder_fits, &r->res,
			              NULL) != 0) {
				fprintf(stderr, "paycb-sim: checking: %s\n", r->db.last_error);
				return EXIT_UNAVAILABLE;
			}
			r->checked = 1;
			if (r->res.mismatches == 0 || now >= r->deadline)
				return 0;
			if (r->o->progress && (now - r->t0) / 1000000 != printed) {
				printed = (now - r->t0) / 1000000;
				fprintf(stderr,
				        "[%4llds] settling: %lld of %d cases as expected, %lld "
				        "rows pending\n",
				        (now - r->t0) / 1000000, r->res.cases_ok, r->plan.ncases,
				        r->res.rows_pending);
			}
			next = now + SIM_CHECK_EVERY_MS * 1000;
		}
		sleep_ms(50);
	}
}

/* run_finish - stops the engine, prints every mismatch and the report; the exit code. */
static int
run_finish(struct run *r)
{
	struct expected x;

	if (r->o->progress)
		progress(&r->st, r->t0, sim_engine_pending(r->eng));
	sim_poller_stop(r->pl);
	r->pl = NULL;
	sim_engine_stop(r->eng);
	r->eng = NULL;
	/* The final check prints every mismatch. */
	if (r->res.mismatches > 0)
		sim_check(&r->db, &r->plan, r->m, r->nm, r->o, r->ladder_fits, &r->res, stdout);
	/* The channel's side of the refunds, once the database settled. */
	if (sim_ledger_check(r->o, &r->plan, r->m, &r->res, stdout) != 0)
		r->res.mismatches++;
	if (r->st.gave_up > 0 || r->st.abandoned > 0) {
		printf("mismatch: %lld delivery chains were never acknowledged (%lld given up by "
		       "the channel's schedule, %lld still open at the end of --wait)\n",
		       (long long)(r->st.gave_up + r->st.abandoned), (long long)r->st.gave_up,
		       (long long)r->st.abandoned);
		r->res.mismatches++;
	}
	expect(&r->plan, r->ladder_fits, !r->o->ingest_only, &x);
	report(r->o, &r->plan, &r->st, &r->res, &x, r->ladder_fits, r->ladder_s,
	       clock_mono_us() - r->t0);
	return r->checked && r->res.mismatches == 0 ? 0 : SIM_EXIT_MISMATCH;
}

int
sim_run(struct sim_opts *o)
{
	struct run *r = calloc(1, sizeof(*r));
	int rc = EXIT_SOFTWARE;

	if (r == NULL)
		return EXIT_SOFTWARE;
	r->o = o;
	sim_stats_init(&r->st);
	if ((rc = run_load(r)) == 0 && (rc = run_prepare(r)) == 0 && (rc = run_deliver(r)) == 0 &&
	    (rc = run_settle(r)) == 0)
		rc = run_finish(r);
	sim_poller_stop(r->pl);
	sim_engine_stop(r->eng);
	if (r->db_up)
		db_close(&r->db);
	sim_plan_free(&r->plan);
	sim_merchants_free(r->m, r->nm);
	sim_stats_free(&r->st);
	conf_free(&r->cf);
	fflush(stdout);
	free(r);
	return rc;
}
