# ---- a second autograd: TensorFlow.js --------------------------------------
# scripts/install-tfjs.sh installs what is missing (Node and npm, then
# @tensorflow/tfjs from npm, pure JavaScript); scripts/peers/tfjs/tfjs_grad_peer.js
# builds each gradient case's forward from tf ops, differentiates <dY, Y> with
# tf.grads on the CPU backend in float32 and certifies the gradients, correct
# and with each injected bug, against the pinned outcomes
# (docs/gradients.md, "TensorFlow.js"); about 4 s, 40 s with the npm install.
.PHONY: certify-tfjs-grad
certify-tfjs-grad: $(CLI)
	@sh scripts/install-tfjs.sh
	node scripts/peers/tfjs/tfjs_grad_peer.js --golden golden --out $(BUILD)/results/tfjs-grad \
	    --check-pinned scripts/peers/tfjs/tfjs_grad_expected.json --cli $(CLI)
