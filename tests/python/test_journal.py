#!/usr/bin/python3
"""The capture journal (format/journal.h, FORMAT.md "Capture journal"), read
by a parser written here with struct and zlib.crc32 alone, and the reader's
policy for files its writer did not close and for damaged journals.

  A. Layout: files of capture_loop (6 captures; 300, whose 4 KiB first block
     overflows into a chain) parsed from their raw bytes, starting where
     h5py says /journal lies: one record per capture of /captures, in seq
     order, with its seq, name, occurrence and object-header address
     (h5py.h5o.get_info); the chain of blocks as the writer's growth rule
     predicts from the parsed record sizes; the closed mark.
  B. Unclosed files (closed mark zeroed; a writer really SIGKILLed): `ulpprof
     ls` reads them through the journal with exactly one warning line, lists
     what h5py lists, and `ulpprof diff` against the closed file says every
     capture is identical.
  C. Damaged journals: a torn record ends the walk there; a record that
     names something other than its capture, or a broken chain of blocks,
     makes the reader fall back to the groups; a closed file whose /captures
     B-tree is broken is read through its journal with a warning, and is
     refused (exit 2, one line) when its journal is broken too.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

# The layout of format/journal.h, written out here.
MAGIC = b"ULPJRNL1"          # the first block
MAGIC_LATER = b"ULPJRNL+"    # the blocks next records lead to
HEADER = 32
FIXED = 40
CLOSED_AT = 28
KIND_CAPTURE, KIND_NEXT = 1, 2
# The writer's growth rule (format/writer_journal.c): each block after the first
# is a quarter of the blocks before it, at least 4 KiB and up to 1 MiB; a record
# goes into the current block when it, the 8-byte end mark and room for a
# next-block record still fit.
MIN_BLOCK = 4 << 10
MAX_BLOCK = 1 << 20
END_MARK = 8
RESERVE = FIXED + END_MARK

ELEMENTS, NAMES = 16, 7
LS_TIMEOUT = 30


def rec_len(name_len):
    raw = FIXED + name_len
    return raw + (-raw) % 8


def journal_offset(path):
    with h5py.File(path, "r") as f:
        d = f["journal"]
        return d.id.get_offset(), d.shape, d.dtype


def parse_journal(data, first):
    """Walks the journal of the file bytes `data` from the block at `first`.
    Returns {"blocks": [...], "records": [...], "end": why the walk ended}.
    A block is {"off", "size", "used", "mark"}; a record {"off", "len",
    "kind", "seq", "occ", "addr", "name", "block"}."""
    blocks, records = [], []
    off, want_size, end = first, None, None
    while end is None:
        if any(b["off"] == off for b in blocks) or len(blocks) > 64:
            end = "chain loops"
            break
        if off < 0 or off + HEADER > len(data):
            end = "block outside the file"
            break
        magic, self_off, size, crc = struct.unpack_from("<8sQQI", data, off)
        if (magic != (MAGIC if not blocks else MAGIC_LATER) or self_off != off or crc != zlib.crc32(data[off:off + 24])
                or size < HEADER + FIXED or (want_size is not None and size != want_size)):
            end = "bad block header"
            break
        blk = {"off": off, "size": size, "used": HEADER, "mark": data[off + CLOSED_AT:off + 32]}
        blocks.append(blk)
        pos, stop = off + HEADER, min(off + size, len(data))
        nxt = None
        while True:
            if stop - pos < FIXED:
                end = "block full"
                break
            crc, length, kind, name_len = struct.unpack_from("<IIII", data, pos)
            if length == 0:
                end = "end mark"
                break
            if (length < FIXED or length % 8 or length > stop - pos or rec_len(name_len) != length
                    or crc != zlib.crc32(data[pos + 4:pos + length])):
                end = "bad record at %d" % pos
                break
            seq, occ, addr = struct.unpack_from("<qqQ", data, pos + 16)
            name = data[pos + FIXED:pos + FIXED + name_len]
            pad = data[pos + FIXED + name_len:pos + length]
            check(pad == bytes(len(pad)), "record at %d: padding %r" % (pos, pad))
            r = {"off": pos, "len": length, "kind": kind, "seq": seq, "occ": occ, "addr": addr,
                 "name": name.decode("utf-8", "replace"), "block": len(blocks) - 1}
            blk["used"] = pos + length - off
            if kind == KIND_NEXT:
                nxt = r
                break
            records.append(r)
            pos += length
        if nxt is None:
            break
        blk["next"] = nxt
        off, want_size = nxt["addr"], nxt["occ"]
    return {"blocks": blocks, "records": records, "end": end}


def expected_blocks(lengths, first_size):
    """Record counts and sizes of the blocks that the writer's growth rule
    gives for capture records of these lengths."""
    counts, sizes = [0], [first_size]
    used = HEADER
    for ln in lengths:
        if used + ln + END_MARK + RESERVE > sizes[-1]:
            size = max(min(max(sum(sizes) // 4, MIN_BLOCK), MAX_BLOCK),
                       HEADER + ln + END_MARK + RESERVE)
            sizes.append(size)
            counts.append(0)
            used = HEADER
        used += ln
        counts[-1] += 1
    return counts, sizes


def h5_index(path):
    """[(seq, name, occurrence, object header address)] of /captures, by h5py."""
    out = []
    with h5py.File(path, "r") as f:
        for name in f["captures"]:
            for occ in f["captures"][name]:
                d = f["captures"][name][occ]
                out.append((int(d.attrs["seq"]), name, int(occ), h5py.h5o.get_info(d.id).addr))
    return sorted(out)


def make_loop(path, count):
    r = rc.run([rc.LOOP, "--out", path, "--count", str(count), "--elements", str(ELEMENTS),
                "--names", str(NAMES)])
    check(r.returncode == 0 and "close=ULP_OK" in r.stdout,
          "capture_loop --count %d: exit %d, %r %r" % (count, r.returncode, r.stdout[-200:], r.stderr))


def read(path):
    with open(path, "rb") as fh:
        return fh.read()


def patch(src, dst, edits):
    """Copies src to dst with edits [(offset, bytes)] applied."""
    data = bytearray(read(src))
    for off, b in edits:
        data[off:off + len(b)] = b
    with open(dst, "wb") as fh:
        fh.write(data)


def resealed(data, r, **fields):
    """The bytes of record r of `data` with fields (seq, occ, addr) replaced
    and its CRC recomputed, so that only those fields are wrong."""
    rec = bytearray(data[r["off"]:r["off"] + r["len"]])
    for name, at, fmt in (("seq", 16, "<q"), ("occ", 24, "<q"), ("addr", 32, "<Q")):
        if name in fields:
            struct.pack_into(fmt, rec, at, fields[name])
    struct.pack_into("<I", rec, 0, zlib.crc32(bytes(rec[4:])))
    return bytes(rec)


def unclosed_copy(src, dst):
    off = journal_offset(src)[0]
    patch(src, dst, [(off + CLOSED_AT, bytes(4))])


# ---- running ulpprof -----------------------------------------------------------------------

def ulpprof(args, tag):
    """ulpprof with a time limit: a reader that loops is a failure, not a hang."""
    try:
        return rc.ulpprof(args, timeout=LS_TIMEOUT)
    except subprocess.TimeoutExpired:
        check(False, "%s: ulpprof %s did not finish in %d s" % (tag, " ".join(args), LS_TIMEOUT))
        return None


def ls_caps(path, tag):
    """(exit status, [(seq, name, occ, dtype, shape)] or None, stderr lines)."""
    r = ulpprof(["ls", "--json", path], tag)
    if r is None:
        return None, None, []
    caps = None
    if r.returncode == 0:
        j = json.loads(r.stdout)[0]
        caps = [(c["seq"], c["name"], c["occurrence"], c["dtype"], tuple(c["shape"]))
                for c in j["captures"]]
        check(j["warning"] is None or isinstance(j["warning"], str), "%s: warning %r" % (tag, j))
    return r.returncode, caps, r.stderr.splitlines()


def warned_count(lines, path, what):
    """N of the single stderr line "ulpprof: warning: '<path>': <what>: N
    captures read through the capture journal", or None."""
    if len(lines) != 1:
        return None
    m = re.fullmatch(r"ulpprof: warning: '%s': %s: (\d+) captures? read through the capture journal"
                     r" \(for other HDF5 tools: ulpprof repair '%s' COPY\.h5\)"
                     % (re.escape(path), what, re.escape(path)), lines[0])
    return int(m.group(1)) if m else None


