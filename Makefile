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

# Quiet output by default: one line per file ("  CC  ref/layernorm.c");
# `make V=1` prints every command in full.
V ?= 0
ifeq ($(V),0)
Q      := @
say     = @printf '  %-4s %s\n' '$(1)' '$(2)';
MAKEFLAGS += --no-print-directory
else
Q      :=
say     =
endif

# Strict, reproducible floating point: no contraction into FMA, no fast-math.
CFLAGS_STD := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -ffp-contract=off
OPT     ?= -O2
CFLAGS  ?=
LDFLAGS ?=

# Deferred (=): evaluated when a recipe runs, i.e. after `deps` installed pkg-config files.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
LIB_PKG_LIBS = $(shell pkg-config --libs $(LIB_PKGS))
# what the installed library needs (refenc.pc): no GSL, no MPFR; nettle for the
# golden files' sha256 (io/manifest.c)
PUB_PKGS     := jansson nettle
PUB_PKG_LIBS = $(shell pkg-config --libs $(PUB_PKGS))
SO_MAJOR     := 0
ALL_CFLAGS = $(CFLAGS_STD) $(OPT) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP
# the library's objects also go into librefenc.so
$(BUILD)/obj/ref/%.o: ALL_CFLAGS += -fPIC

# The rooms of ref/ (docs/architecture.md).  librefenc (static and shared,
# installed) holds the kernels, core, io and tool and needs jansson and nettle;
# librefenc-internal holds what needs MPFR or GSL: the oracle and the
# seeded random parameters.  The programs and the tests link both.
PUB_SRC    := $(wildcard ref/*.c ref/core/*.c ref/io/*.c) \
              $(filter-out ref/tool/random_params.c,$(wildcard ref/tool/*.c))
INT_SRC    := $(wildcard ref/oracle/*.c ref/golden/*.c) ref/tool/random_params.c
CLI_SRC    := $(wildcard ref/cli/*.c)
# make check: every suite under checks/ except the heavy ones in checks/slow/
CHECK_SRC  := $(sort $(wildcard checks/common/*.c checks/unit/*.c checks/properties/*.c \
                      checks/oracle/*.c checks/golden/*.c checks/robustness/*.c \
                      checks/gradients/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB        := $(BUILD)/librefenc.a
LIB_SO     := $(BUILD)/librefenc.so
LIB_INT    := $(BUILD)/librefenc-internal.a
LIBS       := $(LIB_INT) $(LIB)
CLI        := $(BUILD)/refenc
CHECKS     := $(BUILD)/checks/refenc-checks
REPORTS    := $(BUILD)/reports

.PHONY: all deps check demo clean help golden golden-cases golden-verify certify-torch certify-torch-grad
.PHONY: bench-oracle check-float-variants accuracy-report check-diagnosis check-grad-diagnosis
.DEFAULT_GOAL := all

all: $(LIB) $(LIB_SO) $(CLI)

help:
	@echo "make            build the libraries ($(LIB), $(LIB_SO)) and the CLI ($(CLI)); V=1: full commands"
	@echo "make install    PREFIX=/usr/local (DESTDIR honoured): program, libraries, headers, refenc.pc, golden cases, docs"
	@echo "make uninstall  remove what make install wrote (its manifest); make check-install: install + example peer out of tree, certified, + check-install-paths"
	@echo "make check-install-paths  install and uninstall with spaces, quotes and newlines in PREFIX and DESTDIR; user files kept"
	@echo "make check      build and run every test suite (Criterion); JUnit XML in $(REPORTS)/"
	@echo "make check-seeds  the suites of make check under REFENC_SEED = each of SEEDS (default 1 2 3)"
	@echo "make demo       trace a 2-layer encoder, then certify the reference on every golden case"
	@echo "make golden     regenerate the golden cases from the oracle; golden-verify compares"
	@echo "make certify-torch  certify PyTorch (float64 to bfloat16) against the golden cases"
	@echo "make certify-torch-grad  certify PyTorch autograd (float64 to bfloat16) against the gradient cases"
	@echo "make certify-tfjs-grad   certify TensorFlow.js autograd (npm, float32) against the gradient cases, outcomes pinned"
	@echo "make check-grad-diagnosis  inject each named backward bug into the PyTorch autograd peer (4 dtypes): each must be named"
	@echo "make check-diagnosis  inject each known bug into the PyTorch peer: each must be named"
	@echo "make detectability  every known bug in emulated F64/F32/F16/BF16: each must be caught"
	@echo "make variant-accuracy  the double reference's bug variants against the oracle's: within 0.1 of a bound"
	@echo "make bench-variants  a user golden's time and memory with and without bug variants (goal x1.5)"
	@echo "make check-checkpoint-names  the families' Hugging Face names: refenc's loader and the peer agree"
	@echo "make clean      remove $(BUILD)/ and the hardening build directories"
	@echo "make bench-oracle          time the reference and the MPFR oracle (docs/oracle.md)"
	@echo "make bench-oracle-large    the oracle at BERT-base and Llama-3-8B size against its goals (docs/oracle.md)"
	@echo "make bench-oracle-llama    one Llama-3-8B-shaped layer unit alone (about 13 min)"
	@echo "make bench-oracle-grad     a BERT-base layer's backward golden against its forward golden (goal x3)"
	@echo "make check-float-variants  show that float-rounded variants fail the accuracy suite"
	@echo "make accuracy-report       print the accuracy table (docs/error-bounds.md)"
	@echo "make coverage   coverage of ref/ by every suite (gcovr): coverage/index.html; fails under $(COV_LINES)% lines, $(COV_BRANCHES)% branches"
	@echo "make sanitize   every suite and the CLI on every golden case under ASan and UBSan"
	@echo "make valgrind   the CLI under valgrind memcheck on bad configs and golden cases"
	@echo "make fuzz       the libFuzzer targets, FUZZ_SECONDS (default 60) each"
	@echo "make check-determinism     gcc and clang, -O0 and -O2: bit-identical outputs on every golden case"
	@echo "                (the five targets above: docs/hardening.md)"
	@echo "make redteam    every command and option against tables of hostile inputs (scripts/redteam/)"
	@echo "make certify-ort           certify ONNX Runtime (float32, optimisation off and on), outcomes pinned"
	@echo "make check-python          the Python module's tests and the pytest example's pinned outcomes"
	@echo "make check-report          the HTML report of a planted bug, rendered by headless chromium; then check-report-size"
	@echo "make check-report-size     D 256, L 128 reports: at most 2 MB, the failing output on chromium's first screen"
	@echo "make check-ci-recipe       the CI recipe of docs/ci.md, run as written"
	@echo "make check-quickstart      every block of docs/quickstart.md, run as written"
	@echo "make check-docs-examples   every other example of README.md and docs/, run as written"
	@echo "make check-slurm           a one-node Slurm cluster runs the job array of docs/certify.md: merged = unsharded"
	@echo "make check-parallel        GNU parallel runs the recipe of docs/certify.md over 4 shards: merged = unsharded"

deps:
	@sh scripts/install-deps.sh

$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(call obj,$(PUB_SRC))
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(LIB_SO): $(call obj,$(PUB_SRC))
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) -shared $(LDFLAGS) -Wl,-soname,librefenc.so.$(SO_MAJOR) -o $@ $^ $(PUB_PKG_LIBS) -lm

$(LIB_INT): $(call obj,$(INT_SRC))
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(CLI): $(call obj,$(CLI_SRC)) $(LIBS)
	$(call say,LD,$@)$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(LIBS) $(LIB_PKG_LIBS) -lm

$(CHECKS): $(call obj,$(CHECK_SRC)) $(LIBS) | $(CLI)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,$(CHECK_SRC)) $(LIBS) $(PKG_LIBS) -lm

# The suites run in parallel (Criterion forks one process per test). Tests
# that run the CLI find it through REFENC_CLI.  The last line printed is
# Criterion's summary ("Synthesis: ..."); any failure fails make.
check: $(CHECKS) $(CLI)
	@mkdir -p $(REPORTS)
	REFENC_SOURCE_ROOT=$(abspath .) REFENC_CLI=$(abspath $(CLI)) $(CHECKS) --jobs=$(JOBS) --xml=$(REPORTS)/checks.xml

# The oracle's cost (docs/oracle.md); fails if the 2 s budget is exceeded.
BENCH := $(BUILD)/bench/bench-oracle
$(BENCH): $(call obj,checks/bench/bench_oracle.c) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(OPT) $(LDFLAGS) -o $@ $(call obj,checks/bench/bench_oracle.c) $(LIBS) $(PKG_LIBS) -lm
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

# The main job: a 2-layer encoder traced step by step, then the reference run
# on every golden case as a peer and certified like any implementation.
demo: $(CLI)
	$(CLI) run --trace --config docs/examples/pre_ln_rope.json
	@rm -rf $(BUILD)/results/reference && mkdir -p $(BUILD)/results/reference
	@for f in golden/cases/*.safetensors; do \
	    $(CLI) run --case $$f --out $(BUILD)/results/reference/$$(basename $$f) >/dev/null || exit 2; \
	done
	$(CLI) certify --golden golden --results $(BUILD)/results/reference

# ---- golden files ----------------------------------------------------------
# `make golden` regenerates every case of golden/catalogue.json from the MPFR
# oracle (in parallel over cases) and the manifest; the result is
# byte-identical to what is committed unless the catalogue or the oracle
# changed.  `make golden-verify` regenerates everything into $(BUILD) and
# compares byte for byte.
CATALOGUE := golden/catalogue.json
GOLDEN_OUT ?= golden/cases
GOLDEN_CMD = $(CLI) golden

golden: $(CLI)
	@mkdir -p golden/cases
	@for f in golden/cases/*.safetensors; do \
	    [ -e "$$f" ] || continue; n=$$(basename $$f .safetensors); \
	    $(GOLDEN_CMD) list $(CATALOGUE) | grep -qx "$$n" || { echo "removing $$f (not in the catalogue)"; rm -f "$$f"; }; \
	done
	$(MAKE) --no-print-directory -j$(JOBS) golden-cases GOLDEN_OUT=golden/cases CASES="$$($(GOLDEN_CMD) list $(CATALOGUE))"
	$(GOLDEN_CMD) manifest $(CATALOGUE) golden/cases golden/manifest.json
	@echo "golden: $$($(GOLDEN_CMD) list $(CATALOGUE) | wc -l) cases, $$(du -sh golden/cases | cut -f1)"

golden-cases: $(addprefix $(GOLDEN_OUT)/,$(addsuffix .safetensors,$(CASES)))

$(GOLDEN_OUT)/%.safetensors: $(CLI) $(CATALOGUE) FORCE
	@$(GOLDEN_CMD) --catalogue $(CATALOGUE) --case $* --out-file $@ --threads 1 --quiet

golden-verify: $(CLI)
	@rm -rf $(BUILD)/golden-verify && mkdir -p $(BUILD)/golden-verify/cases
	$(MAKE) --no-print-directory -j$(JOBS) golden-cases GOLDEN_OUT=$(BUILD)/golden-verify/cases CASES="$$($(GOLDEN_CMD) list $(CATALOGUE))"
	$(GOLDEN_CMD) manifest $(CATALOGUE) $(BUILD)/golden-verify/cases $(BUILD)/golden-verify/manifest.json
	@status=0; for f in $(BUILD)/golden-verify/cases/*.safetensors; do \
	    cmp -s $$f golden/cases/$$(basename $$f) || { echo "differs: golden/cases/$$(basename $$f)"; status=1; }; \
	done; \
	cmp -s $(BUILD)/golden-verify/manifest.json golden/manifest.json || { echo "differs: golden/manifest.json"; status=1; }; \
	[ $$status = 0 ] && echo "golden-verify: every case regenerates byte for byte"; exit $$status

# ---- a real peer: PyTorch --------------------------------------------------
# Installs python3-torch if missing, runs scripts/peers/torch_peer.py in
# every mode (float64, float32, float16 and bfloat16 accumulating in float32
# or in the dtype, PyTorch's own bfloat16 kernels), certifies each and checks
# the outcome pinned in scripts/peers/torch_expected.json
# (scripts/certify-torch.sh).  CERTIFY_GOLDEN=DIR certifies on another
# golden set (float64 and float32; no case may fail).
CERTIFY_GOLDEN ?= golden
certify-torch: $(CLI)
	@sh scripts/install-deps.sh python3-torch python3-numpy
	sh scripts/check-numpy-reader.sh
	sh scripts/certify-torch.sh $(CLI) $(BUILD)/results $(CERTIFY_GOLDEN)

# PyTorch's autograd against the gradient goldens (scripts/peers/torch_grad_peer.py):
# float64, float32, float16 and bfloat16 pass every gradient case, the injected
# backward bugs fail every one, each as scripts/peers/torch_grad_expected.json
# pins, PyTorch's own bfloat16 kernels needing the growth term of the parameter
# gradients' budget (docs/gradients.md, "Certifying a PyTorch backward"); about 7 s.
certify-torch-grad: $(CLI)
	@sh scripts/install-deps.sh python3-torch python3-numpy
	/usr/bin/python3 scripts/peers/torch_grad_peer.py --golden golden --out $(BUILD)/results/torch-grad \
	    --check-pinned scripts/peers/torch_grad_expected.json --cli $(CLI)

# The backward bugs' diagnosis end to end: the PyTorch autograd peer with each
# named backward bug injected (a custom autograd.Function), in float64, float32,
# float16 and bfloat16, must FAIL and be named on every gradient case that stores
# it, pass where it does not apply, and the clean peer pass, named nothing; the
# exceptions are explained in scripts/check-grad-diagnosis.py (ALSO) and
# docs/gradients.md ("The backward bugs in four dtypes").
check-grad-diagnosis: $(CLI)
	@sh scripts/install-deps.sh python3-torch python3-numpy
	/usr/bin/python3 scripts/check-grad-diagnosis.py --cli $(CLI) --golden golden --out $(BUILD)/results/grad-diagnosis

# The diagnosis end to end: the PyTorch peer with each known bug injected, in
# float64, float32, float16 and bfloat16, must FAIL and be named; unknown bugs
# must not be (scripts/check-diagnosis.sh).
check-diagnosis: $(CLI)
	@sh scripts/install-deps.sh python3-torch python3-numpy
	sh scripts/check-diagnosis.sh $(CLI) $(BUILD)/results/diagnosis

FORCE:

clean: clean-hardening
	rm -rf $(BUILD)

# ---- hardening: coverage, sanitizers, valgrind, fuzzing, determinism ----------
# (docs/hardening.md)
# Hardening targets, included by the Makefile: coverage, sanitizers, valgrind,
# fuzzing, determinism across compilers.  docs/hardening.md says what each
# checks, how to run it and its thresholds.  Each builds in its own directory
# (build-cov/, build-asan/, build-fuzz/, build-det/) with the Makefile's own
# rules, by running make again with BUILD, CC, OPT, CFLAGS and LDFLAGS set.

.PHONY: coverage sanitize valgrind fuzz check-determinism clean-hardening hardening-deps

# ---- the golden cases -------------------------------------------------------
# The targets iterate over the cases golden/manifest.json lists.  Until it is
# committed, and always for the bad-input catalogue of make check, they use a
# small fixture set generated from checks/robustness/golden_catalogue.json.
FIXTURE_CAT := checks/robustness/golden_catalogue.json
FIXTURE     ?= $(BUILD)/golden-fixture
FIXTURE_GEN ?= $(CLI)
# golden_dir(BUILD_DIR): golden/, or the fixture built in BUILD_DIR
golden_dir   = $(if $(wildcard golden/manifest.json),golden,$(1)/golden-fixture)
GOLDEN_DIR  ?= $(call golden_dir,$(BUILD))

$(FIXTURE)/manifest.json: $(FIXTURE_CAT) $(FIXTURE_GEN) scripts/golden-fixture.sh
	sh scripts/golden-fixture.sh $(FIXTURE_GEN) $(FIXTURE_CAT) $(FIXTURE)

# make check: the bad-input catalogue (checks/robustness/) runs the CLI on
# the fixture's cases.
check: $(FIXTURE)/manifest.json
check: export REFENC_GOLDEN_FIXTURE = $(abspath $(FIXTURE))

# Tools the targets below need, beyond scripts/install-deps.sh's list.
hardening-deps:
	@sh scripts/install-deps.sh jq valgrind clang libclang-rt-14-dev

# ---- coverage -----------------------------------------------------------------
# --coverage -O0 build in build-cov/; every suite of make check (the fixture
# golden set generated by the instrumented generator, that is by the oracle's
# case runner), then the CLI on every golden case and on the fixture, whose
# certification checks the oracle's outputs, then golden-verify (every case
# regenerated from the oracle must equal the committed file); gcovr reports on ref/ (the
# reference, the oracle, the file code, the CLI).  Fails under COV_LINES % of
# lines or COV_BRANCHES % of branches.
COV_BUILD    := build-cov
COV_LINES    ?= 96
COV_BRANCHES ?= 86

coverage: hardening-deps
	@mkdir -p $(COV_BUILD)
	find $(COV_BUILD) -name '*.gcda' -delete
	rm -rf $(COV_BUILD)/golden-fixture
	$(MAKE) --no-print-directory BUILD=$(COV_BUILD) OPT=-O0 CFLAGS=--coverage LDFLAGS=--coverage check
	sh scripts/run-golden.sh $(COV_BUILD)/refenc $(call golden_dir,$(COV_BUILD)) $(COV_BUILD)/golden-run
	sh scripts/run-golden.sh $(COV_BUILD)/refenc $(COV_BUILD)/golden-fixture $(COV_BUILD)/fixture-run
	$(if $(wildcard golden/catalogue.json),$(MAKE) --no-print-directory BUILD=$(COV_BUILD) OPT=-O0 \
		CFLAGS=--coverage LDFLAGS=--coverage golden-verify)
	rm -rf coverage
	mkdir -p coverage
	gcovr --root . --filter 'ref/' --exclude-unreachable-branches \
		--html-details coverage/index.html --html-title 'refenc: coverage of ref/' \
		--xml coverage/coverage.xml --json-summary coverage/summary.json \
		--txt coverage/summary.txt $(COV_BUILD)
	sh scripts/coverage-summary.sh coverage/summary.json $(COV_LINES) $(COV_BRANCHES)

# ---- sanitizers -----------------------------------------------------------------
# AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, no
# recovery, in build-asan/: every suite, the golden fixture generated under
# them, then the CLI on every golden case.  A sanitizer error exits 86 or 87,
# never 1 or 2 (the CLI's exit codes), so no test can mistake it for one.
SAN_BUILD := build-asan
SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all \
             -fno-omit-frame-pointer -g
# Every report goes to a file in SAN_LOGS, and any file there fails the
# target (scripts/sanitizer-logs.sh): Criterion ignores how a test's worker
# exits once the test has passed, so a leak found at its exit would be lost.
SAN_LOGS  := $(abspath $(SAN_BUILD))/sanitizer-logs
SAN_ENV   := ASAN_OPTIONS=detect_leaks=1:exitcode=86:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:log_path=$(SAN_LOGS)/asan \
             UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87:log_path=$(SAN_LOGS)/ubsan \
             LSAN_OPTIONS=suppressions=$(abspath checks/sanitize/lsan.supp):malloc_context_size=2:print_suppressions=0

sanitize: hardening-deps
	rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	$(SAN_ENV) $(MAKE) --no-print-directory BUILD=$(SAN_BUILD) OPT=-O1 \
		CFLAGS='$(SAN_FLAGS)' LDFLAGS='$(SAN_FLAGS)' check
	$(SAN_ENV) sh scripts/run-golden.sh $(SAN_BUILD)/refenc $(call golden_dir,$(SAN_BUILD)) \
		$(SAN_BUILD)/golden-run
	sh scripts/sanitizer-logs.sh control $(SAN_BUILD)/checks/leak-probe
	sh scripts/sanitizer-logs.sh check $(SAN_LOGS)

# ---- valgrind -----------------------------------------------------------------
# The plain program under memcheck: every invalid config, the examples, and
# golden cases with good and bad results files.  No error and no leak.
valgrind: hardening-deps $(CLI) $(FIXTURE)/manifest.json
	bash scripts/valgrind-invalid-configs.sh $(CLI)
	bash scripts/valgrind-golden.sh $(CLI) $(GOLDEN_DIR)

# ---- fuzzing --------------------------------------------------------------------
# libFuzzer targets (checks/fuzz/fuzz_*.c, not part of make check) built with
# clang -fsanitize=fuzzer,address,undefined against a library built with the
# same sanitizers in build-fuzz/.  make fuzz FUZZ_SECONDS=N runs each N seconds.
FUZZ_BUILD   := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := safetensors config certify
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g

$(FUZZ_BUILD)/fuzz-%: checks/fuzz/fuzz_%.c checks/fuzz/fuzz_check.h $(FUZZ_BUILD)/librefenc.a
	clang $(CFLAGS_STD) -O1 $(FUZZ_SAN) -fsanitize=fuzzer $(PKG_CFLAGS) -o $@ $< \
		$(FUZZ_EXTRA_$*) $(FUZZ_BUILD)/librefenc.a $(LIB_PKG_LIBS) -lm

# the library, by its own rules in a make of BUILD=build-fuzz (whose $(LIB)
# rule it is), whenever a source changes
ifneq ($(BUILD),$(FUZZ_BUILD))
$(FUZZ_BUILD)/librefenc.a: FORCE | hardening-deps
	$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang OPT=-O1 \
		CFLAGS='-fsanitize=fuzzer-no-link $(FUZZ_SAN)' $@
endif

fuzz: hardening-deps $(CLI) $(FIXTURE)/manifest.json $(patsubst %,$(FUZZ_BUILD)/fuzz-%,$(FUZZ_TARGETS))
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		sh scripts/fuzz.sh $(FUZZ_BUILD) $(GOLDEN_DIR) $(FUZZ_SECONDS) $(CLI) $(FUZZ_TARGETS)

.PHONY: FORCE
FORCE:

# ---- determinism across builds ------------------------------------------------
# gcc and clang, -O0 and -O2, each in build-det/VARIANT: the results of every
# golden case and the example traces must be byte-identical.
DET_BUILD    := build-det
DET_VARIANTS := gcc-O2 gcc-O0 clang-O0 clang-O2

check-determinism: hardening-deps $(FIXTURE)/manifest.json
	for v in $(DET_VARIANTS); do \
		$(MAKE) --no-print-directory BUILD=$(DET_BUILD)/$$v CC=$${v%-*} OPT=-$${v#*-} \
			$(DET_BUILD)/$$v/refenc || exit 1; \
	done
	sh scripts/check-determinism.sh $(GOLDEN_DIR) $(DET_BUILD) $(DET_VARIANTS)

clean-hardening:
	rm -rf $(COV_BUILD) $(SAN_BUILD) $(FUZZ_BUILD) $(DET_BUILD) coverage

# The bad-input catalogue's fault injection (checks/robustness/fault.c): the
# checks binary's calls to the allocation functions, the library's included,
# go through wrappers that fail on demand.  `private`: not inherited by the
# programs built as its prerequisites.
$(CHECKS): private override LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup


# Targets of their own, one fragment per topic (scripts/make/*.mk).
include $(sort $(wildcard scripts/make/*.mk))

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
