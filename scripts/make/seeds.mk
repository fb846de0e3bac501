# make check under other seeds (docs/hardening.md, "Seeds").
#
# make check-seeds [SEEDS="1 2 3"]   every suite of make check, run once per
#     seed with REFENC_SEED set (the randomised suites draw from it; make
#     check itself uses the default, TEST_DEFAULT_SEED in
#     checks/common/testutil.h).  Every seed runs even after one fails; the
#     failing seeds are listed at the end with the command that replays
#     each, and any failure fails the target.  JUnit XML per seed in
#     $(REPORTS)/checks-seed-S.xml.  CI runs the fixed seed 2 (fixed, so that
#     a CI failure replays), about 1.5 min on 2 cores; each seed takes that.
SEEDS ?= 1 2 3
.PHONY: check-seeds

check-seeds: $(CHECKS) $(CLI) $(FIXTURE)/manifest.json
	@mkdir -p $(REPORTS)
	@echo "check-seeds: make check's suites under REFENC_SEED = $(SEEDS)"
	@failed=""; for s in $(SEEDS); do \
	    echo "== REFENC_SEED=$$s ($$(date -u +%H:%M:%S))"; \
	    REFENC_SEED=$$s REFENC_SOURCE_ROOT=$(abspath .) REFENC_CLI=$(abspath $(CLI)) \
	    REFENC_GOLDEN_FIXTURE=$(abspath $(FIXTURE)) \
	        $(CHECKS) --jobs=$(JOBS) --xml=$(REPORTS)/checks-seed-$$s.xml || failed="$$failed $$s"; \
	done; \
	if [ -n "$$failed" ]; then \
	    echo "check-seeds: FAILED under REFENC_SEED =$$failed; replay one with"; \
	    for s in $$failed; do echo "    REFENC_SEED=$$s make check"; done; exit 1; \
	fi; \
	echo "check-seeds: every suite passed under REFENC_SEED = $(SEEDS)"
