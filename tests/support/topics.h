/*
 * topics - deletes test topics from the broker (its auto-create is off, so a deleted topic
 * stays missing until it is created again).
 */
#ifndef PAYCB_TOPICS_H
#define PAYCB_TOPICS_H

#include "conf.h"

/* Deletes the n named topics; 0, or -1 (the reason printed as a TAP diagnostic). */
int topics_delete(const struct conf_kafka *cf, const char *const *names, int n, int timeout_ms);
/* Deletes every topic named "<cf->topic_prefix>.*"; 0 or -1. */
int topics_drop_prefix(const struct conf_kafka *cf, int timeout_ms);

#endif
