"""Safetensors files with numpy: reading every dtype refenc uses, writing
F64, F32, F16, BF16, I64, U8 and BOOL the way refenc's own writer does.

The format is Hugging Face's (docs/golden-format.md): an 8-byte
little-endian header length N, N bytes of JSON, the data.  Reading checks the
rules of refenc's C reader (ref/io/safetensors.h) before it reads a tensor
(the header fits, is bounded UTF-8 JSON, the tensors tile the data exactly,
sizes match shapes): a malformed file raises FormatError, never another
exception; refenc's C reader stays the judge of a file.

Writing follows refenc's layout: header keys sorted, compact JSON, spaces
pad the header to a multiple of 8 bytes, data ordered by element size
(largest first) then by name, so every tensor starts at a multiple of its
element size.  The same tensors give the bytes refenc's writer gives, with
its file rules (ref/io/atomic_write.h): the file appears whole or not at all
(a temporary file at a random name in the same directory, created with
O_EXCL | O_NOFOLLOW, fsync, rename), a target that is not a regular file is
refused, an interrupt leaves the target as it was and no temporary file.

F16 and BF16 are rounded directly from float64 to the nearest value, ties
to even, with gradual underflow and overflow to infinity (never through
float32, which would round twice); a NaN keeps its sign and the top bits of
its payload (the quiet NaN when those are all zero), as refenc's encoder does.
"""
import json
import math
import os
import re
import secrets
import signal
import stat
import struct
import threading

import numpy as np

