# ---- a second autograd: TensorFlow.js --------------------------------------
# scripts/install-tfjs.sh installs what is missing (Node and npm, then
# @tensorflow/tfjs from npm, pure JavaScript); scripts/peers/tfjs/tfjs_grad_peer.js
# builds each gradient case's forward from tf ops, differentiates <dY, Y> with
# tf.grads on the CPU backend in float32 and certifies the gradients, correct
# and with each injected bug, against the pinned outcomes
# (docs/gradients.md, "TensorFlow.js"); then runs that page's by-hand block
# (tfjs-by-hand) as written, in a fresh directory holding the tree's entries,
# and requires its certify to pass the 3 gradient cases it expresses and skip
# the fourth (grad_llama_gqa: the peer builds no Llama block).  About 7 s, 45 s
# with the npm install.
TFJS_BY_HAND := $(BUILD)/tfjs-by-hand
.PHONY: certify-tfjs-grad
certify-tfjs-grad: $(CLI)
	@sh scripts/install-tfjs.sh
	node scripts/peers/tfjs/tfjs_grad_peer.js --golden golden --out $(BUILD)/results/tfjs-grad \
	    --check-pinned scripts/peers/tfjs/tfjs_grad_expected.json --cli $(CLI)
	@rm -rf $(TFJS_BY_HAND) && mkdir -p $(TFJS_BY_HAND) && \
	  for e in $(CURDIR)/*; do ln -s "$$e" $(TFJS_BY_HAND)/; done && \
	  /usr/bin/python3 scripts/docs-block.py extract docs/gradients.md tfjs-by-hand > $(TFJS_BY_HAND)/tfjs-by-hand.sh && \
	  (cd $(TFJS_BY_HAND) && sh -eu tfjs-by-hand.sh) > $(TFJS_BY_HAND).log 2>&1 && \
	  grep -q '^summary: 4 cases, 3 passed, 0 failed, 1 skipped: PASS' $(TFJS_BY_HAND).log || \
	  { tail -20 $(TFJS_BY_HAND).log >&2; echo "certify-tfjs-grad: the block tfjs-by-hand of docs/gradients.md failed (log: $(TFJS_BY_HAND).log)" >&2; exit 1; }
	@echo "certify-tfjs-grad: docs/gradients.md's tfjs-by-hand block, run as written: 3 cases passed, grad_llama_gqa skipped"