KILLED = re.escape("its writer did not close it (killed?)")
DAMAGED = re.escape("the capture index is damaged (") + r".+\)"


def expect_journal_read(path, want, tag):
    """ls reads `path` through its journal: exit 0, exactly the warning line
    with N = len(want), and the captures `want`."""
    st, caps, lines = ls_caps(path, tag)
    check(st == 0, "%s: ls exit %r, stderr %r" % (tag, st, lines))
    n = warned_count(lines, path, KILLED)
    check(n == len(want), "%s: stderr %r, want one warning naming %d captures" % (tag, lines, len(want)))
    check(caps == want, "%s: ls lists %d captures (%r...), want %d"
          % (tag, len(caps or []), (caps or [])[:3], len(want)))


def expect_groups_read(path, want, tag):
    """ls falls back to the /captures groups: exit 0, every capture, and no
    warning about the journal (the captures were not read through it)."""
    st, caps, lines = ls_caps(path, tag)
    check(st == 0, "%s: ls exit %r, stderr %r" % (tag, st, lines))
    check(lines == [], "%s: stderr %r, want none (read through the groups)" % (tag, lines))
    check(caps == want, "%s: ls lists %d captures, want all %d" % (tag, len(caps or []), len(want)))


def expect_refused(path, tag):
    st, caps, lines = ls_caps(path, tag)
    check(st == 2, "%s: ls exit %r, want 2 (stderr %r)" % (tag, st, lines))
    check(len(lines) == 1 and lines[0].startswith("ulpprof: ") and "'%s'" % path in lines[0]
          and "warning" not in lines[0],
          "%s: stderr %r, want one error line naming the file" % (tag, lines))


