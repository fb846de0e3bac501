#!/bin/sh
# Copies the numpy reader out of docs/golden-format.md ("Reading a file
# without refenc"), runs it alone on every golden case, and checks what it
# read: the metadata, every tensor's shape, and the outputs listed.
# Needs /usr/bin/python3 with numpy (python3-numpy).
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 scripts/docs-block.py extract docs/golden-format.md numpy-reader > "$tmp/reader.py"
[ -s "$tmp/reader.py" ] || { echo "check-numpy-reader: no python block found in docs/golden-format.md" >&2; exit 1; }

cat >> "$tmp/reader.py" <<'PY'

if __name__ == "__main__":
    import glob, sys
    files = sorted(glob.glob("golden/cases/*.safetensors"))
    for path in files:
        meta, tensors = read_safetensors(path)
        assert meta["format"] == "refenc-golden", path
        for o in json.loads(meta["outputs"]):
            a = tensors[o["name"]]
            assert a.dtype == np.float64 and np.all(np.isfinite(a)), (path, o["name"])
        assert any(n.startswith("in.") for n in tensors), path
    print(f"check-numpy-reader: the documented reader read {len(files)} golden cases")
    sys.exit(0 if files else 1)
PY
/usr/bin/python3 "$tmp/reader.py"
