# The standing red-team suite (scripts/redteam/, docs/hardening.md, "The
# red-team suite"): every command and option of refenc against tables of
# hostile inputs, each row in its own sandbox under a timeout.  First the
# negative controls (an option added to a --help must be reported; rows run
# on a fake program that misbehaves must fail), then the rows; ends with
# "N passed, N failed".  About 30 s on 2 cores (a minute when they are
# busy).  REDTEAM_ARGS passes options (--only REGEX, --verbose, --jobs N).
.PHONY: redteam
redteam: $(CLI)
	/usr/bin/python3 scripts/redteam/redteam.py --cli $(CLI) --work $(BUILD)/redteam --coverage-control --runner-control
	/usr/bin/python3 scripts/redteam/redteam.py --cli $(CLI) --work $(BUILD)/redteam $(REDTEAM_ARGS)
