/*
 * migrate_topics - creates the Kafka topics listed in schemas/topics.tsv (see migrate.h).
 *
 * "callbacks.retry.<delay>" expands to one topic per step of the configured ladder, so a
 * compressed test ladder gets its own delay topics. The partitions column is a number, "="
 * for kafka.partitions or "retry" for kafka.retry_partitions: the delay topics have their
 * own, smaller count, because every fetch of a processor names each partition it owns and
 * the broker's work per payment grows with them (docs/performance.md). A topic that exists
 * with fewer partitions than configured is grown (kq_admin.c); how to do that safely while
 * running is in docs/operations.md. One that has more keeps them (Kafka cannot take
 * partitions away) and is logged with the count asked for.
 */
#include "migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kq.h"
#include "ladder.h"
#include "log.h"

#define MAX_TOPICS 64

/* migrate_partitions - a topics.tsv partitions column as a count; 0 when it is none. */
static int
migrate_partitions(const struct conf *cf, const char *col)
{
	if (strcmp(col, "=") == 0)
		return (int)cf->kafka.partitions;
	if (strcmp(col, "retry") == 0)
		return (int)cf->kafka.retry_partitions;
	return atoi(col);
}

int
migrate_topics(const struct conf *cf, const char *dir, struct migrate_result *res, char *err,
               size_t errlen)
{
	char path[1024], line[512], *names[MAX_TOPICS];
	const char *cnames[MAX_TOPICS];
	int parts[MAX_TOPICS], had[MAX_TOPICS], n = 0, rc = -1, lineno = 0;
	long long ret[MAX_TOPICS];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/topics.tsv", dir);
	if ((fp = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "cannot open %s", path);
		return -1;
	}
	while (fgets(line, sizeof(line), fp)) {
		char *suffix, *p, *r, *save = NULL;

		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		suffix = strtok_r(line, "\t\n", &save);
		p = strtok_r(NULL, "\t\n", &save);
		r = strtok_r(NULL, "\t\n", &save);
		if (!suffix || !p || !r) {
			snprintf(err, errlen, "%s:%d: expected suffix, partitions, retention_ms",
			         path, lineno);
			goto done;
		}
		int steps = strstr(suffix, "<delay>") ? ladder_steps(&cf->retry) : 1;
		for (int k = 1; k <= steps && n < MAX_TOPICS; k++) {
			char name[256];

			if (strstr(suffix, "<delay>"))
				ladder_topic(cf, k, name, sizeof(name));
			else
				conf_topic(cf, suffix, name, sizeof(name));
			/* Steps with equal delays share one delay topic. */
			int seen = 0;
			for (int j = 0; j < n; j++)
				seen |= strcmp(names[j], name) == 0;
			if (seen)
				continue;
			names[n] = strdup(name);
			cnames[n] = names[n];
			parts[n] = migrate_partitions(cf, p);
			if (parts[n] <= 0) {
				snprintf(err, errlen, "%s:%d: bad partitions \"%s\"", path, lineno,
				         p);
				goto done;
			}
			ret[n] = atoll(r);
			n++;
		}
	}
	if (kq_create_topics(&cf->kafka, cnames, parts, ret, n, 30000, had, err, errlen) != 0)
		goto done;
	for (int i = 0; i < n; i++) {
		if (had[i] > 0 && had[i] < parts[i])
			log_info(NULL, "event=topic_grown topic=%s partitions=%d from=%d", names[i],
			         parts[i], had[i]);
		else if (had[i] > parts[i])
			log_info(NULL, "event=topic_ensured topic=%s partitions=%d asked=%d",
			         names[i], had[i], parts[i]);
		else
			log_info(NULL, "event=topic_ensured topic=%s partitions=%d", names[i],
			         parts[i]);
	}
	res->topics = n;
	rc = 0;
done:
	for (int i = 0; i < n; i++)
		free(names[i]);
	fclose(fp);
	return rc;
}
