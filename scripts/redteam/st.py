"""Safetensors files, read and written with the standard library only, for
the red-team suite's fixtures (scripts/redteam/redteam.py): copies of a case
with some tensors or metadata changed, inputs and weights with a NaN, results
that are NaN everywhere.  Not a general reader: the suite's own files only."""
import json
import struct

# dtype -> (struct code, bytes); BF16 is packed by hand (the top half of a float32)
DTYPES = {"F64": ("d", 8), "F32": ("f", 4), "F16": ("e", 2), "BF16": (None, 2),
          "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1), "BOOL": ("B", 1)}


def read(path):
    """(metadata, {name: [dtype, shape, raw bytes]}) in the file's data order."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    data = b[8 + n:]
    tensors = {}
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        lo, hi = t["data_offsets"]
        tensors[name] = [t["dtype"], list(t["shape"]), data[lo:hi]]
    return meta, tensors


def write(path, meta, tensors):
    """Writes the tensors in the order given, the header padded with spaces to 8 bytes."""
    header, blobs, off = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def pack(dtype, values):
    code, size = DTYPES[dtype]
    if dtype == "BF16":
        return b"".join(struct.pack("<f", float(v))[2:] for v in values)
    return struct.pack("<%d%s" % (len(values), code), *values)


def unpack(dtype, raw):
    code, size = DTYPES[dtype]
    if dtype == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    return list(struct.unpack("<%d%s" % (len(raw) // size, code), raw))


def filled(dtype, shape, value):
    """A tensor of the shape, every element value."""
    return [dtype, list(shape), pack(dtype, [value] * numel(shape))]


def converted(tensor, dtype):
    """The tensor's values in another float dtype (rounded by struct)."""
    dt, shape, raw = tensor
    return [dtype, list(shape), pack(dtype, unpack(dt, raw))]
