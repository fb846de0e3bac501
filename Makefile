# refenc — build, tests, demo.  `make help` lists the targets.
#
# Every target that compiles first runs scripts/install-deps.sh, which
# installs missing Debian packages and is silent when nothing is missing.

BUILD   ?= build
CC      ?= gcc
PKGS    := gsl mpfr criterion jansson
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
ALL_CFLAGS = $(CFLAGS_STD) $(OPT) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP

REF_SRC    := $(wildcard ref/*.c)
ORACLE_SRC := $(wildcard ref/oracle/*.c)
CLI_SRC    := $(wildcard ref/cli/*.c)
# make check: every suite under checks/ except the heavy ones in checks/slow/
CHECK_SRC  := $(sort $(wildcard checks/common/*.c checks/unit/*.c checks/properties/*.c \
                      checks/oracle/*.c checks/golden/*.c checks/robustness/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB        := $(BUILD)/librefenc.a
CLI        := $(BUILD)/refenc
CHECKS     := $(BUILD)/checks/refenc-checks
REPORTS    := $(BUILD)/reports

.PHONY: all deps check demo clean help bench-oracle check-float-variants accuracy-report
.DEFAULT_GOAL := all

all: $(LIB) $(CLI)

help:
	@echo "make            build the library ($(LIB)) and the CLI ($(CLI))"
	@echo "make check      build and run every test suite (Criterion); JUnit XML in $(REPORTS)/"
	@echo "make demo       run a 2-layer encoder with a trace of every step"
	@echo "make clean      remove $(BUILD)/"
	@echo "make bench-oracle          time the reference and the MPFR oracle (docs/oracle.md)"
	@echo "make check-float-variants  show that float-rounded variants fail the accuracy suite"
	@echo "make accuracy-report       print the accuracy table (docs/error-bounds.md)"

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
	$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(LIB) $(PKG_LIBS) -lm

$(CHECKS): $(call obj,$(CHECK_SRC)) $(LIB) | $(CLI)
	@mkdir -p $(dir $@)
	$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,$(CHECK_SRC)) $(LIB) $(PKG_LIBS) -lm

# The suites run in parallel (Criterion forks one process per test). Tests
# that run the CLI find it through REFENC_CLI.  The last line printed is
# Criterion's summary ("Synthesis: ..."); any failure fails make.
check: $(CHECKS) $(CLI)
	@mkdir -p $(REPORTS)
	REFENC_CLI=$(abspath $(CLI)) $(CHECKS) --jobs=$(JOBS) --xml=$(REPORTS)/checks.xml

# The oracle's cost (docs/oracle.md); fails if the 2 s budget is exceeded.
BENCH := $(BUILD)/bench/bench-oracle
$(BENCH): $(call obj,bench/bench_oracle.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,bench/bench_oracle.c) $(LIB) $(PKG_LIBS) -lm
bench-oracle: $(BENCH)
	$(BENCH)

# Negative controls of the accuracy bounds, in a temporary copy of the tree.
check-float-variants: deps
	sh scripts/float-variants.sh

# The accuracy table: largest error in ULPs and as a fraction of the bound.
accuracy-report: $(CHECKS)
	@rm -f $(BUILD)/accuracy.txt
	@REFENC_ACCURACY_REPORT=$(abspath $(BUILD)/accuracy.txt) $(CHECKS) --filter 'accuracy_*/*' --jobs=$(JOBS) >/dev/null
	@sort $(BUILD)/accuracy.txt

demo: $(CLI)
	$(CLI) run --trace --config docs/examples/pre_ln_rope.json

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
