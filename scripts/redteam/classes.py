"""The classes of hostile paths of the red-team suite (docs/hardening.md,
"The red-team suite"): for each kind of option, what each class does to the
option's slot in the sandbox, the path it gives the command ({H}), and the
outcomes a correct program may have.

An outcome is (exit codes, stderr regex or None, allowed changes, must
exist): the row passes when the program exits with one of the codes, its
stderr matches the regex, and the files under the sandbox's root that
changed (created, modified, removed, changed type or mode) are exactly among
the allowed ones; the files of `must exist` must then be regular files.
Allowed paths are relative to the sandbox; an allowed file allows its parent
directories to appear too.  A row of the class 'valid' is the control: the
same command on the valid file succeeds, so a hostile row's exit 2 is about
its hostile input, not a broken command line."""
import os
import random
import re
import shutil

LONG_PREFIX = "./" * 2100          # a path of over 4200 bytes: ENAMETOOLONG, never a truncation
NONUTF8 = "\udcff\udcfe"           # the bytes 0xff 0xfe (os.fsencode's surrogateescape)
NEAR = 4080                        # the length of a real path just under PATH_MAX (4096)


def shown(name):
    """A regex for a path's last component as a message may show it: bytes
    that are not UTF-8 as \\xNN (refenc_error_set), which stderr decoded with
    'backslashreplace' also shows for raw bytes."""
    b = os.fsencode(os.path.basename(name.rstrip("/")) or name)
    text = "".join(chr(c) if c < 0x80 else "\\x%02x" % c for c in b)
    return re.escape(text)


LONG_RE = r"(?i)too long"


def garbage_bytes(n=4096):
    return random.Random(20240521).randbytes(n)


