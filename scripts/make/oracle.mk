# The oracle's threads: OpenMP (gcc's libgomp; clang's libomp for clang
# builds).  Only the oracle's objects are compiled with it, and only the
# programs that link the oracle (the CLI, the test suites, the benchmarks)
# are linked with it: the installed librefenc has no OpenMP.
OMP_FLAGS ?= -fopenmp

$(BUILD)/obj/ref/oracle/%.o: ALL_CFLAGS += $(OMP_FLAGS)
$(CLI): private override LDFLAGS += $(OMP_FLAGS)
$(CHECKS): private override LDFLAGS += $(OMP_FLAGS)
$(BENCH): private override LDFLAGS += $(OMP_FLAGS)

# The oracle at BERT-base size against its goals (docs/oracle.md): a layer
# at B1 L128, memory at B8 L512, 1 vs 2 shards, the same layer's backward
# golden against its forward; then one Llama-3-8B-shaped
# layer unit at B1 L512 (time and memory against its goal, reported, not
# enforced).  About 15 minutes and 6 GiB; meaningful on a quiet machine
# only.  Fails if a BERT-base goal is missed.  STEPS="1 2 2b 3 grad" leaves the
# Llama unit out; make bench-oracle-llama runs it alone (THREADS, default 2;
# LLAMA_L, default 512).  make bench-oracle-grad runs the backward golden's
# step alone: a BERT-base layer at B1 L128, the golden with and without
# --grad back to back; fails if the backward costs more than 3 times the
# forward golden (docs/gradients.md, "The backward golden's cost").
.PHONY: bench-oracle-large bench-oracle-llama bench-oracle-grad
bench-oracle-large: $(CLI)
	@sh scripts/install-deps.sh time bc
	sh scripts/bench-oracle-large.sh $(CLI) $(BUILD)/bench-large
bench-oracle-llama: $(CLI)
	@sh scripts/install-deps.sh time bc
	STEPS=llama sh scripts/bench-oracle-large.sh $(CLI) $(BUILD)/bench-large
bench-oracle-grad: $(CLI)
	@sh scripts/install-deps.sh time bc
	STEPS=grad sh scripts/bench-oracle-large.sh $(CLI) $(BUILD)/bench-large

# clang's OpenMP is LLVM's libomp (make check-determinism builds with clang).
.PHONY: openmp-deps
openmp-deps:
	@sh scripts/install-deps.sh libomp-dev
hardening-deps: openmp-deps

# The oracle's dot products without their x86-64 assembly (the C code other
# machines compile): its suites, built with -DREFENC_MP_PORTABLE_DOT, must
# pass as they do on the assembly (docs/oracle.md).  About 3 min on 2 cores.
PORTABLE_BUILD := build-portable
.PHONY: check-oracle-portable
check-oracle-portable:
	$(MAKE) --no-print-directory BUILD=$(PORTABLE_BUILD) CFLAGS=-DREFENC_MP_PORTABLE_DOT \
		$(PORTABLE_BUILD)/checks/refenc-checks $(PORTABLE_BUILD)/refenc
	REFENC_SOURCE_ROOT=$(abspath .) REFENC_CLI=$(abspath $(PORTABLE_BUILD)/refenc) \
		$(PORTABLE_BUILD)/checks/refenc-checks --jobs=$(JOBS) --filter 'oracle*/*'
	@echo "check-oracle-portable: the oracle's suites pass on the portable dot products"
