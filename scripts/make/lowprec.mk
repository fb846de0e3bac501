# Low-precision certification (docs/certify.md).
#
# make detectability   every known bug variant in the emulation of every
#                      dtype (F64, F32, F16, BF16), certified: each must be
#                      caught and named, the clean emulations must pass, and
#                      the matrix must equal the one in docs/certify.md
#                      (about 20 s; scripts/detectability.py)
# make detectability-docs   rewrites that matrix in docs/certify.md
.PHONY: detectability detectability-docs

DETECT_DIR := $(BUILD)/detectability
DETECT_MD  := $(DETECT_DIR)/matrix.md

$(DETECT_MD): $(CLI) scripts/detectability.py golden/manifest.json FORCE
	@mkdir -p $(DETECT_DIR)
	/usr/bin/python3 scripts/detectability.py $(CLI) golden $(DETECT_DIR)/runs --markdown $@

detectability: $(DETECT_MD)
	@/usr/bin/python3 scripts/docs-block.py check docs/certify.md detectability $(DETECT_MD)

detectability-docs: $(DETECT_MD)
	/usr/bin/python3 scripts/docs-block.py write docs/certify.md detectability $(DETECT_MD)
