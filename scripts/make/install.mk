# make install / uninstall: the refenc program, the C API (static and shared
# libraries, headers under include/refenc/, refenc.pc), the Python module
# (docs/python.md), the golden cases and the docs.  PREFIX defaults to /usr/local; DESTDIR is honoured (staged
# installs: every path below is prefixed with it, refenc.pc is not).
# docs/c-api.md describes what is installed and how to build against it.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR    ?= $(PREFIX)/share
DOCDIR     ?= $(DATADIR)/doc/refenc
GOLDENDIR  ?= $(DATADIR)/refenc/golden

VERSION   := $(shell sed -n 's/^\#define REFENC_VERSION "\(.*\)"/\1/p' ref/core/version.h)

# The public headers: the kernels, core, io and tool, but not the seeded
# random parameters (GSL), nor the atomic writer, whose state holds a POSIX
# signal mask (the library uses it inside; a C11 program cannot include it),
# and nothing of the oracle (MPFR) or the CLI.
PUB_HDR   := $(filter-out ref/tool/random_params.h ref/io/atomic_write.h,\
                          $(wildcard ref/*.h ref/core/*.h ref/io/*.h ref/tool/*.h))

# scripts/install.sh does the work and keeps the install manifest
# (DATADIR/refenc/install-manifest.txt; the Python module's in its own
# directory) that uninstall reads: it removes the files install wrote and the
# directories install created if empty, nothing else.  The directory
# variables reach it through the environment, verbatim, never through a
# recipe's text: a space, a quote or a newline in DESTDIR stays part of the
# path (a newline in the final paths is refused: refenc.pc and the manifest
# hold one path a line).  As everywhere in make, a $ in a value is written $$.
INSTALL_VARS := DESTDIR PREFIX BINDIR LIBDIR INCLUDEDIR DATADIR DOCDIR GOLDENDIR PYTHONDIR
INSTALL_TARGETS := install uninstall install-python uninstall-python
$(foreach v,$(INSTALL_VARS),$(eval $(INSTALL_TARGETS): export REFENC_INSTALL_$v = $$($v)))

.PHONY: install uninstall

# The Python module (scripts/make/python.mk) installs with the rest.
install: $(LIB) $(LIB_SO) $(CLI) install-python
	sh scripts/install.sh install $(BUILD) $(VERSION) $(SO_MAJOR) $(PUB_HDR)

# In the reverse order of install: the Python module, installed first, may
# have created directories (PREFIX/lib, PREFIX) the rest then used.
uninstall:
	sh scripts/install.sh uninstall
	sh scripts/install.sh uninstall-python $(PY)

# What a C user does, out of the tree (scripts/check-install.sh): install,
# build docs/examples/peer.c with pkg-config alone (shared and static), run
# it on every installed golden case, certify PASS, uninstall.
.PHONY: check-install check-install-paths
check-install: $(LIB) $(LIB_SO) $(CLI)
	@sh scripts/install-deps.sh python3-numpy
	sh scripts/check-install.sh
	sh scripts/check-install-paths.sh

# Install and uninstall with spaces, quotes, a backslash and a newline in
# PREFIX and DESTDIR; the user's files in every installed directory survive
# uninstall (scripts/check-install-paths.sh).
check-install-paths: $(LIB) $(LIB_SO) $(CLI)
	sh scripts/check-install-paths.sh
