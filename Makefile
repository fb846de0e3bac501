# refenc — build, tests, demo.  `make help` lists the targets.
#
# Every target that compiles first runs scripts/install-deps.sh, which
# installs missing Debian packages and is silent when nothing is missing.

BUILD   ?= build
CC      ?= gcc
# The library and the programs need LIB_PKGS; only the test binary links
# Criterion (a program linked with it aborts when run from a Criterion test).
LIB_PKGS := gsl mpfr jansson nettle
PKGS    := $(LIB_PKGS) criterion
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-builtin-rules

# Strict, reproducible floating point: no contraction into FMA, no fast-math.
CFLAGS_STD := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -ffp-contract=off
OPT     ?= -O2
CFLAGS  ?=
LDFLAGS ?=

# Deferred (=): evaluated when a recipe runs, i.e. after `deps` installed pkg-config files.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
LIB_PKG_LIBS = $(shell pkg-config --libs $(LIB_PKGS))
ALL_CFLAGS = $(CFLAGS_STD) $(OPT) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP

REF_SRC    := $(wildcard ref/*.c)
ORACLE_SRC := $(wildcard ref/oracle/*.c)
CLI_SRC    := $(wildcard ref/cli/*.c)
GEN_SRC    := $(wildcard golden/gen/*.c)
# make check: every suite under checks/ except the heavy ones in checks/slow/
CHECK_SRC  := $(sort $(wildcard checks/common/*.c checks/unit/*.c checks/properties/*.c \
                      checks/oracle/*.c checks/golden/*.c checks/robustness/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB        := $(BUILD)/librefenc.a
CLI        := $(BUILD)/refenc
GEN        := $(BUILD)/refenc-golden
CHECKS     := $(BUILD)/checks/refenc-checks
REPORTS    := $(BUILD)/reports

.PHONY: all deps check demo clean help
.DEFAULT_GOAL := all

all: $(LIB) $(CLI)

help:
	@echo "make            build the library ($(LIB)) and the CLI ($(CLI))"
	@echo "make check      build and run every test suite (Criterion); JUnit XML in $(REPORTS)/"
	@echo "make demo       run a 2-layer encoder with a trace of every step"
	@echo "make clean      remove $(BUILD)/ and the hardening build directories"
	@echo "make coverage   coverage of ref/ by every suite (gcovr): coverage/index.html; fails under 95% lines, 85% branches"
	@echo "make sanitize   every suite and the CLI on every golden case under ASan and UBSan"
	@echo "make valgrind   the CLI under valgrind memcheck on bad configs and golden cases"
	@echo "make fuzz       the libFuzzer targets, FUZZ_SECONDS (default 60) each"
	@echo "make check-determinism  gcc and clang, -O0 and -O2: bit-identical outputs on every golden case"
	@echo "                (docs/hardening.md)"

deps:
	@sh scripts/install-deps.sh

$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(call obj,$(REF_SRC) $(ORACLE_SRC))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(CLI): $(call obj,$(CLI_SRC)) $(LIB)
	$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(LIB) $(LIB_PKG_LIBS) -lm

$(GEN): $(call obj,$(GEN_SRC)) $(LIB)
	$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,$(GEN_SRC)) $(LIB) $(LIB_PKG_LIBS) -lm

$(CHECKS): $(call obj,$(CHECK_SRC)) $(LIB) | $(CLI) $(GEN)
	@mkdir -p $(dir $@)
	$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,$(CHECK_SRC)) $(LIB) $(PKG_LIBS) -lm

# The suites run in parallel (Criterion forks one process per test). Tests
# that run the CLI find it through REFENC_CLI.  The last line printed is
# Criterion's summary ("Synthesis: ..."); any failure fails make.
check: $(CHECKS) $(CLI)
	@mkdir -p $(REPORTS)
	REFENC_CLI=$(abspath $(CLI)) $(CHECKS) --jobs=$(JOBS) --xml=$(REPORTS)/checks.xml

demo: $(CLI)
	$(CLI) run --trace --config docs/examples/pre_ln_rope.json

clean: clean-hardening
	rm -rf $(BUILD)

include mk/hardening.mk

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
