"""What every byte of a snapshot is, by kind: a byte map of an HDF5 file of
the earliest format (superblock 0 or 1, version 1 object headers, 8-byte
offsets), as `docs/performance.md` ("File size") accounts for a digest
file.  Walks the objects from the root's symbol-table entry and from h5py's
addresses: object headers and their continuations, old-style groups' B-tree
nodes, symbol-table nodes and local heaps, chunk B-tree nodes and chunks,
contiguous data; the rest (a dense group's fractal heap and v2 B-tree
blocks, global heap collections) found by signature, and what is left is
unused: zeros inside HDF5's end of allocation (most of it the unused end of
a metadata block), or past it (the open map).

    tests/perf/h5_bytes.py FILE [-v]   (-v: every object and gap)

A diagnostic, not a reader: it trusts the file.
"""
import struct
import sys
from collections import defaultdict

import h5py
path = sys.argv[1]
verbose = "-v" in sys.argv
data = open(path, "rb").read()
ext = []  # (start, size, kind, what)


def add(a, n, kind, what):
    ext.append((a, n, kind, what))


def u(fmt, off):
    return struct.unpack_from("<" + fmt, data, off)


ver = data[8]
sa, sl = data[13], data[14]
assert sa == 8 and sl == 8
leafk, intk = u("HH", 16)
off = 24
istk = 32
if ver == 1:
    istk = u("H", off)[0]
    off += 4
base, fsi, eoa, drv = u("QQQQ", off)
off += 32
root_entry = off
sb_size = off + 40
add(0, sb_size, "superblock", "v%d" % ver)
root_hdr = u("Q", root_entry + 8)[0]
print("superblock v%d, sym leaf K %d, internal K %d, istore K %d, EOA %d, file %d"
      % (ver, leafk, intk, istk, eoa, len(data)))

seen = set()
gbtree = 24 + 2 * intk * 8 + (2 * intk + 1) * 8
snod = 8 + 2 * leafk * 40


def heap(a, what):
    sig = data[a:a + 4]
    assert sig == b"HEAP", sig
    dsz, _, daddr = u("QQQ", a + 8)
    if daddr == a + 32:
        add(a, 32 + dsz, "local heap", what)
    else:
        add(a, 32, "local heap", what)
        add(daddr, dsz, "local heap", what + " data")
    return daddr


def gtree(a, hp, what):
    assert data[a:a + 4] == b"TREE", (a, data[a:a + 4])
    lev, n = data[a + 5], u("H", a + 6)[0]
    add(a, gbtree, "group B-tree", what)
    p = a + 24 + 8
    for i in range(n):
        child = u("Q", p)[0]
        p += 16
        if lev > 0:
            gtree(child, hp, what)
        else:
            assert data[child:child + 4] == b"SNOD"
            add(child, snod, "group SNOD", what)
            cnt = u("H", child + 6)[0]
            for j in range(cnt):
                e = child + 8 + 40 * j
                no, oh = u("QQ", e)
                nm = data[hp + no:data.index(b"\0", hp + no)].decode()
                obj(oh, what.rstrip("/") + "/" + nm)


def ctree(a, rank, what):
    assert data[a:a + 4] == b"TREE", (a, data[a:a + 4])
    lev, n = data[a + 5], u("H", a + 6)[0]
    ks = 8 + 8 * (rank + 1)
    add(a, 24 + 2 * istk * 8 + (2 * istk + 1) * ks, "chunk B-tree", what)
    p = a + 24
    for i in range(n):
        csz = u("I", p)[0]
        child = u("Q", p + ks)[0]
        p += ks + 8
        if lev > 0:
            ctree(child, rank, what)
        else:
            add(child, csz, "raw", what + " chunk")


