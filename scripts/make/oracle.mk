# The oracle's threads: OpenMP (gcc's libgomp; clang's libomp for clang
# builds).  Only the oracle's objects are compiled with it, and only the
# programs that link the oracle (the CLI, the test suites, the benchmarks)
# are linked with it: the installed librefenc has no OpenMP.
OMP_FLAGS ?= -fopenmp

$(BUILD)/obj/ref/oracle/%.o: ALL_CFLAGS += $(OMP_FLAGS)
$(CLI): private override LDFLAGS += $(OMP_FLAGS)
$(CHECKS): private override LDFLAGS += $(OMP_FLAGS)
$(BENCH): private override LDFLAGS += $(OMP_FLAGS)
