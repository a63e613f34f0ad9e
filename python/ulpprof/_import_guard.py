"""What `ulpprof import` checks before it trusts a file: that loading a
torch file runs no code, that a .npz is not a zip bomb, that tensor names
survive the trip into HDF5, and that the output neither is an input nor
follows a planted link.

torch files.  `torch.load(weights_only=True)` is trusted from torch 2.6 on.
Before 2.6 it hands a TorchScript archive to `torch.jit.load`, which runs the
code inside (CVE-2025-32434), so with an older torch a .pt/.pth/.bin file is
refused unless --unsafe-pickle says the file is trusted.  On every version a
TorchScript archive (a zip with `code/` or `constants.pkl` entries) is
refused before anything is loaded: it is a program, not a tensor dump.
"""
import os
import re
import tempfile
import zipfile

# The first torch whose weights_only=True loader does not reach torch.jit.load.
TORCH_SAFE = (2, 6)
# The most bytes one .npz may inflate to (its arrays together).
NPZ_MAX_BYTES = 16 << 30


class BadInput(Exception):
    """One file cannot be read; str() is the one line to print."""


def shown(path):
    """A path as one printable line (a name that is not UTF-8 keeps its bytes as \\xNN)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def torch_version(v):
    """(major, minor) of a torch.__version__ string, (0, 0) when unreadable."""
    m = re.match(r"(\d+)\.(\d+)", str(v))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def check_torch_file(path, unsafe, version):
    """Raises BadInput when `path` must not be handed to torch.load."""
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (OSError, zipfile.BadZipFile, ValueError) as e:
            raise BadInput("'%s': not a readable torch.save file (%s)" % (shown(path), e))
        for n in names:
            inner = n.split("/", 1)[1] if "/" in n else n
            if inner.startswith("code/") or inner == "constants.pkl":
                raise BadInput("'%s': a TorchScript archive (it holds code, '%s'), not a tensor "
                               "dump: refused, loading it would run that code" % (shown(path), n))
    if not unsafe and torch_version(version) < TORCH_SAFE:
        raise BadInput("'%s': torch %s's weights_only loader is not safe (torch < %d.%d can run "
                       "code in the file): --unsafe-pickle loads it, if you trust it, or use "
                       "torch >= %d.%d" % ((shown(path), version) + TORCH_SAFE + TORCH_SAFE))


def check_name(path, name):
    """`name` if it can be a capture name (UTF-8, no NUL), else BadInput."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("'%s': tensor name %s is not valid UTF-8" % (
            shown(path), name.encode("utf-8", "backslashreplace").decode("ascii")))
    if "\0" in name:
        raise BadInput("'%s': tensor name %r holds a NUL character" % (shown(path), name))
    return name


def read_npz(path, limit=NPZ_MAX_BYTES):
    """[(key, array)] of a numpy.savez file, each member's size checked
    against what its .npy header declares and all together against `limit`
    before anything is inflated; members are read no further than declared."""
    import numpy as np
    from numpy.lib import format as npf

    out = []
    total = 0
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            with z.open(info) as f:
                version = npf.read_magic(f)
                header = {(1, 0): npf.read_array_header_1_0,
                          (2, 0): npf.read_array_header_2_0}.get(version)
                shape, fortran, dtype = (header(f) if header is not None
                                         else npf._read_array_header(f, version))
                if dtype.hasobject:
                    raise BadInput("'%s': %s holds Python objects (pickled), which snapshots do "
                                   "not hold" % (shown(path), key))
                count = 1
                for x in shape:
                    count *= x
                nbytes = count * dtype.itemsize
                if nbytes + f.tell() != info.file_size:
                    raise BadInput("'%s': %s declares shape %s %s (%d bytes) but the archive "
                                   "holds %d" % (shown(path), key, shape, dtype, nbytes,
                                                 info.file_size - f.tell()))
                total += nbytes
                if total > limit:
                    raise BadInput("'%s': its arrays inflate to more than %d GiB (%s alone "
                                   "declares %d bytes): refused" % (shown(path), limit >> 30,
                                                                    key, nbytes))
                data = f.read(nbytes)
                if len(data) != nbytes:
                    raise BadInput("'%s': %s is cut short" % (shown(path), key))
            arr = np.frombuffer(data, dtype=dtype)
            arr = arr.reshape(shape[::-1]).transpose() if fortran else arr.reshape(shape)
            out.append((key, arr))
    return out


def check_output(out, inputs):
    """Raises BadInput when `out` is a directory or one of the files read."""
    if os.path.isdir(out):
        raise BadInput("'%s': the output is a directory; give a file name" % shown(out))
    if not os.path.exists(out):
        return
    for path in inputs:
        try:
            same = os.path.samefile(out, path)
        except OSError:
            same = os.path.realpath(out) == os.path.realpath(path)
        if same:
            raise BadInput("'%s': the output is also an input ('%s'): writing it would replace "
                           "what is read; give another -o" % (shown(out), shown(path)))


def temp_dir(out):
    """A private directory (mode 0700, a name no other user can guess or
    plant) beside `out`, for the file written before it is moved into place."""
    d = os.path.dirname(os.path.abspath(out))
    try:
        return tempfile.mkdtemp(prefix=".%s.import-" % os.path.basename(out), dir=d)
    except OSError as e:
        raise BadInput("'%s': cannot write in '%s': %s" % (shown(out), shown(d), e.strerror))