# ---- A: the layout -------------------------------------------------------------------------

def check_layout(path, count, tag, closed=True):
    """Parses the journal of a capture_loop file of `count` captures and checks
    it against h5py.  Returns the parse."""
    off, shape, dtype = journal_offset(path)
    check(shape == (4096,) and dtype == "uint8", "%s: /journal is %r %s" % (tag, shape, dtype))
    data = read(path)
    j = parse_journal(data, off)
    blocks, recs = j["blocks"], j["records"]
    check(j["end"] == "end mark", "%s: the walk ended with %r, want the end mark" % (tag, j["end"]))
    check(len(blocks) >= 1 and blocks[0]["size"] == shape[0],
          "%s: first block %r, /journal holds %r bytes" % (tag, blocks[:1], shape))
    want_mark = b"CLSD" if closed else bytes(4)
    check(blocks and blocks[0]["mark"] == want_mark,
          "%s: closed mark %r, want %r" % (tag, blocks and blocks[0]["mark"], want_mark))
    for b in blocks[1:]:
        check(b["mark"] == bytes(4), "%s: block at %d has a mark %r" % (tag, b["off"], b["mark"]))

    # One record per capture, in seq order, naming its object header.
    idx = h5_index(path)
    check(len(idx) == count, "%s: h5py sees %d captures, want %d" % (tag, len(idx), count))
    got = [(r["seq"], r["name"], r["occ"], r["addr"]) for r in recs]
    check(all(r["kind"] == KIND_CAPTURE for r in recs), "%s: record kinds %r"
          % (tag, sorted({r["kind"] for r in recs})))
    check(got == idx, "%s: journal %r... != h5py %r... (%d vs %d records)"
          % (tag, got[:3], idx[:3], len(got), len(idx)))
    check([r["seq"] for r in recs] == list(range(count)), "%s: record seqs out of order" % tag)
    check(len({r["addr"] for r in recs}) == len(recs), "%s: two records name one object" % tag)

    # The chain: what the growth rule gives for these record sizes.
    counts, sizes = expected_blocks([r["len"] for r in recs], blocks[0]["size"] if blocks else 4096)
    per_block = [sum(1 for r in recs if r["block"] == i) for i in range(len(blocks))]
    check(per_block == counts and [b["size"] for b in blocks] == sizes,
          "%s: blocks hold %r records, sizes %r; the growth rule gives %r, %r"
          % (tag, per_block, [b["size"] for b in blocks], counts, sizes))
    for i, b in enumerate(blocks):
        check(b["off"] + b["size"] <= len(data), "%s: block %d runs past the end" % (tag, i))
        if i + 1 < len(blocks):
            n = b["next"]
            check(n["seq"] == 0 and n["name"] == "" and n["occ"] == blocks[i + 1]["size"]
                  and n["addr"] == blocks[i + 1]["off"],
                  "%s: next record of block %d is %r" % (tag, i, n))
            check(b["used"] + END_MARK <= b["size"], "%s: block %d overfull" % (tag, i))
        for o in blocks[:i]:
            check(b["off"] >= o["off"] + o["size"] or b["off"] + b["size"] <= o["off"],
                  "%s: blocks at %d and %d overlap" % (tag, o["off"], b["off"]))
        # Journal blocks hold no capture's object header.
        check(not any(b["off"] <= a < b["off"] + b["size"] for a in (x[3] for x in idx)),
              "%s: a capture header lies inside block %d" % (tag, i))
    return j


