# The realistic suite: kernel-sized cases (golden/catalogue-large.json), too
# big to commit; their checksums are (golden/large.sha256).  `make
# golden-large` generates them into $(GOLDEN_LARGE) and checks them (UPDATE=1
# rewrites the checksums, RESUME=1 keeps the cases already right); `make
# certify-torch CERTIFY_GOLDEN=$(GOLDEN_LARGE)` certifies PyTorch on them.
# About 2.5 minutes on 2 quiet cores, 5 minutes sharing them (290 s of CPU:
# 87 s for the six block cases, 200 s for the four presets at their real
# width; 440 MB).
GOLDEN_LARGE ?= $(BUILD)/golden-large

.PHONY: golden-large
golden-large: $(CLI)
	sh scripts/golden-large.sh $(CLI) golden/catalogue-large.json golden/large.sha256 $(GOLDEN_LARGE)
