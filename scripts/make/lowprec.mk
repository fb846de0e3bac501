# Low-precision certification (docs/verdict.md; the detectability matrix: docs/diagnosis.md).
#
# make detectability   every known bug variant in the emulation of every
#                      dtype (F64, F32, F16, BF16), certified: each must be
#                      caught and named, the clean emulations must pass, and
#                      the matrix must equal the one in docs/diagnosis.md
#                      (about 20 s; scripts/detectability.py)
# make detectability-docs   rewrites that matrix in docs/diagnosis.md
.PHONY: detectability detectability-docs

DETECT_DIR := $(BUILD)/detectability
DETECT_MD  := $(DETECT_DIR)/matrix.md

$(DETECT_MD): $(CLI) scripts/detectability.py golden/manifest.json FORCE
	@mkdir -p $(DETECT_DIR)
	/usr/bin/python3 scripts/detectability.py $(CLI) golden $(DETECT_DIR)/runs --markdown $@

detectability: $(DETECT_MD)
	@/usr/bin/python3 scripts/docs-block.py check docs/diagnosis.md detectability $(DETECT_MD)

detectability-docs: $(DETECT_MD)
	/usr/bin/python3 scripts/docs-block.py write docs/diagnosis.md detectability $(DETECT_MD)

# make variant-accuracy   the double reference's bug variants against the
#                      oracle's stored ones, on every shipped case, in bounds
#                      of each dtype's rule: exits 1 if one reaches 0.1, and
#                      the table must equal the one in docs/diagnosis.md
#                      ("Variants from the double reference"; about 10 s;
#                      scripts/variant-accuracy.py)
# make variant-accuracy-docs   rewrites that table
.PHONY: variant-accuracy variant-accuracy-docs

VARACC_DIR := $(BUILD)/variant-accuracy
VARACC_MD  := $(VARACC_DIR)/table.md

$(VARACC_MD): $(CLI) scripts/variant-accuracy.py golden/manifest.json FORCE
	@mkdir -p $(VARACC_DIR)
	/usr/bin/python3 scripts/variant-accuracy.py $(CLI) golden $(VARACC_DIR)/runs --markdown $@ > $(VARACC_DIR)/log.txt
	@tail -7 $(VARACC_DIR)/log.txt

variant-accuracy: $(VARACC_MD)
	@/usr/bin/python3 scripts/docs-block.py check docs/diagnosis.md variant-accuracy $(VARACC_MD)

variant-accuracy-docs: $(VARACC_MD)
	/usr/bin/python3 scripts/docs-block.py write docs/diagnosis.md variant-accuracy $(VARACC_MD)

# make bench-variants   what the bug variants cost a user's golden: the
#                      same BERT-style golden (D 256, L 128, V 30522)
#                      without variants, with the double reference's (the
#                      default) and with the oracle's; fails if the
#                      reference's exceed 1.5 times the time or the memory
#                      of the golden without (issue 26), in CPU seconds;
#                      prints the wall-time ratio too.  WIDTH=base: BERT-
#                      base's width (with LAYERS=1, the docs' second
#                      figure).  A few minutes; meaningful on a quiet
#                      machine only.
.PHONY: bench-variants
bench-variants: $(CLI)
	@sh scripts/install-deps.sh time bc
	sh scripts/bench-variants.sh $(CLI) $(BUILD)/bench-variants