def part_a(tmp):
    small, big = os.path.join(tmp, "c6.h5"), os.path.join(tmp, "c300.h5")
    make_loop(small, 6)
    make_loop(big, 300)
    j6 = check_layout(small, 6, "A c6")
    check(len(j6["blocks"]) == 1, "A c6: %d blocks, want 1" % len(j6["blocks"]))
    j300 = check_layout(big, 300, "A c300")
    check(len(j300["blocks"]) >= 2, "A c300: %d blocks, want a chain" % len(j300["blocks"]))
    # The parser itself: a torn record ends the walk there.
    data = bytearray(read(big))
    r = j300["records"][100]
    data[r["off"] + FIXED] ^= 0x01
    j = parse_journal(bytes(data), journal_offset(big)[0])
    check(len(j["records"]) == 100 and j["end"] == "bad record at %d" % r["off"],
          "A parser: a torn record 100 gives %d records, %r" % (len(j["records"]), j["end"]))
    return small, big, j300


# ---- B: unclosed files ---------------------------------------------------------------------

def part_b(tmp, big):
    uncl = os.path.join(tmp, "unclosed.h5")
    unclosed_copy(big, uncl)
    check_layout(uncl, 300, "B unclosed", closed=False)
    want = rc.h5_captures(big)
    check(rc.h5_captures(uncl) == want, "B: h5py reads the unclosed copy differently")
    expect_journal_read(uncl, want, "B unclosed ls")
    # The closed original has no warning.
    st, caps, lines = ls_caps(big, "B closed ls")
    check(st == 0 and caps == want and lines == [], "B closed ls: exit %r, stderr %r, %d captures"
          % (st, lines, len(caps or [])))

    r = ulpprof(["diff", "--format", "json", uncl, big], "B diff")
    if r is not None:
        check(r.returncode == 0, "B diff: exit %d, stderr %r" % (r.returncode, r.stderr))
        check(warned_count(r.stderr.splitlines(), uncl, KILLED) == 300,
              "B diff: stderr %r, want one warning about the unclosed file" % r.stderr)
        if r.returncode in (0, 1):
            rows = json.loads(r.stdout)["rows"]
            st = [row["status"] for row in rows]
            check(len(st) == 300 and st.count("identical") == 300,
                  "B diff: %d rows, %d identical, want 300 of 300" % (len(st), st.count("identical")))

    # A writer really killed, in the journal's second block.
    killed = os.path.join(tmp, "killed.h5")
    rc.kill_after_line([rc.LOOP, "--out", killed, "--count", "400", "--elements", str(ELEMENTS),
                     "--names", str(NAMES), "--flush-each", "--report"], "flushed 150", "B kill")
    data = read(killed)
    j = parse_journal(data, journal_offset(killed)[0])
    n = len(j["records"])
    check(j["blocks"] and j["blocks"][0]["mark"] == bytes(4), "B killed: closed mark %r"
          % (j["blocks"] and j["blocks"][0]["mark"]))
    # A kill inside the last pwrite may tear that record: it ends the walk too.
    check((j["end"] == "end mark" or j["end"].startswith("bad record")) and n >= 151
          and len(j["blocks"]) >= 2,
          "B killed: journal of %d records in %d blocks, ended by %r"
          % (n, len(j["blocks"]), j["end"]))
    idx = h5_index(killed)
    got = [(r["seq"], r["name"], r["occ"], r["addr"]) for r in j["records"]]
    # The journal names a capture before its group does: at most one more.
    check(got[:len(idx)] == idx and n - len(idx) in (0, 1),
          "B killed: journal names %d captures, h5py %d, or they differ" % (n, len(idx)))
    h5 = rc.h5_captures(killed)
    st, caps, lines = ls_caps(killed, "B killed ls")
    check(st == 0 and caps is not None and len(caps) == n and caps[:len(h5)] == h5,
          "B killed ls: exit %r, %d captures, journal %d, h5py %d"
          % (st, len(caps or []), n, len(h5)))
    check(warned_count(lines, killed, KILLED) == n, "B killed ls: stderr %r" % lines)
    # Its captures are those of the closed file of the same program.
    check(caps is not None and caps == want[:len(caps)], "B killed: captures differ from the run's")


