# The encoder families (docs/families.md).
#
# make check-checkpoint-names: the C loader's checkpoint-name tables
# (ref/io/checkpoint_names.c, refenc run --weights) against the PyTorch
# peer's (scripts/peers/torch_families.py), on every family case of the
# golden set: the case's parameters saved under the family's Hugging Face
# names and under refenc's must give the same output, and a swapped pair must
# not; then, for the Llama-style families (llama, mistral, qwen2, qwen3),
# gemma3, modernbert, t5-encoder, nomic-bert, jina-bert-v2 and gte, goldens made by refenc golden
# --weights from those Hugging Face files, on which the PyTorch peer must
# PASS in float64, float32, bfloat16 and float16 and FAIL with a bug of the
# family injected (the key/value heads tiled (gemma3 too), layer 0's attention norm
# applied, T5's bias per layer, the GLU halves swapped, ALiBi's slopes of a
# power-of-two head count, GTE's ntk ignored)
# (scripts/check-checkpoint-names.py).
# Needs python3-torch and numpy, like certify-torch; about 15 s.

.PHONY: check-checkpoint-names

check-checkpoint-names: $(CLI)
	@sh scripts/install-deps.sh python3-torch python3-numpy
	/usr/bin/python3 scripts/check-checkpoint-names.py $(CLI) golden $(BUILD)/checkpoint-names
