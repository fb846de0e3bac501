# ---- a second real peer: ONNX Runtime --------------------------------------
# scripts/install-ort.sh installs what is missing (python3-onnx, Node and npm,
# onnxruntime-node from npm); scripts/certify-ort.sh builds an ONNX model of
# every golden case, runs it with ONNX Runtime in float32 with graph
# optimisation off and fully on, certifies both and checks the pinned outcome
# (docs/certify.md, "ONNX Runtime").
.PHONY: certify-ort
certify-ort: $(CLI)
	@sh scripts/install-ort.sh
	sh scripts/certify-ort.sh $(CLI) $(BUILD)/ort