# ---- C: damaged journals -------------------------------------------------------------------

def captures_btree(path):
    """File offset of the /captures group's B-tree, from its object header's
    symbol-table message (HDF5 file format, version 1 object header)."""
    with h5py.File(path, "r") as f:
        oh = h5py.h5o.get_info(f["captures"].id).addr
    data = read(path)
    version, _, nmsg, _, size = struct.unpack_from("<BBHII", data, oh)
    if not check(version == 1, "C: /captures has a version %d object header" % version):
        return None
    pos, end = oh + 16, oh + 16 + size
    for _ in range(nmsg):
        mtype, msize = struct.unpack_from("<HH", data, pos)
        if mtype == 0x11:  # symbol table: B-tree address, local heap address
            btree = struct.unpack_from("<Q", data, pos + 8)[0]
            check(data[btree:btree + 4] == b"TREE", "C: no B-tree node at %d" % btree)
            return btree
        pos += 8 + msize
        if pos >= end:
            break
    check(False, "C: /captures has no symbol-table message")
    return None


def part_c(tmp, big, jbig):
    want = rc.h5_captures(big)
    n = len(want)
    uncl = os.path.join(tmp, "unclosed.h5")
    data = read(uncl)
    recs, blocks = jbig["records"], jbig["blocks"]
    with h5py.File(big, "r") as f:
        group_addr = h5py.h5o.get_info(f["captures"]["t.3"].id).addr

    def case(tag, edits):
        p = os.path.join(tmp, re.sub(r"[^A-Za-z0-9]+", "_", tag) + ".h5")
        patch(uncl, p, edits)
        return p

    # A torn record (its CRC no longer matches) in the middle ends the walk
    # there: the records before it are read, with the warning, and the
    # captures after it are not -- the journal cannot tell a torn last write
    # from a damaged middle, and a killed writer's last write is the torn one.
    for k in (40, 150):
        r = recs[k]
        p = case("torn %d" % k, [(r["off"], struct.pack("<I", struct.unpack_from("<I", data, r["off"])[0] ^ 0x80))])
        expect_journal_read(p, want[:k], "C torn record %d of %d" % (k, n))

    # A record that names something other than its dataset: the groups.
    r = recs[100]
    p = case("addr group", [(r["off"], resealed(data, r, addr=group_addr))])
    expect_groups_read(p, want, "C record -> a group's header")
    p = case("addr zero", [(r["off"], resealed(data, r, addr=0))])
    expect_groups_read(p, want, "C record -> byte 0")
    p = case("addr other", [(r["off"], resealed(data, r, addr=recs[101]["addr"]))])
    expect_groups_read(p, want, "C record -> the next capture's header")
    p = case("seq", [(r["off"], resealed(data, r, seq=r["seq"] + 1000))])
    expect_groups_read(p, want, "C record with a wrong seq")
    # Two valid records naming one capture (each reads back alone): the
    # journal names a capture twice, which groups cannot; the groups.
    r2 = recs[101]
    if check(r2["len"] == r["len"], "C: records 100 and 101 differ in length"):
        p = case("twice", [(r2["off"], data[r["off"]:r["off"] + r["len"]])])
        expect_groups_read(p, want, "C a capture named twice")

    # A broken chain: the walk stops (the time limit says it does not loop)
    # and the groups are read.
    nxt = blocks[0]["next"]
    # (address, block size) that the first block's next record is given.
    bad_next = {
        "next -> itself": (nxt["off"], nxt["occ"]),
        "next -> garbage": (0x0DEADBEEF000, nxt["occ"]),
        "next -> byte 0": (0, nxt["occ"]),
        "next -> a capture header": (recs[5]["addr"], nxt["occ"]),
        "next -> the right block, wrong size": (nxt["addr"], nxt["occ"] * 2),
        # A valid header, the wrong size: refused before it loops.
        "next -> its own block, wrong size": (blocks[0]["off"], nxt["occ"]),
        # A valid header of the right size: the chain loops.
        "next -> its own block": (blocks[0]["off"], blocks[0]["size"]),
    }
    for tag, (addr, size) in bad_next.items():
        p = case(tag, [(nxt["off"], resealed(data, nxt, addr=addr, occ=size))])
        expect_groups_read(p, want, "C " + tag)
    if check(len(blocks) >= 3, "C: %d journal blocks, want 3 for the loop case" % len(blocks)):
        nxt2 = blocks[1]["next"]
        p = case("next loops", [(nxt2["off"], resealed(data, nxt2, addr=blocks[0]["off"],
                                                       occ=blocks[0]["size"]))])
        expect_groups_read(p, want, "C second block's next -> the first block")

    # The first block's header broken: the journal's start is lost, and what
    # follows it cannot stand for the whole journal; the groups are read.
    hdr_crc = [(blocks[0]["off"] + 24, bytes(4))]
    p = case("first header", hdr_crc)
    expect_groups_read(p, want, "C unclosed, first block header broken")
    p = os.path.join(tmp, "closed_first_header.h5")
    patch(big, p, hdr_crc)
    expect_groups_read(p, want, "C closed, first block header broken")

    # A closed file whose /captures cannot be listed: its journal is the index.
    btree = captures_btree(big)
    if btree is None:
        return None
    dmg = os.path.join(tmp, "damaged_index.h5")
    patch(big, dmg, [(btree, b"XXXX")])
    try:
        h5 = rc.h5_captures(dmg)
        check(False, "C damaged index: h5py still lists %d captures" % len(h5))
    except Exception:  # noqa: BLE001 - the damage is what we want
        pass
    st, caps, lines = ls_caps(dmg, "C damaged index")
    check(st == 0 and caps == want, "C damaged index: exit %r, %d captures (stderr %r)"
          % (st, len(caps or []), lines))
    check(warned_count(lines, dmg, DAMAGED) == n,
          "C damaged index: stderr %r, want one 'capture index is damaged' warning" % lines)

    # ... and refused when the journal is damaged too.
    for tag, edits in (
            ("record -> a group", [(r["off"], resealed(data, r, addr=group_addr))]),
            ("first record torn", [(recs[0]["off"], b"\0\0\0\0")]),
            ("header broken", [(blocks[0]["off"] + 24, b"\0\0\0\0")])):
        p = os.path.join(tmp, "damaged_both_" + tag.split()[0] + ".h5")
        patch(big, p, [(btree, b"XXXX")] + edits)
        expect_refused(p, "C damaged index, journal " + tag)
    return dmg, p