# name: (numpy dtype of the stored elements, bytes per element)
DTYPES = {
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "U8": ("u1", 1), "BOOL": ("u1", 1),
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
MAX_HEADER = 100_000_000  # Hugging Face's limit, as refenc's

_ALIASES = {"float64": "F64", "double": "F64", "float32": "F32", "float": "F32",
            "float16": "F16", "half": "F16", "bfloat16": "BF16"}


class FormatError(ValueError):
    """A file that is not a valid safetensors file; the message names the
    file, the tensor and the byte offset."""


def dtype_name(dtype):
    """'F64', 'F32', 'F16' or 'BF16' for a name or alias ('bfloat16',
    'float32', ...), a numpy dtype or a torch dtype."""
    if not isinstance(dtype, str) and not str(dtype).startswith("torch."):
        try:
            dtype = np.dtype(dtype).name  # numpy dtypes and scalar types
        except TypeError:
            pass
    s = str(dtype).lower().replace("torch.", "")
    if s.upper() in FLOAT_DTYPES:
        return s.upper()
    if s in _ALIASES:
        return _ALIASES[s]
    raise ValueError(f"unknown result dtype {dtype!r}: use F64, F32, F16 or BF16")


# ---- reduced precision -----------------------------------------------------

# (stored significand bits p, smallest normal exponent, largest exponent)
_FORMATS = {"F16": (10, -14, 15), "BF16": (7, -126, 127)}


def _encode_small(x, fmt):
    """float64 array -> uint16 encodings of `fmt` ('F16' or 'BF16').

    A finite x is rounded to n * q, q = 2^(max(E, emin) - p) the format's
    spacing at x (E = floor(log2 |x|)) and n = rint(x / q): x / q is exact
    (a division by a power of two whose result is far from underflow and
    overflow) and rint rounds half to even, so n * q is x correctly rounded,
    subnormals included.  |n q| >= 2^(emax + 1) is infinity.  The rounded
    value is exact in float32 (BF16: its top 16 bits) and in float16, so the
    final conversion to bits rounds nothing."""
    p, emin, emax = _FORMATS[fmt]
    x = np.ascontiguousarray(x, dtype=np.float64)
    bits = x.view(np.uint64)
    sign = ((bits >> np.uint64(63)).astype(np.uint16) << np.uint16(15))
    out = np.zeros(x.shape, dtype=np.uint16)
    inf_bits = np.uint16(((1 << (15 - p)) - 1) << p)  # exponent field all ones

    finite = np.isfinite(x)
    xf = np.where(finite, x, 0.0)
    _, e = np.frexp(xf)  # |x| = m 2^e, 0.5 <= m < 1: E = e - 1
    E = np.maximum(e.astype(np.int64) - 1, emin)
    q = np.ldexp(1.0, (E - p).astype(np.int32))
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.rint(xf / q) * q
    big = ~(np.abs(v) < 2.0 ** (emax + 1))
    ok = finite & ~big
    v = np.where(ok, v, 0.0)
    if fmt == "BF16":
        enc = (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    else:
        enc = v.astype(np.float16).view(np.uint16)
    out[ok] = enc[ok]
    out[finite & big] = sign[finite & big] | inf_bits

    nan = np.isnan(x)
    inf = np.isinf(x)
    out[inf] = sign[inf] | inf_bits
    if nan.any():
        payload = ((bits[nan] >> np.uint64(52 - p)) & np.uint64((1 << p) - 1)).astype(np.uint16)
        payload[payload == 0] = np.uint16(1 << (p - 1))  # stay a NaN: the quiet bit
        out[nan] = sign[nan] | inf_bits | payload
    return out


def double_to_bf16(x):
    """float64 array -> bfloat16 bit patterns (uint16), round to nearest even."""
    return _encode_small(x, "BF16")


def double_to_f16(x):
    """float64 array -> binary16 bit patterns (uint16), round to nearest even."""
    return _encode_small(x, "F16")


def bf16_to_double(b):
    """bfloat16 bit patterns -> float64, exactly (NaN stays NaN)."""
    b = np.asarray(b, dtype=np.uint16)
    with np.errstate(invalid="ignore"):  # signalling NaNs come back quiet, still NaN
        return (b.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def f16_to_double(h):
    """binary16 bit patterns -> float64, exactly."""
    return np.asarray(h, dtype=np.uint16).view(np.float16).astype(np.float64)


# ---- reading ---------------------------------------------------------------

MAX_NDIM = 8            # refenc's REFENC_ST_MAX_NDIM
MAX_TOKENS = 1 << 19    # refenc's REFENC_ST_MAX_TOKENS: JSON tokens in a header
MAX_DEPTH = 32          # JSON nesting; a valid header nests 3 deep
_ELEMENTS_MAX = (1 << 63) - 1  # numpy's largest array, in bytes
# a JSON string; possessive, so that a long string costs no backtracking state
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.S)
_ENTRY_KEYS = {"dtype", "shape", "data_offsets"}


class _Duplicate(Exception):
    pass


def _object(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise _Duplicate(k)
        d[k] = v
    return d


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _open_regular(path):
    """A file object on a regular file; a FIFO, a directory or a device is
    refused (opened without blocking, then checked)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{path}: is {_file_kind(st.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _file_kind(m):
    return ("a directory" if stat.S_ISDIR(m) else "a symbolic link" if stat.S_ISLNK(m)
            else "a character device" if stat.S_ISCHR(m) else "a block device" if stat.S_ISBLK(m)
            else "a FIFO" if stat.S_ISFIFO(m) else "a socket" if stat.S_ISSOCK(m) else "not a regular file")


def _read_exactly(f, buf, at, path, what):
    """Fills buf (a writable buffer) from the file's byte `at` on."""
    view, got = memoryview(buf).cast("B"), 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise FormatError(f"{path}: the file ends at byte {at + got}, inside {what} "
                              f"(bytes {at} to {at + len(view)})")
        got += n


def _too_many(path, raw):
    return f"{path}: the header (bytes 8 to {8 + len(raw)}) holds more than {MAX_TOKENS} JSON tokens"


def _outside_strings(raw, path):
    """The header with each JSON string replaced by '""' (what is left:
    brackets, commas, colons, numbers), and where each '""' starts in it
    with how many bytes were cut before it (to find a byte of the header
    again).  Stops with FormatError past MAX_TOKENS strings, so that its
    cost is bounded whatever the header holds."""
    pieces, starts, shifts, end, cut = [], [0], [0], 0, 0
    for n, m in enumerate(_STRING.finditer(raw)):
        if n >= MAX_TOKENS:
            raise FormatError(_too_many(path, raw))
        pieces.append(raw[end:m.start()])
        starts.append(m.start() - cut + 2)
        cut += m.end() - m.start() - 2
        shifts.append(cut)
        pieces.append(b'""')
        end = m.end()
    pieces.append(raw[end:])
    return b"".join(pieces), np.array(starts), np.array(shifts)


def _parse_header(raw, path):
    """The header's bytes -> its JSON object, or FormatError: UTF-8, at most
    MAX_TOKENS tokens and MAX_DEPTH levels (counted outside its strings before
    parsing, so that neither the parser's memory nor its recursion grows with
    a hostile header), an object from
    its first byte, no duplicate keys, no NaN or Infinity."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: header byte {8 + e.start} is not UTF-8 ({e.reason})") from None
    if not raw.startswith(b"{"):
        raise FormatError(f"{path}: the header at byte 8 does not start with '{{'")
    bare, starts, shifts = _outside_strings(raw, path)
    opens = bare.count(b"[") + bare.count(b"{")
    # each key or value follows a ',', a ':' or an opening bracket
    tokens = 2 * opens + bare.count(b"]") + bare.count(b"}") + bare.count(b",") + bare.count(b":") + 1
    if tokens > MAX_TOKENS:
        raise FormatError(_too_many(path, raw))
    b = np.frombuffer(bare, dtype=np.uint8)
    at = np.flatnonzero((b == ord("[")) | (b == ord("{")) | (b == ord("]")) | (b == ord("}")))
    step = np.where((b[at] == ord("[")) | (b[at] == ord("{")), 1, -1)
    depth = np.cumsum(step)
    if depth.size and depth.max() > MAX_DEPTH:
        k = int(at[np.argmax(depth > MAX_DEPTH)])  # in bare; back to the header's bytes
        k += int(shifts[np.searchsorted(starts, k, side="right") - 1]) if len(starts) else 0
        raise FormatError(f"{path}: the header nests deeper than {MAX_DEPTH} levels (byte {8 + k})")
    try:
        header = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant)
    except _Duplicate as e:
        raise FormatError(f"{path}: the header has the key '{e.args[0]}' twice") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}: the header is not JSON at byte {8 + len(text[:e.pos].encode())}: {e.msg}") from None
    except (ValueError, RecursionError) as e:
        raise FormatError(f"{path}: the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: the header at byte 8 is not a JSON object")
    return header


def _key_offset(raw, name):
    """The file byte of a header key (where an entry's error is)."""
    i = raw.find(json.dumps(name, ensure_ascii=False).encode("utf-8"))
    return 8 + max(i, 0)


def _entry(name, e, raw, data_size, path):
    """A header entry, checked -> (dtype, shape, begin, end)."""
    where = f"{path}: tensor '{name}' (header byte {_key_offset(raw, name)})"
    if not name:
        raise FormatError(f"{where}: a tensor name is empty")
    if not isinstance(e, dict) or set(e) != _ENTRY_KEYS:
        raise FormatError(f"{where}: an entry is an object of exactly dtype, shape and data_offsets")
    dtype, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise FormatError(f"{where}: unknown dtype {dtype!r}")
    if (not isinstance(shape, list) or len(shape) > MAX_NDIM
            or not all(type(d) is int and d >= 0 for d in shape)):
        raise FormatError(f"{where}: shape {shape!r} is not a list of at most {MAX_NDIM} non-negative integers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(v) is int for v in offsets):
        raise FormatError(f"{where}: data_offsets {offsets!r} is not a list of two integers")
    size = DTYPES[dtype][1]
    nonzero = math.prod(d for d in shape if d) * size
    if nonzero > _ELEMENTS_MAX:
        raise FormatError(f"{where}: shape {shape} of {dtype} is too large ({nonzero} bytes)")
    b, end = offsets
    if not 0 <= b <= end <= data_size or end - b != math.prod(shape) * size:
        raise FormatError(f"{where}: data_offsets [{b}, {end}] do not hold shape {shape} of {dtype} "
                          f"in a data buffer of {data_size} bytes (file bytes from {8 + len(raw)})")
    return dtype, shape, b, end


def _tile(spans, data_start, data_size, path):
    """The tensors cover the data buffer exactly: no overlap, no hole, no
    byte after the last (zero-size tensors may sit at any boundary)."""
    at = 0
    for b, end, name in sorted(spans):
        if b != at:
            raise FormatError(f"{path}: tensor '{name}': data bytes [{at}, {b}) (file bytes from "
                              f"{data_start + min(at, b)}) overlap or leave a hole")
        at = max(at, end)
    if at != data_size:
        raise FormatError(f"{path}: data bytes [{at}, {data_size}) (file bytes {data_start + at} to "
                          f"{data_start + data_size}) belong to no tensor")


def _convert(raw, dtype, shape, where):
    """A tensor's stored elements -> float64, int64 or bool, as read() says."""
    a = raw.reshape(shape)
    if dtype == "BF16":
        return bf16_to_double(a)
    if dtype == "BOOL":
        if a.size and a.max() > 1:
            raise FormatError(f"{where}: BOOL element {int(np.argmax(a.reshape(-1) > 1))} is not 0 or 1")
        return a.astype(bool)
    if dtype in ("I64", "U8"):
        return a.astype(np.int64, copy=False)
    return a.astype(np.float64, copy=False)


def read(path):
    """-> (metadata dict, {name: numpy array}).  Floating tensors of every
    dtype come back as float64 (exactly), I64 and U8 as int64, BOOL as bool.

    The 8-byte header length and the header are read and checked first
    (refenc's rules, ref/io/safetensors.h: the length fits the file and
    MAX_HEADER, UTF-8 JSON of bounded size and depth, an object without
    duplicate keys; each entry exactly dtype, shape, data_offsets, the shape's
    size equal to its span; the spans tile the data buffer exactly; metadata
    strings only), then each tensor's bytes, one tensor at a time, into its
    own array: a tail costs nothing, a hostile header a few times its own
    size at most (MAX_HEADER bounds it), and a file that is not a safetensors
    file raises FormatError, naming the file, the tensor and the byte."""
    path = os.fspath(path)
    f, size = _open_regular(path)
    with f:
        if size < 8:
            raise FormatError(f"{path}: file is {size} bytes, too short for the 8-byte header length at byte 0")
        head = bytearray(8)
        _read_exactly(f, head, 0, path, "the header length")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise FormatError(f"{path}: header length {n} at byte 0 exceeds the limit of {MAX_HEADER} bytes")
        if n > size - 8:
            raise FormatError(f"{path}: header length {n} at byte 0 exceeds the {size - 8} bytes that follow it")
        raw = bytearray(n)
        _read_exactly(f, raw, 8, path, "the header")
        raw = bytes(raw)
        header = _parse_header(raw, path)
        meta = header.pop("__metadata__", {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise FormatError(f"{path}: __metadata__ (header byte {_key_offset(raw, '__metadata__')}) "
                              f"is not an object of strings")
        data_start, data_size = 8 + n, size - 8 - n
        entries = {name: _entry(name, e, raw, data_size, path) for name, e in header.items()}
        _tile([(b, end, name) for name, (_, _, b, end) in entries.items()], data_start, data_size, path)
        out = {}
        for name, (dtype, shape, b, end) in sorted(entries.items(), key=lambda kv: kv[1][2]):
            raw_t = np.empty((end - b) // DTYPES[dtype][1], dtype=DTYPES[dtype][0])
            f.seek(data_start + b)
            _read_exactly(f, raw_t, data_start + b, path, f"tensor '{name}'")
            out[name] = _convert(raw_t, dtype, shape, f"{path}: tensor '{name}' (file byte {data_start + b})")
        f.seek(size)
        if f.read(1):
            raise FormatError(f"{path}: the file grew while it was read: bytes after {size}")
    return dict(meta), {name: out[name] for name in header}


# ---- writing ---------------------------------------------------------------

def _to_numpy(a):
    """A numpy array from a numpy array, a scalar, a list or a torch tensor
    (any dtype: bfloat16 and float16 tensors go through float32, exactly)."""
    if hasattr(a, "detach"):  # a torch tensor
        t = a.detach().cpu()
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            t = t.float()
        return t.numpy()
    return np.asarray(a)


def encode(a, dtype):
    """An array as the little-endian bytes of `dtype` ('F64', 'F32', 'F16',
    'BF16', 'I64', 'U8', 'BOOL'), rounding floats once, to nearest even."""
    a = _to_numpy(a)
    if dtype == "F64":
        return np.ascontiguousarray(a, dtype="<f8").tobytes()
    if dtype == "F32":
        # float64 -> float32 by numpy's cast, round to nearest even (IEEE)
        with np.errstate(over="ignore"):
            return np.ascontiguousarray(np.asarray(a, dtype=np.float64).astype("<f4")).tobytes()
    if dtype == "BF16":
        return double_to_bf16(np.asarray(a, dtype=np.float64)).astype("<u2").tobytes()
    if dtype == "F16":
        return double_to_f16(np.asarray(a, dtype=np.float64)).astype("<u2").tobytes()
    if dtype == "I64":
        return np.ascontiguousarray(a, dtype="<i8").tobytes()
    if dtype in ("U8", "BOOL"):
        u = np.ascontiguousarray(a).astype("u1")
        if dtype == "BOOL" and u.size and u.max() > 1:
            raise ValueError("BOOL values must be 0 or 1")
        return u.tobytes()
    raise ValueError(f"unknown dtype {dtype!r}")


def _layout(tensors, metadata):
    """{name: (dtype, array)} and the metadata -> the file's chunks of bytes,
    in refenc's layout.  Every value is checked and encoded here, before any
    file is touched."""
    entries = {}
    for name, v in tensors.items():
        dtype, a = v if isinstance(v, tuple) else ("F64", v)
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError(f"invalid tensor name {name!r}")
        if dtype not in DTYPES:
            raise ValueError(f"tensor '{name}': unknown dtype {dtype!r}")
        a = _to_numpy(a)
        entries[name] = (dtype, list(a.shape), encode(a, dtype))
    order = sorted(entries, key=lambda k: (-DTYPES[entries[k][0]][1], k.encode("utf-8")))
    header, at = {}, 0
    for name in order:
        dtype, shape, raw = entries[name]
        header[name] = {"data_offsets": [at, at + len(raw)], "dtype": dtype, "shape": shape}
        at += len(raw)
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("metadata keys and values must be strings")
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return [struct.pack("<Q", len(text)), text] + [entries[name][2] for name in order]


# ---- the file rules of refenc's writer (ref/io/atomic_write.h) --------------

NAME_MAX = 255  # bytes of a file name in a directory (Linux)
_TMP_SUFFIX = 11  # ".tmp." and six random characters
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_TERMINATION = {getattr(signal, s) for s in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM") if hasattr(signal, s)}


def check_name(name, what="file name"):
    """A name an output may take in its directory: not empty, no path
    separator, no NUL, no '..', not starting with '.' (so never '.' or '..',
    and never a hidden or temporary file).  Raises ValueError."""
    if (not isinstance(name, str) or not name or "/" in name or os.sep in name or "\0" in name
            or ".." in name or name.startswith(".")):
        raise ValueError(f"{what} {name!r}: a name must not be empty, hold '/' or '..' or start with '.' "
                         f"(it would name a file outside its directory)")
    return name


def _create_temporary(dirfd, base, shown, mode):
    """A new file '<base>.tmp.XXXXXX' in the directory: O_CREAT | O_EXCL |
    O_NOFOLLOW, so that a file or a symbolic link planted at that name is
    never opened nor followed (another name is drawn)."""
    keep = base.encode("utf-8", "surrogateescape")[:NAME_MAX - _TMP_SUFFIX].decode("utf-8", "ignore")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f"{keep}.tmp.{''.join(secrets.choice(_ALPHABET) for _ in range(6))}"
        try:
            return os.open(tmp, flags, mode, dir_fd=dirfd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{shown}: cannot create a temporary file: 100 names taken")


def _write_all(fd, chunks):
    for c in chunks:
        view = memoryview(c).cast("B")
        while view:
            view = view[os.write(fd, view):]


def _hold_signals():
    """Holds SIGHUP, SIGINT, SIGQUIT and SIGTERM until the returned function
    is called, which then lets each one that arrived take effect.  In the
    main thread: handlers that only record the signal, whichever thread the
    kernel delivers it to (a process-directed signal may land on any thread
    that does not block it: torch's or numpy's workers), then the previous
    handlers restored and each recorded signal raised again.  In another
    thread (Python handlers can only be set from the main one): the signals
    blocked in this thread."""
    if threading.current_thread() is threading.main_thread():
        caught, saved = [], {}
        for s in _TERMINATION:
            old = signal.getsignal(s)
            if old is not None:  # None: a handler set outside Python, left alone
                saved[s] = signal.signal(s, lambda sig, frame: caught.append(sig))

        def release():
            for s, old in saved.items():
                signal.signal(s, old)
            for sig in dict.fromkeys(caught):
                signal.raise_signal(sig)
        return release
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _TERMINATION)
    return lambda: signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _atomic_write(dirfd, base, shown, chunks):
    """Writes the chunks to base in the directory dirfd: a temporary file,
    fsync, rename over base, fsync of the directory.  base must be absent or a
    regular file (a directory, a link, a FIFO, a device is refused).  The
    termination signals are held meanwhile (_hold_signals): one that arrives
    takes effect once the temporary file is renamed or removed; any exception
    removes it and leaves base as it was."""
    try:
        st = os.stat(base, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{shown}: is {_file_kind(st.st_mode)}, not a regular file: refusing to replace it")
    release = _hold_signals()
    tmp = None
    try:
        # a new file gets 0666 less the umask, as the target itself would; a
        # replaced one keeps its permission bits
        fd, tmp = _create_temporary(dirfd, base, shown, 0o600 if st is not None else 0o666)
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
            _write_all(fd, chunks)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, base, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        tmp = None
        try:
            os.fsync(dirfd)  # the rename durable; the file is in place whatever this says
        except OSError:
            pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dirfd)
            except OSError:
                pass
        release()


def write_in(directory, name, tensors, metadata=None):
    """Writes DIRECTORY/NAME (see write): NAME is a plain name (check_name),
    so the file is created in that very directory, never outside it.
    Returns the path."""
    check_name(name)
    chunks = _layout(tensors, metadata)
    shown = os.path.join(os.fspath(directory), name)
    dirfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _atomic_write(dirfd, name, shown, chunks)
    finally:
        os.close(dirfd)
    return shown


def write(path, tensors, metadata=None):
    """Writes {name: (dtype, array)} (or {name: array}, F64) and the string
    metadata to path, in refenc's layout, with refenc's file rules: the file
    appears whole or not at all (a temporary file '<name>.tmp.XXXXXX' in its
    directory, created with O_EXCL | O_NOFOLLOW at a random name, fsync,
    rename); a target that is a directory, a symbolic link, a FIFO or a
    device is refused; on any error or interrupt the temporary file is removed
    and the target left as it was."""
    path = os.fspath(path)
    directory, base = os.path.split(path)
    if base in ("", ".", ".."):
        raise ValueError(f"{path}: names a directory, not a file")
    chunks = _layout(tensors, metadata)
    dirfd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _atomic_write(dirfd, base, path, chunks)
    finally:
        os.close(dirfd)
