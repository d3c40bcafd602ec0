# paycb - one GNU Makefile for every program, test and service command.
#
#   make                 build every program into bin/
#   make test            deps + build + services up + migrate + every test + services down
#   make run             the demo on local defaults (services stay up; `make stop` ends it)
#   make bench           the measurements; prints its figures
#   make deps            install what is missing (Debian packages, Kafka jars)
#   make services-up | services-down | services-clean
#   make SAN=1 ...       the sanitizer build (ASan + UBSan) that CI uses
#
# Each program directory holds main.c plus <prog>_<concern>.c modules. Every module except
# main.c is also archived into build/lib<dir>.a so tests link the very code the daemons run.

CC       ?= cc
PKGS     := rdkafka libconfig jansson libmicrohttpd openssl libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(shell mariadb_config --cflags 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(shell mariadb_config --libs 2>/dev/null)

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wpointer-arith \
	    -Wstrict-prototypes -Wmissing-prototypes -Wmissing-declarations -Wcast-qual -Wno-format-truncation \
	    -MMD -MP -Icommon $(PKG_CFLAGS)
LDLIBS   += $(PKG_LIBS) -lpthread -lm

ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
BUILD    := build/san
else
BUILD    := build/opt
endif

VERSION  := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
CFLAGS   += -DPAYCB_VERSION='"$(VERSION)"'

# Programs: directory -> binary name.
PROG_DIRS := ingest processor retrier reconciler tools/migrate tools/paycbctl tools/sim tools/bench
bin_name   = $(or $(PROGNAME_$(subst /,_,$(1))),paycb-$(notdir $(1)))
PROGNAME_tools_paycbctl := paycbctl
PROGNAME_tools_sim      := paycb-sim
# Archives a program links besides its own and libcommon. The channel library chan/
# (docs/channels.md): ingest verifies notifications with it, the simulator signs them with it,
# so they verify through the very code ingest runs, and the reconciler calls the channels.
# Every program reads the whole configuration, the channels' merchant settings too, which the
# channel library declares (chan/chan_conf.h): every program links it.
PROGLIBS_ingest          = $(LIB_CHAN)
PROGLIBS_tools_sim       = $(LIB_CHAN)
PROGLIBS_reconciler      = $(LIB_CHAN)
PROGLIBS_processor       = $(LIB_CHAN)
PROGLIBS_retrier         = $(LIB_CHAN)
PROGLIBS_tools_migrate   = $(LIB_CHAN)
PROGLIBS_tools_paycbctl  = $(LIB_CHAN)
# paycb-bench takes the latency percentiles and the report file from the simulator's archive
# (tools/sim/sim_lat.h), so both tools' figures come from one piece of code.
PROGLIBS_tools_bench     = $(BUILD)/libtools_sim.a $(LIB_CHAN)

objs_of    = $(patsubst %.c,$(BUILD)/%.o,$(wildcard $(1)/*.c))
libobjs_of = $(filter-out $(BUILD)/$(1)/main.o,$(call objs_of,$(1)))

COMMON_OBJS := $(call objs_of,common)
LIB_COMMON  := $(BUILD)/libcommon.a
# chan/ is a library without a program: the outbound channel clients (docs/channels.md).
# Its table of channels is found, not written: chan_notify_table_gen.c lists every
# chan/chan_notify_*.c that defines a `const struct chan_notify_ops notify_<x>_ops`.
CHAN_TABLE  := chan/chan_notify_table_gen.c
CHAN_OBJS   := $(call objs_of,chan) $(BUILD)/$(CHAN_TABLE:.c=.o)
LIB_CHAN    := $(BUILD)/libchan.a
PROG_DIRS_PRESENT := $(foreach d,$(PROG_DIRS),$(if $(wildcard $(d)/main.c),$(d)))
PROGS       := $(foreach d,$(PROG_DIRS_PRESENT),bin/$(call bin_name,$(d)))

UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
INTEG_SRCS  := $(wildcard tests/integ/test_*.c)
TEST_SUPPORT := $(wildcard tests/support/*.c)
TEST_BINS   := $(patsubst tests/%.c,bin/tests/%,$(UNIT_SRCS) $(INTEG_SRCS))

# Objects built through pattern chains are kept, so a rebuild compiles only what changed.
.SECONDARY:

.PHONY: fuzzers docs all test check check-links unit integ deps services-up services-down services-clean migrate \
	run stop bench chaos fuzz clean format install

all: $(PROGS) $(TEST_BINS)

ifeq ($(V),1)
Q :=
else
Q := @
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(LIB_COMMON): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(Q)$(AR) rcs $@ $^

$(LIB_CHAN): $(CHAN_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@; $(AR) rcs $@ $^

# The table of channels, generated in each build directory (opt, san, fuzz) from the channel
# files in name order. A linker set (a section per entry) would need --whole-archive on every
# link line, since nothing else pulls a channel's object out of libchan.a; a generated file
# keeps the archive ordinary. It depends on chan/ itself so that a removed channel file
# regenerates it too; an unchanged table is not rewritten, so nothing is rebuilt for it.
CHAN_NOTIFY_SRCS := $(sort $(wildcard chan/chan_notify_*.c))
build/%/$(CHAN_TABLE): $(CHAN_NOTIFY_SRCS) chan Makefile
	@mkdir -p $(dir $@)
	$(Q)ops=$$(sed -n 's/^const struct chan_notify_ops \(notify_[a-z0-9_]*_ops\) = {.*/\1/p' \
		$(CHAN_NOTIFY_SRCS)); n=$$(echo $$ops | wc -w); \
	{ echo '/* Generated by the Makefile from chan/chan_notify_*.c: every channel, in file name order. */'; \
	  echo '#include "chan_notify.h"'; \
	  for o in $$ops; do echo "extern const struct chan_notify_ops $$o;"; done; \
	  echo "_Static_assert($$n <= CHAN_NOTIFY_MAX, \"more channels than CHAN_NOTIFY_MAX\");"; \
	  echo 'const struct chan_notify_ops *const chan_notify_table[] = {'; \
	  for o in $$ops; do echo "    &$$o,"; done; \
	  echo '};'; echo "const int chan_notify_count = $$n;"; } >$@.new; \
	if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi
$(BUILD)/$(CHAN_TABLE:.c=.o): $(BUILD)/$(CHAN_TABLE)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -Ichan -c -o $@ $<

define prog_rules
$(BUILD)/lib$(subst /,_,$(1)).a: $(call libobjs_of,$(1))
	@mkdir -p $$(dir $$@)
	$(Q)rm -f $$@; $$(AR) rcs $$@ $$^ $(if $(call libobjs_of,$(1)),,$(BUILD)/empty.o)
bin/$(call bin_name,$(1)): $(BUILD)/$(1)/main.o $(BUILD)/lib$(subst /,_,$(1)).a $(PROGLIBS_$(subst /,_,$(1))) $(LIB_COMMON)
	@mkdir -p bin
	@$(if $(Q),echo "  LD      $$@")
	$(Q)$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach d,$(PROG_DIRS_PRESENT),$(eval $(call prog_rules,$(d))))

$(BUILD)/empty.o:
	@mkdir -p $(dir $@)
	echo 'int paycb_empty_archive;' | $(CC) -x c -c -o $@ -

# ---- what each test links ----------------------------------------------------------------
# A test links its own object and the archives its TEST_LIBS_ line below names, and nothing
# else: a line that leaves out something the test calls fails the link, and `make
# check-links` shows that every name on every line is needed (the link fails without it).
# The names are archive stems: the programs' (ingest, processor, ..., tools_sim), chan,
# common, and the three archives tests/support/ is split into by what its files stand on:
#   tsup       harness, topics, fixtures, testca: libcommon and the migrations (tools_migrate)
#   tsup_proc  inproc, orders: the processor's archive, driven in-process
#   tsup_sim   every other file: the simulator's archive (its configuration writer, HTTP
#              client and key tools) and chan/
# Being archives, they give a test only the members it calls and what those call.
TSUP_BASE := harness topics fixtures testca
TSUP_PROC := inproc orders
TSUP_SIM  := $(filter-out $(TSUP_BASE) $(TSUP_PROC),$(basename $(notdir $(TEST_SUPPORT))))
# Users before what they use (the linker reads an archive once), whatever order a line gives.
TEST_LINK_ORDER := tsup_proc tsup_sim tsup ingest processor retrier reconciler tools_paycbctl \
		   tools_bench tools_sim tools_migrate chan common

# One line per test, unit tests first, each group in name order. A new test adds its line:
# the names of what it calls (and what that calls), the link says when one is missing.
TEST_LIBS_test_cblog                 := common
TEST_LIBS_test_cfg                   := chan common
TEST_LIBS_test_chan_calls            := tsup_sim tools_sim chan common
TEST_LIBS_test_chan_vectors          := chan common
TEST_LIBS_test_channels_gen          := tsup_sim tools_sim chan common
TEST_LIBS_test_conf_bootstrap        := chan common
TEST_LIBS_test_crypto                := tsup_sim tools_sim chan common
TEST_LIBS_test_daemon_wait           := common
TEST_LIBS_test_decide                := processor
TEST_LIBS_test_harness               := tsup tools_migrate chan common
TEST_LIBS_test_money                 := common
TEST_LIBS_test_msg                   := common
TEST_LIBS_test_notify_table          := tsup_sim tools_sim chan common
TEST_LIBS_test_reload                := tsup_sim tools_sim chan common
TEST_LIBS_test_sim_http              := tools_sim common
TEST_LIBS_test_vectors_alipay        := tsup_sim chan common
TEST_LIBS_test_vectors_stripe        := tsup_sim chan common
TEST_LIBS_test_vectors_wxpay         := tsup_sim chan common

TEST_LIBS_test_chaos                 := tsup_sim tsup retrier tools_sim tools_migrate chan common
TEST_LIBS_test_db                    := tsup tools_migrate chan common
TEST_LIBS_test_event_order           := tsup_sim tsup retrier tools_sim tools_migrate chan common
TEST_LIBS_test_hostile               := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_hostile_forge         := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_hostile_slots         := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_ingest                := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_ingest_edges          := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_kafka                 := tsup tools_migrate chan common
TEST_LIBS_test_key_rotation          := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_kq_batch              := tsup retrier tools_migrate chan common
TEST_LIBS_test_kq_then               := tsup tools_migrate chan common
TEST_LIBS_test_kq_sleep              := tsup tools_migrate chan common
TEST_LIBS_test_ladder_topics         := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_lag                   := tsup_sim tsup retrier tools_sim tools_migrate chan common
TEST_LIBS_test_liveness              := tsup_sim tsup retrier tools_sim tools_migrate chan common
TEST_LIBS_test_liveness_daemons      := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_paycbctl              := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_processor             := tsup_proc tsup_sim tsup processor retrier tools_sim tools_migrate chan common
TEST_LIBS_test_processor_batch       := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_processor_concurrency := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_processor_crash       := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_processor_delay       := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_processor_edges       := tsup_proc tsup processor tools_migrate chan common
TEST_LIBS_test_processor_group       := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_processor_outage      := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_processor_refunds     := tsup_proc tsup processor tools_migrate chan common
TEST_LIBS_test_reconciler            := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_repartition           := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_retrier               := tsup retrier tools_migrate chan common
TEST_LIBS_test_retrier_daemon        := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_retrier_ladder        := tsup_sim tsup tools_sim tools_migrate chan common
TEST_LIBS_test_retrier_scale         := tsup retrier tools_migrate chan common
TEST_LIBS_test_scaleout              := tsup_sim tsup retrier tools_sim tools_migrate chan common

define tsup_rule
$(BUILD)/lib$(1).a: $(patsubst %,$(BUILD)/tests/support/%.o,$(2))
	@mkdir -p $$(dir $$@)
	$(Q)rm -f $$@; $$(AR) rcs $$@ $$^
endef
$(eval $(call tsup_rule,tsup,$(TSUP_BASE)))
$(eval $(call tsup_rule,tsup_proc,$(TSUP_PROC)))
$(eval $(call tsup_rule,tsup_sim,$(TSUP_SIM)))

# test_libs: the archive files of test $(1)'s line, in link order. test_line_ok stops make at
# once, rather than at a puzzling link error, when a test has no line or its line names
# something that is no archive.
test_unknown = $(filter-out $(TEST_LINK_ORDER),$(TEST_LIBS_$(1)))
test_line_ok = $(if $(filter undefined,$(origin TEST_LIBS_$(1))), \
	$(error tests/*/$(1).c has no TEST_LIBS_$(1) line in the Makefile))$(if \
	$(call test_unknown,$(1)),$(error TEST_LIBS_$(1): $(call test_unknown,$(1)) is no archive))
test_libs = $(call test_line_ok,$(1))$(foreach l,$(TEST_LINK_ORDER), \
	$(if $(filter $(l),$(TEST_LIBS_$(1))),$(BUILD)/lib$(l).a))
define test_rule
$(1): $(patsubst bin/tests/%,$(BUILD)/tests/%.o,$(1)) $(call test_libs,$(notdir $(1)))
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  LD      $$@")
	$$(Q)$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS) -lcmocka
endef
$(foreach t,$(TEST_BINS),$(eval $(call test_rule,$(t))))

# Relinks every test without each name of its line in turn (tools/check-links.sh); each
# link must fail. About a minute; not part of make test.
check-links: $(TEST_BINS)
	@{ $(foreach t,$(TEST_BINS),echo '$(t) $(patsubst bin/tests/%,$(BUILD)/tests/%.o,$(t)) \
	  $(call test_libs,$(notdir $(t)))';) } | tools/check-links.sh '$(CC) $(LDFLAGS)' '$(LDLIBS) -lcmocka'

$(BUILD)/tools/sim/%.o: CFLAGS += -Ichan
$(BUILD)/tools/bench/%.o: CFLAGS += -Itools/sim -Ichan
$(BUILD)/reconciler/%.o: CFLAGS += -Ichan
$(BUILD)/ingest/%.o: CFLAGS += -Ichan
$(BUILD)/processor/main.o $(BUILD)/retrier/main.o: CFLAGS += -Ichan
$(BUILD)/tools/migrate/%.o: CFLAGS += -Ichan
$(BUILD)/tools/paycbctl/%.o: CFLAGS += -Ichan
$(BUILD)/tests/%.o: CFLAGS += -Itests/support -Ichan -Iingest -Iprocessor -Iretrier -Ireconciler -Itools/sim -Itools/paycbctl -Itools/migrate

# ---- services and tests -----------------------------------------------------------------

deps:
	@deploy/local/deps.sh

services-up:
	@deploy/local/services.sh up

services-down:
	@deploy/local/services.sh down

services-clean:
	@deploy/local/services.sh clean

migrate: bin/paycb-migrate
	@deploy/local/services.sh config >/dev/null
	bin/paycb-migrate -c var/paycb.conf

# The test target installs, builds, starts the services, runs every test and stops the
# services again, whatever the outcome, and exits with the runner's status.
test check:
	@deploy/local/deps.sh
	@$(MAKE) --no-print-directory all
	@deploy/local/services.sh up
	@rc=0; tests/run.sh || rc=$$?; deploy/local/services.sh down; exit $$rc

# Quicker loops while developing, against services already up.
unit: all
	@tests/run.sh unit
integ: all
	@tests/run.sh integ

run: 
	@deploy/local/deps.sh
	@$(MAKE) --no-print-directory all
	@tools/demo.sh

stop:
	@tools/demo.sh stop

bench: all
	@deploy/local/deps.sh --bench
	@tools/bench.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)

# docs/config.md's settings table and docs/processor.md's decision table are generated from
# the code's tables.
docs: bin/paycb-migrate bin/tests/unit/test_decide
	@{ sed '/<!-- settings:begin -->/q' docs/config.md; bin/paycb-migrate --config-doc; \
	  sed -n '/<!-- settings:end -->/,$$p' docs/config.md; } > docs/config.md.new
	@mv docs/config.md.new docs/config.md
	@{ sed '/<!-- decision:begin -->/q' docs/processor.md; bin/tests/unit/test_decide --table; \
	  sed -n '/<!-- decision:end -->/,$$p' docs/processor.md; } > docs/processor.md.new
	@mv docs/processor.md.new docs/processor.md

# ---- fuzzing (clang libFuzzer) ------------------------------------------------------------
# `make fuzz` runs every harness for FUZZ_SECONDS each, seeded from tests/vectors/inbound;
# tests/fuzz/test_fuzz_smoke.sh (part of make test) runs each for a few seconds.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   := -g -O1 -std=c11 -D_GNU_SOURCE -MMD -MP -fsanitize=fuzzer-no-link,address,undefined \
		-Icommon -Ichan -Itests/support -Itools/sim $(PKG_CFLAGS)
# The parsers and what they stand on: common/, chan/'s crypto and notification side; not the
# HTTP front (ingest/) nor the outbound clients. WeChat's notification signer signs with
# chan_wx_sign.c's response signature. The test keys make their certificates with the
# simulator's sim_pki.c.
FUZZ_SRCS    := $(wildcard common/*.c chan/crypto*.c chan/chan_notify*.c chan/chan_conf*.c) \
		chan/chan_wx_sign.c \
		tests/support/testkeys.c tools/sim/sim_pki.c tests/fuzz/fuzz_common.c
FUZZ_OBJS    := $(patsubst %.c,build/fuzz/%.o,$(FUZZ_SRCS)) build/fuzz/$(CHAN_TABLE:.c=.o)
FUZZERS      := $(patsubst tests/fuzz/fuzz_%.c,bin/fuzz/fuzz_%,$(filter-out tests/fuzz/fuzz_common.c,$(wildcard tests/fuzz/fuzz_*.c)))

build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -c -o $@ $<

build/fuzz/$(CHAN_TABLE:.c=.o): build/fuzz/$(CHAN_TABLE)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -c -o $@ $<

# An archive, so each fuzzer links only the members its parser calls (fuzz_form: form.o),
# not every object of common/ (the database, Kafka and daemon code among them).
FUZZ_LIB     := build/fuzz/libfuzz.a
$(FUZZ_LIB): $(FUZZ_OBJS)
	$(Q)rm -f $@; $(AR) rcs $@ $^

bin/fuzz/fuzz_%: build/fuzz/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

fuzzers: $(FUZZERS)

fuzz: $(FUZZERS)
	@tests/fuzz/run.sh $(FUZZ_SECONDS)

# ---- install ----------------------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=/stage] [SYSCONFDIR=/etc]
#
# Programs into $(BINDIR); schemas, the nginx site and the Prometheus rules into $(DATADIR);
# the docs into $(DOCDIR); the systemd units (their /usr/local and /etc/paycb paths rewritten
# for these directories) into $(UNITDIR) (systemd reads /usr/lib and /usr/local/lib; with
# another PREFIX set UNITDIR=/etc/systemd/system) and the paycb user into $(SYSUSERSDIR). The example
# configuration (deploy/production) always goes to $(SYSCONFDIR)/paycb/examples and also to
# $(SYSCONFDIR)/paycb when no file of that name is there (a live configuration is never
# overwritten): files 0640, directories 0750, the secrets directory 0700. Installed as root
# onto the live system (no DESTDIR), the paycb user is created if missing (systemd-sysusers,
# else useradd), the configuration becomes root:paycb and the secrets directory paycb:paycb,
# and systemd reloads its units; with DESTDIR the ownership is left to the packager.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
DATADIR     ?= $(PREFIX)/share/paycb
DOCDIR      ?= $(PREFIX)/share/doc/paycb
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
SYSCONFDIR  ?= /etc
PAYCB_ETC   := $(SYSCONFDIR)/paycb
# The simulator and the bench are development tools; production hosts do not get them.
INSTALL_PROGS := $(filter-out bin/paycb-sim bin/paycb-bench,$(PROGS))
INSTALL_SED := -e 's\#/usr/local/bin/\#$(BINDIR)/\#g' -e 's\#/usr/local/share/paycb/\#$(DATADIR)/\#g' \
	       -e 's\#/usr/local/share/doc/paycb/\#$(DOCDIR)/\#g' -e 's\#/etc/paycb/\#$(PAYCB_ETC)/\#g'

install: $(INSTALL_PROGS)
	@set -e; d='$(DESTDIR)'; etc="$$d$(PAYCB_ETC)"; \
	own=no; if [ -z "$$d" ] && [ "$$(id -u)" = 0 ]; then own=yes; fi; \
	install -d "$$d$(BINDIR)" "$$d$(DATADIR)/schemas/kafka" "$$d$(DATADIR)/nginx" \
		"$$d$(DATADIR)/prometheus" "$$d$(DATADIR)/grafana" "$$d$(DOCDIR)" "$$d$(UNITDIR)" \
		"$$d$(SYSUSERSDIR)"; \
	install -m 0755 $(INSTALL_PROGS) "$$d$(BINDIR)/"; \
	install -m 0644 schemas/*.sql schemas/topics.tsv "$$d$(DATADIR)/schemas/"; \
	install -m 0644 schemas/kafka/*.json "$$d$(DATADIR)/schemas/kafka/"; \
	install -m 0644 deploy/nginx/*.conf "$$d$(DATADIR)/nginx/"; \
	install -m 0644 deploy/prometheus/*.yml "$$d$(DATADIR)/prometheus/"; \
	install -m 0644 deploy/grafana/*.json "$$d$(DATADIR)/grafana/"; \
	install -m 0644 docs/*.md "$$d$(DOCDIR)/"; \
	for u in deploy/systemd/*.service deploy/systemd/*.target; do \
		sed $(INSTALL_SED) "$$u" >"$$d$(UNITDIR)/$${u##*/}"; chmod 0644 "$$d$(UNITDIR)/$${u##*/}"; \
	done; \
	install -m 0644 deploy/systemd/paycb.sysusers "$$d$(SYSUSERSDIR)/paycb.conf"; \
	if [ $$own = yes ] && ! getent passwd paycb >/dev/null; then \
		if command -v systemd-sysusers >/dev/null; then systemd-sysusers "$(SYSUSERSDIR)/paycb.conf"; \
		else useradd --system --user-group --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin paycb; fi; \
	fi; \
	install -d -m 0750 "$$etc" "$$etc/examples" "$$etc/keys" "$$etc/tls"; \
	install -d -m 0700 "$$etc/secrets"; \
	fresh=""; \
	for f in deploy/production/*.conf; do \
		b=$${f##*/}; sed $(INSTALL_SED) "$$f" >"$$etc/examples/$$b"; chmod 0640 "$$etc/examples/$$b"; \
		if [ ! -e "$$etc/$$b" ]; then cp -p "$$etc/examples/$$b" "$$etc/$$b"; fresh="$$fresh $$etc/$$b"; \
		else echo "  KEEP    $$etc/$$b (the new example is $$etc/examples/$$b)"; fi; \
	done; \
	if [ $$own = yes ]; then \
		chown root:paycb "$$etc" "$$etc/examples" "$$etc/keys" "$$etc/tls" "$$etc"/examples/*.conf $$fresh; \
		chown paycb:paycb "$$etc/secrets"; \
		if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi; \
	else \
		echo "  NOTE    not root or DESTDIR set: make $(PAYCB_ETC) root:paycb and $(PAYCB_ETC)/secrets paycb:paycb when deploying"; \
	fi; \
	echo "  INSTALL $(INSTALL_PROGS:bin/%=%) -> $$d$(BINDIR); units -> $$d$(UNITDIR); config -> $$etc"

# The fault-injection run: CHAOS_SECONDS of load with faults (default 10 minutes), its own
# MariaDB and Kafka; CHAOS_SEED replays a run; CHAOS_BROKERS=3 runs it against a local
# three-broker Kafka cluster (deploy/local/kafka-cluster.sh: replication factor 3,
# min.insync.replicas 2) with brokers killed and drained under load. make test runs a 40 s
# version on one broker.
CHAOS_SECONDS ?= 600
chaos: all
	@PAYCB_CHAOS_SECONDS=$(CHAOS_SECONDS) $(if $(CHAOS_SEED),PAYCB_CHAOS_SEED=$(CHAOS_SEED)) \
	  $(if $(CHAOS_BROKERS),PAYCB_CHAOS_BROKERS=$(CHAOS_BROKERS)) \
	  CMOCKA_MESSAGE_OUTPUT=TAP PAYCB_VECTORS=$(CURDIR)/tests/vectors/inbound \
	  bin/tests/integ/test_chaos