# ---- D: ulpprof repair -----------------------------------------------------------------------

def part_d(tmp, big, damaged):
    """`ulpprof repair` of a file with a damaged index and of an unclosed one:
    h5py reads the copy, and every capture in it has the bits of the complete
    file (compared by h5py alone, then by ulpprof diff).  A copy over an
    existing file, or of a file ulpprof refuses, leaves nothing behind."""
    dmg, refused = damaged
    want = rc.h5_captures(big)
    with h5py.File(big, "r") as f:
        bits = {(c[1], c[2]): rc.raw_bits(f["captures"][c[1]][str(c[2])]) for c in want}
    for src, tag in ((dmg, "D damaged index"), (os.path.join(tmp, "unclosed.h5"), "D unclosed")):
        out = os.path.join(tmp, "repaired_%s.h5" % os.path.basename(src)[:-3])
        r = ulpprof(["repair", src, out], tag)
        if r is None:
            continue
        check(r.returncode == 0 and r.stdout == "%s: %d captures copied from %s\n"
              % (out, len(want), src), "%s: exit %d, stdout %r" % (tag, r.returncode, r.stdout))
        check(len(r.stderr.splitlines()) == 1 and "read through the capture journal" in r.stderr,
              "%s: stderr %r, want the reader's one warning" % (tag, r.stderr))
        try:
            got = rc.h5_captures(out)
        except Exception as e:  # noqa: BLE001 - h5py failing on the copy is the finding
            check(False, "%s: h5py cannot read the copy: %s" % (tag, e))
            continue
        check(got == want, "%s: h5py sees %d captures in the copy, want %d" % (tag, len(got), len(want)))
        with h5py.File(out, "r") as f:
            bad = [c for c in got if not np.array_equal(rc.raw_bits(f["captures"][c[1]][str(c[2])]),
                                                        bits.get((c[1], c[2])))]
            check(not bad, "%s: %d captures of the copy differ from the complete file" % (tag, len(bad)))
            for key in ("format", "label", "writer"):
                check(key in f.attrs, "%s: the copy has no root attribute %r" % (tag, key))
        r = ulpprof(["diff", "--format", "json", big, out], tag)
        if r is not None:
            j = json.loads(r.stdout) if r.returncode in (0, 1) else {}
            check(r.returncode == 0 and r.stderr == "" and j.get("identical") is True,
                  "%s: diff of the complete file and the copy: exit %d %r" % (tag, r.returncode, r.stderr))
        # Never over an existing file.
        before = read(out)
        r = ulpprof(["repair", src, out], tag)
        if r is not None:
            lines = r.stderr.splitlines()
            check(r.returncode == 2 and lines[-1:] and "'%s'" % out in lines[-1] and "exists" in lines[-1],
                  "%s, output exists: exit %d, stderr %r" % (tag, r.returncode, r.stderr))
            check(read(out) == before, "%s, output exists: the file was changed" % tag)
    out = os.path.join(tmp, "repaired_refused.h5")
    r = ulpprof(["repair", refused, out], "D refused input")
    if r is not None:
        check(r.returncode == 2 and len(r.stderr.splitlines()) == 1 and not os.path.exists(out),
              "D refused input: exit %d, stderr %r, output left: %s"
              % (r.returncode, r.stderr, os.path.exists(out)))


