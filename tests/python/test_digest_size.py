"""What a digest-mode file of a short run spends on HDF5's own structure
(docs/performance.md, "File size"), checked with h5py on files written
through the capture library as a generation writes them: a 16-row prompt,
then 1-row decode steps, 14 names (the fed ids and the produced tokens
kept, 12 layers with inputs), flushed only at the close.  The writer's
file, with ULPPROF_COMPACT=0: the rewrite at the close is
test_digest_compact's.

- The writer's small groups (/run, /env, /observed, /index and every
  /digests/<name>) hold their links in their own header: no symbol-table
  message (an old-style group costs a B-tree node and a local heap even
  when empty, and a 5 KiB symbol-table node at its first link).  The root
  and /captures stay old-style (FORMAT.md "Crash safety").
- The superblock is version 1 with a chunk B-tree K of 2 (bytes 24..25):
  a chunk index node is allocated whole, and most digest datasets have
  one chunk.
- The digests' datasets carry no modification time, and with HDF5 1.10.5
  or later a header sized to its messages (HDF5 gives a dataset header at
  least 256 bytes of messages otherwise: 272 with its prefix).
- Opened in digest mode (the mode given at the open, as
  `ulpprof.torch.capture(mode="digest")` gives it), the file is made for
  digests: symbol-table leaf K 8 (a root node of 648 bytes, not 5 KiB) and
  a 512-byte /captures heap (not 8 KiB); with the mode set after the
  open, K 64, the same digests, and a file larger by at least those
  structures' bytes.
- Size: the file of a 32-step run is at most 64 KiB (96 KiB with an
  HDF5 before 1.10.5), and 96 more steps add at most 300 bytes a step
  and one metadata block (14 names: about 370 bytes a step, the digests'
  8 bytes a row, the compressed occurrences and the kept captures'
  journal records; HDF5 takes metadata in the writer's 32 KiB blocks, so
  a file grows by a block at a time).  A
  run of the same captures in data mode is larger.
- h5py reads every object of the file; `ulpprof ls` lists the kept
  captures.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import h5py
import numpy as np

# The writer's file, as it is until its close rewrites it (test_digest_compact).
os.environ["ULPPROF_COMPACT"] = "0"
BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
from ulpprof import _lib  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_run  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
PROMPT = 16
LAYERS = 12
HIDDEN = 64
DATA_LEAF_K, DIGEST_LEAF_K = 64, 8  # symbol-table leaf K (superblock bytes 16..17)
SYMBOL_TABLE = 1 << 0x11  # H5O_hdr_info_t.mesg.present bit of the symbol-table message
MTIME = 1 << 0x12  # ... and of the modification time
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)
    return cond


def write(path, mode, steps, at_open=True):
    """A prompt and `steps` - 1 decode steps, one request; the mode given
    at the open (as ulpprof.torch.capture(mode=...) gives it), or set after."""
    if at_open:
        s = _lib.Session(path, label="size", mode=mode)
    else:
        s = _lib.Session(path, label="size")
        s.set_capture_mode(mode)
    decode_run.write(s, steps, PROMPT, LAYERS, HIDDEN)
    check(s.close() == 0, "%s: close" % path)
    return os.path.getsize(path)


def info(obj):
    return h5py.h5o.get_info(obj.id).hdr


def structure(path, leaf_k=DIGEST_LEAF_K):
    with open(path, "rb") as fh:
        head = fh.read(28)
    check(head[8] == 1 and struct.unpack_from("<H", head, 24)[0] == 2,
          "%s: superblock version %d, chunk B-tree K %d: want 1 and 2"
          % (path, head[8], struct.unpack_from("<H", head, 24)[0]))
    check(struct.unpack_from("<H", head, 16)[0] == leaf_k,
          "%s: symbol-table leaf K %d, want %d" % (path, struct.unpack_from("<H", head, 16)[0],
                                                  leaf_k))
    with h5py.File(path, "r") as f:
        for name in ("/", "captures"):
            check(info(f[name]).mesg.present & SYMBOL_TABLE,
                  "%s: %s is not an old-style group" % (path, name))
        small = ["run", "env", "index"] + ["digests/" + n for n in f["digests"]]
        for name in small:
            check(name in f and not info(f[name]).mesg.present & SYMBOL_TABLE,
                  "%s: %s has a symbol table (or is missing)" % (path, name))
        minimized = h5py.version.hdf5_version_tuple >= (1, 10, 5)
        for n in f["digests"]:
            for d in f["digests"][n].values():
                h = info(d)
                check(not h.mesg.present & MTIME, "%s: %s has a modification time" % (path, d.name))
                # Sized to its messages: no room left over (HDF5's default
                # leaves 256 bytes of messages, most of them free).
                check(not minimized or h.space.free < 32,
                      "%s: %s's header takes %d bytes, %d free" % (
                          path, d.name, h.space.total, h.space.free))
        # every object reads
        seen = []
        f.visititems(lambda name, o: seen.append(o[()] if isinstance(o, h5py.Dataset) else name))
    r = subprocess.run([ULPPROF, "ls", "--json", path], capture_output=True, text=True,
                       timeout=120)
    if check(r.returncode == 0, "ls %s: exit %d %s" % (path, r.returncode, r.stderr)):
        names = {c["name"] for c in json.loads(r.stdout)[0]["captures"]}
        check(names == {"input_ids", "tokens"}, "ls %s: captures %r" % (path, sorted(names)))


def same_digests(a, b):
    """The two files' /digests hold the same rows (their times aside)."""
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        check(sorted(fa["digests"]) == sorted(fb["digests"]), "%s, %s: names differ" % (a, b))
        for n in fa["digests"]:
            for k in ("digest", "position", "request"):
                check(np.array_equal(fa["digests"][n][k][()], fb["digests"][n][k][()]),
                      "%s, %s: %s/%s differ" % (a, b, n, k))


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-digest-size-")
    size = {}
    for steps in (32, 128):
        path = os.path.join(tmp, "digest-%d.h5" % steps)
        size[steps] = write(path, "digest", steps)
        structure(path)
    data = write(os.path.join(tmp, "data-32.h5"), "data", 32)
    per_step = (size[128] - size[32]) / 96.0
    print("digest file: 32 steps %d B, 128 steps %d B (%.0f B a step); data file, 32 steps: %d B"
          % (size[32], size[128], per_step, data))
    # The mode set after the open: the file was made for data (a root
    # symbol-table node of 2 x 64 entries, an 8 KiB /captures heap).
    late = os.path.join(tmp, "digest-32-late.h5")
    late_size = write(late, "digest", 32, at_open=False)
    structure(late, DATA_LEAF_K)
    same_digests(os.path.join(tmp, "digest-32.h5"), late)
    saved = (8192 - 512) + 2 * (DATA_LEAF_K - DIGEST_LEAF_K) * 40
    print("mode set after the open: %d B (%d B more; the structures alone: %d)"
          % (late_size, late_size - size[32], saved))
    check(late_size - size[32] >= saved,
          "mode at the open saves %d bytes, want at least %d" % (late_size - size[32], saved))
    bound = (64 if h5py.version.hdf5_version_tuple >= (1, 10, 5) else 96) << 10
    check(size[32] <= bound, "32 steps: %d bytes, want at most %d" % (size[32], bound))
    check(size[128] - size[32] <= 96 * 300 + (32 << 10),
          "96 more steps add %d bytes, want at most %d" % (size[128] - size[32],
                                                           96 * 300 + (32 << 10)))
    check(data > size[32], "data file %d bytes, digest file %d" % (data, size[32]))
    if fails:
        print("%d failure(s)" % len(fails))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
