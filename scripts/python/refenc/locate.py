"""Finding the refenc program and the golden directory.

The program: an explicit argument, else $REFENC_CLI, else the installed one
(`make install-python` records it), else build/refenc of the source tree this
package sits in, else `refenc` on PATH.
The golden directory: an explicit argument, else $REFENC_GOLDEN, else the
installed one, else golden/ of the source tree.
A path given explicitly (argument or variable) that does not work is an
error, never silently replaced by another."""
import os
import shutil

from . import _paths

# scripts/python/refenc/locate.py -> the source tree's root
_TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def cli_path(cli=None):
    given = cli if cli is not None else os.environ.get("REFENC_CLI") or None
    if given is not None:
        if os.path.isfile(given) and os.access(given, os.X_OK):
            return str(given)
        raise FileNotFoundError(f"{given}: not an executable refenc program "
                                f"({'argument cli' if cli is not None else 'REFENC_CLI'})")
    for p in (_paths.CLI, os.path.join(_TREE, "build", "refenc")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    found = shutil.which("refenc")
    if found:
        return found
    raise FileNotFoundError("cannot find the refenc program: build it with `make` in the source tree, "
                            "install it, or set REFENC_CLI")


def golden_dir(golden=None):
    given = golden if golden is not None else os.environ.get("REFENC_GOLDEN") or None
    if given is not None:
        if os.path.isfile(os.path.join(given, "manifest.json")):
            return str(given)
        raise FileNotFoundError(f"{given}: no manifest.json, not a refenc golden directory "
                                f"({'argument golden' if golden is not None else 'REFENC_GOLDEN'})")
    for g in (_paths.GOLDEN, os.path.join(_TREE, "golden")):
        if g and os.path.isfile(os.path.join(g, "manifest.json")):
            return g
    raise FileNotFoundError("cannot find refenc's golden directory: pass golden=DIR or set REFENC_GOLDEN")