# ---- E: a torn trace -------------------------------------------------------------------------

def part_f(tmp, small):
    """A torn root group (the CUDA writer adds /trace to the root mid-run): in
    a killed writer's file the journal is found by its magic, its captures are
    read, and /run and /env are left out, as the one warning says; the same
    damage in a closed file is refused."""
    want = rc.h5_captures(small)
    # The root's symbol-table entry sits in the version 0 superblock at byte
    # 56 (version 1, the writer's: 4 bytes later); its scratch pad (cache
    # type 1) holds the B-tree address 24 bytes into it.
    data = read(small)
    at = 56 + 4 * data[8]
    cache_type = struct.unpack_from("<I", data, at + 16)[0]
    root = struct.unpack_from("<Q", data, at + 24)[0]
    if not check(data[8] in (0, 1) and cache_type == 1 and data[root:root + 4] == b"TREE",
                 "F: no root B-tree where the superblock says (%d)" % root):
        return
    closed = os.path.join(tmp, "torn_root_closed.h5")
    patch(small, closed, [(root, b"XXXX")])
    uncl = os.path.join(tmp, "torn_root_unclosed.h5")
    unclosed_copy(small, uncl)
    patch(uncl, uncl, [(root, b"XXXX")])
    st, caps, lines = ls_caps(uncl, "F unclosed, torn root")
    check(st == 0 and caps == want, "F unclosed, torn root: exit %r, %d captures, want %d (%r)"
          % (st, len(caps or []), len(want), lines))
    check(len(lines) == 1 and all(w in lines[0] for w in (
        "read through the capture journal", "; /run is left out (", "; /env is left out (")),
        "F unclosed, torn root: stderr %r" % lines)
    expect_refused(closed, "F closed, torn root")


