# Hardening, round 2 (docs/hardening.md): the test binary's hooks, the fuzz
# target of golden cases, the CLI fault harness and mutation testing.

# The atomic writer's tests choose the "random" part of the temporary file's
# name, to plant a link exactly there (checks/unit/test_atomic_write.c).
$(CHECKS): private override LDFLAGS += -Wl,--wrap=getrandom

# make sanitize's negative control: a sanitized Criterion test that leaks
# (checks/sanitize/leak_probe.c), which the log check must report.
$(SAN_BUILD)/checks/leak-probe: checks/sanitize/leak_probe.c | hardening-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_STD) -O1 $(SAN_FLAGS) $(PKG_CFLAGS) -o $@ $< $(PKG_LIBS)
sanitize: $(SAN_BUILD)/checks/leak-probe

# A fuzz target for golden-case loading and `run --case` (checks/fuzz/fuzz_case.c).
FUZZ_TARGETS += case
FUZZ_EXTRA_case := ref/cli/cmd_run_case.c ref/cli/results.c
fuzz: $(FUZZ_BUILD)/fuzz-case

# The CLI under faults while it writes (scripts/fault-harness.sh): random
# file-size limits, signals mid-write, planted temporaries, paths of 4095
# bytes; the old file survives or is wholly replaced, no temporary is left.
FAULT_ROUNDS ?= 200
.PHONY: fault-harness
fault-harness: $(CLI) $(FIXTURE)/manifest.json
	bash scripts/fault-harness.sh $(CLI) $(GOLDEN_DIR) $(FAULT_ROUNDS)

# Mutation testing of certify, the case readers, the kernels, the oracle and
# the golden maker (scripts/mutation.py, docs/hardening.md): not part of make
# check; fails if an area kills under 95% of its non-equivalent mutants.
# The default sample (30 mutants an area) takes about 10 minutes on 2 quiet
# cores, as CI runs it;
# MUTATION_ARGS='--budget 100' runs the larger sample of docs/hardening.md
# (about 25 minutes).
# MUTATION_ARGS passes options (--areas, --budget, --only ID[,ID...]).
.PHONY: mutation
mutation: $(CHECKS) $(CLI) $(FIXTURE)/manifest.json
	/usr/bin/python3 scripts/mutation.py $(MUTATION_ARGS)