def obj(a, what):
    if a in seen:
        return
    seen.add(a)
    assert data[a] == 1, (what, a, data[a])
    size = u("I", a + 8)[0]
    chunks = [(a + 16, size)]
    add(a, 16 + size, "object header", what)
    kind = "?"
    unused = 0
    i = 0
    msgs = []
    while i < len(chunks):
        c, n = chunks[i]
        p = c
        while p + 8 <= c + n:
            t, s, fl = u("HHB", p)
            d = p + 8
            msgs.append(t)
            if t == 0:
                unused += 8 + s
            elif t == 0x10:
                ca, cn = u("QQ", d)
                chunks.append((ca, cn))
                add(ca, cn, "object header", what + " (continuation)")
            elif t == 0x11:
                kind = "group (old)"
                bt, hp = u("QQ", d)
                hd = heap(hp, what + " names")
                gtree(bt, hd, what)
            elif t == 0x02:
                kind = "group (new)"
                f = data[d + 1]
                q = d + 2 + (8 if f & 1 else 0)
                fh, bt = u("QQ", q)
                if fh != 0xFFFFFFFFFFFFFFFF:
                    print("  dense group", what, "FRHP at", fh, "name index", bt)
            elif t == 0x06:
                f = data[d + 1]
                q = d + 2
                lt = 0
                if f & 8:
                    lt = data[q]
                    q += 1
                if f & 4:
                    q += 8
                if f & 0x10:
                    q += 1
                ls = 1 << (f & 3)
                ln = int.from_bytes(data[q:q + ls], "little")
                q += ls
                name = data[q:q + ln].decode()
                q += ln
                if lt == 0:
                    obj(u("Q", q)[0], what.rstrip("/") + "/" + name)
            elif t == 0x08:
                cls = data[d + 1]
                if cls == 1:
                    kind = "dataset contiguous"
                    ra, rs = u("QQ", d + 2)
                    if ra != 0xFFFFFFFFFFFFFFFF:
                        add(ra, rs, "raw", what)
                elif cls == 2:
                    kind = "dataset chunked"
                    rank = data[d + 2] - 1
                    bt = u("Q", d + 3)[0]
                    if bt != 0xFFFFFFFFFFFFFFFF:
                        ctree(bt, rank, what)
                elif cls == 0:
                    kind = "dataset compact"
            elif t == 0x03 and fl & 2:
                sv = data[d]
                ta = u("Q", d + (8 if sv == 1 else 2))[0]
                obj(ta, "committed type")
            p = d + s
        i += 1
    if kind == "?" and 0x03 in msgs:
        kind = "committed type"
    hdrs.append((what, kind, a, 16 + size, unused, [hex(m) for m in msgs]))


hdrs = []
obj(root_hdr, "/")
with h5py.File(path, "r") as hf:
    def visit(name, o):
        obj(h5py.h5o.get_info(o.id).addr, "/" + name)
    hf.visititems(visit)

# global heap collections and fractal heap / v2 B-tree blocks: found by signature in the gaps
ext.sort()
gaps = []
cur = 0
for a, n, _, _ in ext:
    if a > cur:
        gaps.append((cur, a - cur))
    cur = max(cur, a + n)
if cur < len(data):
    gaps.append((cur, len(data) - cur))
SIGS = (b"FRHP", b"FHDB", b"FHIB", b"BTHD", b"BTLF", b"BTIN", b"FSHD", b"FSSE")
block = 0
for g, n in gaps:
    # signatures inside the gap
    p = g
    while p < g + n:
        sig = data[p:p + 4]
        if sig == b"GCOL":
            cs = u("Q", p + 8)[0]
            add(p, cs, "global heap", "collection")
            p += cs
            continue
        if sig in SIGS:
            # up to the next known extent or signature; a direct block of a fractal heap
            # has its heap's starting block size (a dense group's few links: one block)
            q = p + 4
            while q < g + n and data[q:q + 4] not in SIGS + (b"GCOL",):
                q += 1
            if sig == b"FRHP":
                block = u("Q", p + 112)[0]
            elif sig == b"FHDB" and block:
                q = min(q, p + block)
            add(p, q - p, "new-style group " + sig.decode(), "")
            p = q
            continue
        p += 1
ext.sort()
cur = 0
free = []
for a, n, k, w in ext:
    if a > cur:
        free.append((cur, a - cur))
    cur = max(cur, a + n)
if cur < len(data):
    free.append((cur, len(data) - cur))

tot = defaultdict(int)
cnt = defaultdict(int)
for a, n, k, w in ext:
    tot[k] += n
    cnt[k] += 1
for a, n in free:
    if a >= eoa:
        k = "past EOA (open map)"
    else:
        # all zero?
        k = "unused (zeros)" if data[a:a + n].count(0) == n else "unused (stale bytes)"
    tot[k] += n
    cnt[k] += 1
    if verbose:
        print("  gap", a, n, k, "last metadata block?" if a + n == eoa else "")
print("%-30s %8s %5s" % ("kind", "bytes", "count"))
for k in sorted(tot, key=lambda k: -tot[k]):
    print("%-30s %8d %5d" % (k, tot[k], cnt[k]))
print("%-30s %8d" % ("total", sum(tot.values())))
ou = sum(h[4] for h in hdrs)
print("object headers' unused messages (NIL), in all their chunks: %d" % ou)
if verbose:
    for h in hdrs:
        print("  %-45s %-20s @%-7d %5d B, %4d unused %s" % (h[0][-45:], h[1], h[2], h[3], h[4],
                                                            " ".join(h[5])))
    for a, n, k, w in ext:
        if k not in ("object header",):
            print("  %7d %6d %-22s %s" % (a, n, k, w))