def part_e(tmp, small):
    """A killed writer's /trace can be torn too.  A file read through its
    journal keeps its captures and leaves an unreadable trace out, saying so
    in its one warning; a closed file with the same trace is refused."""
    want = rc.h5_captures(small)
    closed = os.path.join(tmp, "bad_trace_closed.h5")
    shutil.copy(small, closed)
    with h5py.File(closed, "r+") as f:
        # Kernel names that are not strings: the reader refuses this trace.
        f.create_dataset("trace/names", data=np.arange(3, dtype=np.int32))
        f.create_dataset("trace/kernels", data=np.zeros(2, dtype=[("seq", "<u8")]))
    uncl = os.path.join(tmp, "bad_trace_unclosed.h5")
    unclosed_copy(closed, uncl)
    st, caps, lines = ls_caps(uncl, "E unclosed, bad trace")
    check(st == 0 and caps == want, "E unclosed, bad trace: exit %r, %d captures, stderr %r"
          % (st, len(caps or []), lines))
    check(len(lines) == 1 and "read through the capture journal; its kernel trace is left out ("
          in lines[0] and "/trace/names" in lines[0],
          "E unclosed, bad trace: stderr %r, want one warning that leaves the trace out" % lines)
    r = ulpprof(["ls", "--json", uncl], "E")
    if r is not None and r.returncode == 0:
        check(json.loads(r.stdout)[0]["kernels"] == 0, "E unclosed, bad trace: kernels listed")
    expect_refused(closed, "E closed, bad trace")


def main():
    # A file HDF5 loops on costs this many seconds before ulpprof gives up.
    os.environ.setdefault("ULPPROF_OPEN_TIMEOUT", "20")
    tmp = rc.tmpdir("journal")
    small, big, jbig = part_a(tmp)
    part_b(tmp, big)
    damaged = part_c(tmp, big, jbig)
    if damaged is not None:
        part_d(tmp, big, damaged)
    part_e(tmp, small)
    part_f(tmp, small)
    if not rc.failures:
        shutil.rmtree(tmp)
    return rc.finish("the capture journal is what FORMAT.md says, and read as it says")


if __name__ == "__main__":
    sys.exit(main())
