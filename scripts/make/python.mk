# ---- Python: the refenc module, the pytest example, the HTML report in a browser
# (docs/python.md, docs/certify.md).  Debian's /usr/bin/python3 (the python3
# first on PATH may be another interpreter, without numpy or torch).
#
#   make check-python     the module's tests (scripts/python/tests), then the
#                         pytest example docs/examples/test_torch_encoder.py
#                         copied out of the tree and run as a user would, its
#                         outcome per test compared with the pinned list
#                         scripts/python/example-outcomes.txt; the PyTorch
#                         peer under pytest (scripts/peers/test_torch_peer.py,
#                         every case in four modes, a planted bug among them)
#                         against scripts/python/peer-outcomes.txt; then a
#                         staged install-python / uninstall-python
#   make check-report     the report of a planted tiling bug rendered headless
#                         by chromium: the screenshot shows the stripe; then
#                         check-report-size
#   make check-report-size  reports of a D 256, L 128 golden (refenc golden,
#                         ~7 s) with two bugs in emulated bfloat16: each at
#                         most 2 MB, and in headless chromium the first output
#                         block failing, its heatmap on the first screen
#                         (~20 s on 2 idle cores, 47 s on a loaded machine)
#   make check-quickstart  every block of docs/quickstart.md, run as written
#   make check-ci-recipe  the plain shell CI recipe of docs/ci.md, run as the
#                         page has it (needs certify --junit)
#   make install-python / uninstall-python   the module into the directory
#                         Debian's /usr/bin/python3 searches for PREFIX
#                         (/usr: /usr/lib/python3/dist-packages; otherwise
#                         PREFIX/lib/python3.X/dist-packages); PREFIX, DESTDIR
#                         and PYTHONDIR honoured

PY          := /usr/bin/python3
PY_DEPS     := python3-numpy python3-pytest python3-torch
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
DATADIR     ?= $(PREFIX)/share
GOLDENDIR   ?= $(DATADIR)/refenc/golden
# empty: scripts/install.sh takes the directory above for PREFIX
PYTHONDIR   ?=
PY_ENV       = PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$(abspath scripts/python) REFENC_CLI=$(abspath $(CLI)) \
               REFENC_LIB=$(abspath $(LIB_SO)) REFENC_GOLDEN=$(abspath golden)
PY_EXAMPLE  := $(BUILD)/python-example
PY_PINNED   := scripts/python/example-outcomes.txt
PEER_PINNED := scripts/python/peer-outcomes.txt

.PHONY: check-python install-python uninstall-python check-report check-report-size check-ci-recipe check-quickstart

check-python: $(CLI) $(LIB_SO)
	@sh scripts/install-deps.sh $(PY_DEPS)
	@mkdir -p $(REPORTS)
	$(PY_ENV) $(PY) -m pytest -q -p no:cacheprovider --junitxml=$(REPORTS)/python-module.xml scripts/python/tests
	@rm -rf $(PY_EXAMPLE) && mkdir -p $(PY_EXAMPLE)
	cp docs/examples/test_torch_encoder.py $(PY_EXAMPLE)/
	cd $(PY_EXAMPLE) && $(PY_ENV) $(PY) -m pytest -q -rxs -p no:cacheprovider \
	    --junitxml=$(abspath $(REPORTS))/python-example.xml test_torch_encoder.py
	$(PY) scripts/python/pinned_outcomes.py $(REPORTS)/python-example.xml $(PY_PINNED)
	$(PY_ENV) $(PY) -m pytest -q --tb=line -p no:cacheprovider \
	    --junitxml=$(REPORTS)/python-peer.xml scripts/peers/test_torch_peer.py
	$(PY) scripts/python/pinned_outcomes.py $(REPORTS)/python-peer.xml $(PEER_PINNED)
	sh scripts/check-install-python.sh $(BUILD)/python-stage

# The module, with the installed program's and golden cases' paths recorded
# in refenc/_paths.py (locate.py looks there first); scripts/install.sh
# (scripts/make/install.mk says how the paths reach it).
install-python:
	sh scripts/install.sh install-python $(PY)

uninstall-python:
	sh scripts/install.sh uninstall-python $(PY)

check-report: $(CLI)
	@sh scripts/install-deps.sh python3-numpy python3-pil chromium
	sh scripts/check-report.sh $(CLI) $(BUILD)/report-check
	sh scripts/check-report-size.sh $(CLI) $(BUILD)/report-size

check-report-size: $(CLI)
	@sh scripts/install-deps.sh chromium
	sh scripts/check-report-size.sh $(CLI) $(BUILD)/report-size

# docs/quickstart.md's blocks, run as written in a fresh directory (about 1 min on 2 cores)
check-quickstart: $(CLI) $(LIB_SO)
	@sh scripts/install-deps.sh $(PY_DEPS)
	sh scripts/check-quickstart.sh $(BUILD)/quickstart

# every other example of README.md and docs/, run as written; first, every
# example is run by some check or says why not (scripts/docs-examples.py)
check-docs-examples: $(CLI) $(LIB_SO)
	@sh scripts/install-deps.sh $(PY_DEPS) pkg-config
	sh scripts/check-docs-examples.sh $(BUILD)/docs-examples

check-ci-recipe: $(CLI)
	@sh scripts/install-deps.sh python3-numpy
	sh scripts/check-ci-recipe.sh $(CLI) $(BUILD)/ci-recipe
