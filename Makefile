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
PKGS     := rdkafka libconfig jansson libmicrohttpd openssl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(shell mariadb_config --cflags 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(shell mariadb_config --libs 2>/dev/null)

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wpointer-arith \
	    -Wstrict-prototypes -Wmissing-prototypes -Wno-format-truncation -MMD -MP -Icommon $(PKG_CFLAGS)
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
PROG_DIRS := ingest processor retrier tools/migrate tools/paycbctl tools/sim
bin_name   = $(or $(PROGNAME_$(subst /,_,$(1))),paycb-$(notdir $(1)))
PROGNAME_tools_paycbctl := paycbctl
PROGNAME_tools_sim      := paycb-sim

objs_of    = $(patsubst %.c,$(BUILD)/%.o,$(wildcard $(1)/*.c))
libobjs_of = $(filter-out $(BUILD)/$(1)/main.o,$(call objs_of,$(1)))

COMMON_OBJS := $(call objs_of,common)
LIB_COMMON  := $(BUILD)/libcommon.a
PROG_DIRS_PRESENT := $(foreach d,$(PROG_DIRS),$(if $(wildcard $(d)/main.c),$(d)))
PROGS       := $(foreach d,$(PROG_DIRS_PRESENT),bin/$(call bin_name,$(d)))
LIBS_ALL    := $(foreach d,$(PROG_DIRS_PRESENT),$(BUILD)/lib$(subst /,_,$(d)).a)

UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
INTEG_SRCS  := $(wildcard tests/integ/test_*.c)
TEST_SUPPORT := $(wildcard tests/support/*.c)
TEST_BINS   := $(patsubst tests/%.c,bin/tests/%,$(UNIT_SRCS) $(INTEG_SRCS))

.PHONY: fuzzers docs all test check unit integ deps services-up services-down services-clean migrate \
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

define prog_rules
$(BUILD)/lib$(subst /,_,$(1)).a: $(call libobjs_of,$(1))
	@mkdir -p $$(dir $$@)
	$(Q)rm -f $$@; $$(AR) rcs $$@ $$^ $(if $(call libobjs_of,$(1)),,$(BUILD)/empty.o)
bin/$(call bin_name,$(1)): $(BUILD)/$(1)/main.o $(BUILD)/lib$(subst /,_,$(1)).a $(LIB_COMMON)
	@mkdir -p bin
	@$(if $(Q),echo "  LD      $$@")
	$(Q)$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach d,$(PROG_DIRS_PRESENT),$(eval $(call prog_rules,$(d))))

$(BUILD)/empty.o:
	@mkdir -p $(dir $@)
	echo 'int paycb_empty_archive;' | $(CC) -x c -c -o $@ -

TEST_SUPPORT_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SUPPORT))
bin/tests/%: $(BUILD)/tests/%.o $(TEST_SUPPORT_OBJS) $(LIBS_ALL) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJS) $(LIBS_ALL) $(LIB_COMMON) $(LDLIBS) -lcmocka

$(BUILD)/tests/%.o: CFLAGS += -Itests/support -Iingest -Iprocessor -Iretrier -Itools/sim -Itools/paycbctl -Itools/migrate

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
	@tools/bench.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)

# docs/config.md's settings table is generated from the code's table.
docs: bin/paycb-migrate
	@{ sed '/<!-- settings:begin -->/q' docs/config.md; bin/paycb-migrate --config-doc; \
	  sed -n '/<!-- settings:end -->/,$$p' docs/config.md; } > docs/config.md.new
	@mv docs/config.md.new docs/config.md

# ---- fuzzing (clang libFuzzer) ------------------------------------------------------------
# `make fuzz` runs every harness for FUZZ_SECONDS each, seeded from ../shared/vectors;
# tests/fuzz/test_fuzz_smoke.sh (part of make test) runs each for a few seconds.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   := -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer-no-link,address,undefined \
		-Icommon -Iingest -Itests/support $(PKG_CFLAGS)
FUZZ_SRCS    := $(wildcard common/*.c) $(filter-out ingest/main.c,$(wildcard ingest/*.c)) \
		tests/support/testkeys.c tests/fuzz/fuzz_common.c
FUZZ_OBJS    := $(patsubst %.c,build/fuzz/%.o,$(FUZZ_SRCS))
FUZZERS      := $(patsubst tests/fuzz/fuzz_%.c,bin/fuzz/fuzz_%,$(filter-out tests/fuzz/fuzz_common.c,$(wildcard tests/fuzz/fuzz_*.c)))

build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -c -o $@ $<

bin/fuzz/fuzz_%: build/fuzz/tests/fuzz/fuzz_%.o $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

fuzzers: $(FUZZERS)

fuzz: $(FUZZERS)
	@tests/fuzz/run.sh $(FUZZ_SECONDS)