def replace_with(path, kind, target=None):
    """Replaces whatever is at path (file, dir, link) by a fresh one of kind."""
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
    if kind == "dir":
        os.mkdir(path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "file":
        with open(path, "wb") as f:
            f.write(target or b"")
    elif kind == "link":
        os.symlink(target, path)


def make_deep(sb, length, leaf):
    """Creates directories under sb so that DIRS/leaf is a relative path of
    exactly `length` bytes; returns it (leaf itself is not created)."""
    rest = length - len(leaf) - 1   # the directories' part, separators included
    parts = []
    while rest > 0:
        n = rest if rest <= 200 else (200 if rest != 201 else 199)
        parts.append("d" * n)
        rest -= n + (1 if rest > n else 0)
    fd = os.open(sb, os.O_RDONLY | os.O_DIRECTORY)
    for p in parts:
        os.mkdir(p, dir_fd=fd)
        nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    path = "/".join(parts + [leaf])
    assert len(path) == length, (len(path), length)
    return path


# ---- input files ------------------------------------------------------------------------

def input_file_classes(json_file):
    """The classes of an input file: a JSON file's, or a safetensors file's."""
    classes = ["valid", "missing", "dir", "fifo", "device", "loop", "empty", "garbage", "trunc",
               "badutf8", "nonutf8", "long", "dotdot", "slash"]
    classes += ["deep"] if json_file else ["hugehdr", "bighdr"]
    return classes


def prepare_input(cls, sb, slot):
    """Makes the slot hostile; returns (H, kind of expectation)."""
    p = os.path.join(sb, slot)
    if cls == "valid":
        return slot, "ok"
    if cls == "missing":
        replace_with(p, None)
        return slot, "refused"
    if cls in ("dir", "fifo"):
        replace_with(p, cls)
        return slot, "refused"
    if cls == "device":
        return "/dev/zero", "refused"
    if cls == "loop":
        replace_with(p, "link", os.path.basename(slot) + ".loop")
        os.symlink(os.path.basename(slot), p + ".loop")
        return slot, "refused"
    data = open(p, "rb").read() if os.path.isfile(p) else b""
    if cls == "empty":
        replace_with(p, "file", b"")
    elif cls == "garbage":
        replace_with(p, "file", garbage_bytes())
    elif cls == "trunc":
        replace_with(p, "file", data[:len(data) // 2])
    elif cls == "hugehdr":  # a header length of 2^63 - 1
        replace_with(p, "file", (2**63 - 1).to_bytes(8, "little") + data[8:])
    elif cls == "bighdr":   # a header length just past the end of the file
        replace_with(p, "file", (len(data) - 7).to_bytes(8, "little") + data[8:])
    elif cls == "badutf8":  # a byte that is not UTF-8 in a JSON key: the file's text, or its header
        if data[:1] == b"{":
            replace_with(p, "file", b'{"\xff": 1, ' + data[1:])
        else:
            n = int.from_bytes(data[:8], "little")
            extra = b'"\xff":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
            header = b"{" + extra + data[9:8 + n]
            replace_with(p, "file", len(header).to_bytes(8, "little") + header + data[8 + n:])
    elif cls == "deep":     # JSON nested 100000 deep
        replace_with(p, "file", b"[" * 100000 + b"]" * 100000)
    elif cls == "nonutf8":
        d, b = os.path.split(slot)
        h = os.path.join(d, "x" + NONUTF8 + b)
        os.rename(p, os.path.join(sb, h))
        return h, "ok-or-refused"
    elif cls == "long":
        return LONG_PREFIX + slot, "long"
    elif cls == "dotdot":
        return "sub/../" + slot, "ok"
    elif cls == "slash":    # the file named as a directory: ENOTDIR
        return slot + "/", "refused"
    else:
        raise ValueError(cls)
    return slot, "refused"


# ---- input directories: the directory itself, then what it holds ---------------------

DIR_CLASSES = ["valid", "missing", "file", "fifo", "device", "loop", "empty-dir", "nonutf8", "long", "dotdot"]

# kind -> [(class, file inside the directory, input-file class applied to it)]
DIR_CONTENTS = {
    "golden-dir": [("manifest-" + c, "manifest.json", c)
                   for c in ("missing", "dir", "fifo", "loop", "empty", "garbage", "trunc", "deep")]
                  + [("manifest-device", "manifest.json", "device-link")]
                  + [("case-" + c, "cases/tiny.safetensors", c)
                     for c in ("missing", "dir", "fifo", "loop", "empty", "garbage", "trunc", "hugehdr",
                               "bighdr")]
                  + [("case-device", "cases/tiny.safetensors", "device-link")],
    "results-dir": [("result-" + c, "tiny.safetensors", c)
                    for c in ("dir", "fifo", "loop", "empty", "garbage", "trunc", "hugehdr", "bighdr")]
                   + [("result-device", "tiny.safetensors", "device-link"),
                      ("result-missing", "tiny.safetensors", "missing")],
    "cases-dir": [("case-" + c, "tiny.safetensors", c)
                  for c in ("missing", "dir", "fifo", "loop", "empty", "garbage", "trunc", "hugehdr")]
                 + [("case-device", "tiny.safetensors", "device-link")],
}


def dir_classes(kind):
    return DIR_CLASSES + [c for c, _, _ in DIR_CONTENTS[kind]]


def prepare_dir(cls, kind, sb, slot):
    p = os.path.join(sb, slot)
    if cls == "valid":
        return slot, "ok", None
    if cls == "missing":
        replace_with(p, None)
        return slot, "refused", None
    if cls in ("file", "fifo"):
        replace_with(p, cls)
        return slot, "refused", None
    if cls == "device":
        return "/dev/zero", "refused", None
    if cls == "loop":
        replace_with(p, "link", os.path.basename(slot) + ".loop")
        os.symlink(os.path.basename(slot), p + ".loop")
        return slot, "refused", None
    if cls == "empty-dir":
        replace_with(p, "dir")
        return slot, "refused", None
    if cls == "nonutf8":
        d, b = os.path.split(slot)
        h = os.path.join(d, b + NONUTF8)
        os.rename(p, os.path.join(sb, h))
        return h, "ok-or-refused", None
    if cls == "long":
        return LONG_PREFIX + slot, "long", None
    if cls == "dotdot":
        return "sub/../" + slot, "ok", None
    for c, inner, base in DIR_CONTENTS[kind]:
        if c == cls:
            ip = os.path.join(slot, inner)
            if base == "device-link":
                replace_with(os.path.join(sb, ip), "link", "/dev/zero")
                return slot, "refused", ip
            if base == "missing":
                replace_with(os.path.join(sb, ip), None)
                return slot, "missing-inner", ip
            prepare_input(base, sb, ip)
            return slot, "refused", ip
    raise ValueError(cls)


# ---- outputs --------------------------------------------------------------------------

OUT_FILE_CLASSES = ["valid", "exists", "fifo", "symlink", "dir", "rodir", "noparent", "long", "nearlong",
                    "nonutf8", "dotdot", "slash"]
OUT_DIR_CLASSES = ["valid", "exists", "file", "fifo", "loop", "rodir", "long", "nearlong", "nonutf8", "dotdot",
                   "manifest-fifo", "manifest-symlink", "manifest-garbage", "case-symlink", "cases-file"]


def prepare_out_file(cls, sb, slot, victim):
    """Returns (H, expectation)."""
    p = os.path.join(sb, slot)
    if cls == "valid":
        return slot, "ok"
    if cls == "exists":
        replace_with(p, "file", b"an old file, to be wholly replaced\n")
        return slot, "ok"
    if cls in ("fifo", "dir"):
        replace_with(p, cls)
        return slot, "refused"
    if cls == "symlink":
        replace_with(p, "link", victim)
        return slot, "refused-or-replaced"
    if cls == "rodir":
        os.makedirs(os.path.join(sb, "ro"))
        os.chmod(os.path.join(sb, "ro"), 0o555)
        return "ro/" + os.path.basename(slot), "refused-nobody"
    if cls == "noparent":
        return "nodir/" + os.path.basename(slot), "refused"
    if cls == "long":
        return LONG_PREFIX + slot, "long"
    if cls == "nearlong":
        return make_deep(sb, NEAR, os.path.basename(slot)), "ok-or-long"
    if cls == "nonutf8":
        d, b = os.path.split(slot)
        return os.path.join(d, "o" + NONUTF8 + b), "ok-or-refused"
    if cls == "dotdot":
        return "sub/../" + slot, "ok-at-slot"
    if cls == "slash":      # a file's name ending in '/': refused, nothing written
        return slot + "/", "refused"
    raise ValueError(cls)


def prepare_out_dir(cls, sb, slot, victim, valid_dir):
    """valid_dir: a valid directory of the same kind in the sandbox, to copy
    where the class needs one already there.  Returns (H, expectation)."""
    p = os.path.join(sb, slot)
    if cls == "valid":
        return slot, "ok"
    if cls == "exists":
        shutil.copytree(os.path.join(sb, valid_dir), p, symlinks=True)
        return slot, "ok"
    if cls in ("file", "fifo"):
        replace_with(p, cls)
        return slot, "refused"
    if cls == "loop":
        replace_with(p, "link", os.path.basename(slot) + ".loop")
        os.symlink(os.path.basename(slot), p + ".loop")
        return slot, "refused"
    if cls == "rodir":
        os.makedirs(p)
        os.chmod(p, 0o555)
        return slot, "refused-nobody"
    if cls == "long":
        return LONG_PREFIX + slot, "long"
    if cls == "nearlong":   # DIR/cases/NAME.safetensors.new then passes PATH_MAX
        return make_deep(sb, NEAR, os.path.basename(slot)), "ok-or-long"
    if cls == "nonutf8":
        return slot + NONUTF8, "ok-or-refused"
    if cls == "dotdot":
        return "sub/../" + slot, "ok-at-slot"
    shutil.copytree(os.path.join(sb, valid_dir), p, symlinks=True)
    if cls == "manifest-fifo":
        replace_with(os.path.join(p, "manifest.json"), "fifo")
        return slot, "refused"
    if cls == "manifest-symlink":
        replace_with(os.path.join(p, "manifest.json"), "link", victim)
        return slot, "refused-or-replaced:manifest.json"
    if cls == "manifest-garbage":
        replace_with(os.path.join(p, "manifest.json"), "file", garbage_bytes())
        return slot, "refused"
    if cls == "case-symlink":
        replace_with(os.path.join(p, "cases", "tiny.safetensors"), "link", victim)
        return slot, "refused-or-replaced:cases/tiny.safetensors"
    if cls == "cases-file":
        replace_with(os.path.join(p, "cases"), "file", b"not a directory\n")
        return slot, "refused"
    raise ValueError(cls)
