# Hardening, round 2 (docs/hardening.md): the test binary's hooks, the fuzz
# target of golden cases, the CLI fault harness and mutation testing.

# The atomic writer's tests choose the "random" part of the temporary file's
# name, to plant a link exactly there (checks/unit/test_atomic_write.c).
$(CHECKS): private override LDFLAGS += -Wl,--wrap=getrandom
