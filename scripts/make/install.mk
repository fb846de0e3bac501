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
SO_NAME   := librefenc.so.$(SO_MAJOR)
SO_FILE   := librefenc.so.$(VERSION)
PC        := $(BUILD)/refenc.pc

# The public headers: the kernels, core, io and tool, but not the seeded
# random parameters (GSL), nor the atomic writer, whose state holds a POSIX
# signal mask (the library uses it inside; a C11 program cannot include it),
# and nothing of the oracle (MPFR) or the CLI.
PUB_HDR   := $(filter-out ref/tool/random_params.h ref/io/atomic_write.h,\
                          $(wildcard ref/*.h ref/core/*.h ref/io/*.h ref/tool/*.h))

.PHONY: install uninstall

# pkg-config: Requires jansson, because the public headers use json_t
# (safetensors metadata, config JSON); Requires.private nettle (the golden
# cases' sha256, io/manifest.c) and Libs.private have what a static link
# adds.  No GSL and no MPFR: the installed library does not need them.
$(PC): FORCE
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)printf '%s\n' \
	    'prefix=$(PREFIX)' \
	    'exec_prefix=$${prefix}' \
	    'libdir=$(LIBDIR)' \
	    'includedir=$(INCLUDEDIR)' \
	    'goldendir=$(GOLDENDIR)' \
	    '' \
	    'Name: refenc' \
	    'Description: reference Transformer encoder: kernels, golden cases, results files, certification' \
	    'Version: $(VERSION)' \
	    'Requires: jansson' \
	    'Requires.private: nettle' \
	    'Libs: -L$${libdir} -lrefenc' \
	    'Libs.private: -lm' \
	    'Cflags: -I$${includedir}' > $@

# The Python module (scripts/make/python.mk) installs with the rest.
install: $(LIB) $(LIB_SO) $(CLI) $(PC) install-python
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/refenc \
	    $(DESTDIR)$(GOLDENDIR)/cases $(DESTDIR)$(DOCDIR)/examples
	install -m 755 $(CLI) $(DESTDIR)$(BINDIR)/refenc
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/librefenc.a
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/$(SO_FILE)
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/librefenc.so
	install -m 644 $(PC) $(DESTDIR)$(LIBDIR)/pkgconfig/refenc.pc
	for h in $(PUB_HDR); do \
	    d=$(DESTDIR)$(INCLUDEDIR)/refenc/$$(dirname $${h#ref/}); \
	    install -d $$d && install -m 644 $$h $$d/ || exit 1; \
	done
	install -m 644 golden/manifest.json golden/catalogue.json $(DESTDIR)$(GOLDENDIR)/
	install -m 644 golden/cases/*.safetensors $(DESTDIR)$(GOLDENDIR)/cases/
	install -m 644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	install -m 644 docs/examples/* $(DESTDIR)$(DOCDIR)/examples/
	@echo "installed refenc $(VERSION) under $(DESTDIR)$(PREFIX)"

# Removes exactly what install wrote, then the directories it made if empty.
uninstall: uninstall-python
	rm -f $(DESTDIR)$(BINDIR)/refenc $(DESTDIR)$(LIBDIR)/librefenc.a \
	    $(DESTDIR)$(LIBDIR)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_NAME) $(DESTDIR)$(LIBDIR)/librefenc.so \
	    $(DESTDIR)$(LIBDIR)/pkgconfig/refenc.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/refenc $(DESTDIR)$(DATADIR)/refenc $(DESTDIR)$(DOCDIR)
	-rmdir $(DESTDIR)$(LIBDIR)/pkgconfig 2>/dev/null
	@echo "uninstalled refenc from $(DESTDIR)$(PREFIX)"

# What a C user does, out of the tree (scripts/check-install.sh): install,
# build docs/examples/peer.c with pkg-config alone (shared and static), run
# it on every installed golden case, certify PASS, uninstall.
.PHONY: check-install
check-install: $(LIB) $(LIB_SO) $(CLI)
	@sh scripts/install-deps.sh python3-numpy
	sh scripts/check-install.sh
