#!/usr/bin/env python3
"""Independent safetensors oracle for Kipp's reader and writer (used by tests/unit/format/safetensors_test.cpp).

    test_safetensors_interop.py write FILE   writes the fixture with a hand-written encoder
                                             (struct + json, per the format's README)
    test_safetensors_interop.py check FILE   reads a file Kipp wrote, checks the byte layout
                                             against the spec and the values with numpy

The fixture below is restated in the C++ test; the two must agree. Exit status 0 on success,
1 with a message on stderr otherwise (including when numpy is missing).
"""
import json
import struct
import sys

# name -> (dtype, shape, values). Values are exactly representable in their dtype.
FIXTURE = [
    ("a.f32", "F32", [2, 3], [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5]),
    ("b.f16", "F16", [4], [1.0, -2.5, 0.0, 65504.0]),
    ("c.bf16", "BF16", [3], [1.0, -3.0, 0.15625]),
    ("d.i64", "I64", [2, 2], [-(2**40), 0, 1, 2**62]),
    ("e.u8", "U8", [5], [0, 1, 127, 128, 255]),
    ("f.bool", "BOOL", [3], [1, 0, 1]),
    ("g.scalar", "F64", [], [3.25]),
    ("h.empty", "F32", [0, 4], []),
    ("i.i16", "I16", [2], [-32768, 32767]),
    ("j.u16", "U16", [2], [0, 65535]),
    ("k.i32", "I32", [3], [-(2**31), 0, 2**31 - 1]),
    ("l.u32", "U32", [1], [2**32 - 1]),
    ("m.u64", "U64", [1], [2**64 - 1]),
    ("n.i8", "I8", [2], [-128, 127]),
]

STRUCT_CODES = {"F32": "f", "F16": "e", "F64": "d", "I64": "q", "U8": "B", "BOOL": "?", "I16": "h",
                "U16": "H", "I32": "i", "U32": "I", "U64": "Q", "I8": "b"}
ITEM_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "U8": 1, "BOOL": 1, "I16": 2,
              "U16": 2, "I32": 4, "U32": 4, "U64": 8, "I8": 1}


def fail(message):
    print("safetensors interop: " + message, file=sys.stderr)
    sys.exit(1)


def encode(dtype, values):
    if dtype == "BF16":
        # bfloat16 is the upper half of a float32 (values here need no rounding).
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    if dtype == "BOOL":
        return bytes(1 if v else 0 for v in values)
    return struct.pack("<" + STRUCT_CODES[dtype] * len(values), *values)


def write(path):
    # Header keys sorted by name (as the Hugging Face writer does) while the data section is laid
    # out in a different order (reverse), so a reader must follow data_offsets, not key order.
    blobs = {name: encode(dtype, values) for name, dtype, _, values in FIXTURE}
    offsets = {}
    cursor = 0
    for name, _, _, _ in reversed(FIXTURE):
        offsets[name] = (cursor, cursor + len(blobs[name]))
        cursor += len(blobs[name])
    header = {"__metadata__": {"format": "pt", "source": "python"}}
    for name, dtype, shape, _ in sorted(FIXTURE):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": list(offsets[name])}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-len(text)) % 8 + 8)  # pad with spaces (beyond the minimum, also valid)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for name, _, _, _ in reversed(FIXTURE):
            out.write(blobs[name])


def check(path):
    try:
        import numpy as np
    except ImportError as error:
        fail("python3-numpy is required for the check (apt-get install python3-numpy): %s" % error)
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail("file shorter than 8 bytes")
    (header_len,) = struct.unpack("<Q", raw[:8])
    if 8 + header_len > len(raw):
        fail("header length %d exceeds the file (%d bytes)" % (header_len, len(raw)))
    if (8 + header_len) % 8 != 0:
        fail("data section starts at %d, not a multiple of 8" % (8 + header_len))
    header_bytes = raw[8:8 + header_len]
    if not header_bytes.startswith(b"{"):
        fail("header does not begin with '{'")
    stripped = header_bytes.rstrip(b" ")
    if not stripped.endswith(b"}"):
        fail("header padding is not spaces after the JSON object")
    pairs = json.loads(stripped.decode("utf-8"), object_pairs_hook=lambda p: p)
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail("duplicate keys in header")
    header = dict(pairs)
    metadata = dict(header.pop("__metadata__", []))
    if metadata != {"format": "pt", "source": "kipp"}:
        fail("metadata is %r" % metadata)
    data = raw[8 + header_len:]
    # Kipp writes tensors in the given order with contiguous offsets in that order.
    tensor_keys = [k for k in keys if k != "__metadata__"]
    if tensor_keys != [name for name, _, _, _ in FIXTURE]:
        fail("header tensor order %r differs from the fixture order" % tensor_keys)
    cursor = 0
    for name, dtype, shape, values in FIXTURE:
        entry = dict(header[name])
        if entry["dtype"] != dtype or entry["shape"] != shape:
            fail("%s: dtype/shape %s %s, expected %s %s" % (name, entry["dtype"], entry["shape"], dtype, shape))
        begin, end = entry["data_offsets"]
        if begin != cursor:
            fail("%s: data_offsets begin %d, expected %d (contiguous)" % (name, begin, cursor))
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * ITEM_BYTES[dtype]:
            fail("%s: %d bytes for shape %s" % (name, end - begin, shape))
        cursor = end
        blob = data[begin:end]
        if dtype == "BF16":
            got = (np.frombuffer(blob, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dtype == "BOOL":
            got = np.frombuffer(blob, dtype=np.bool_)
        else:
            numpy_type = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "U8": "u1", "I16": "<i2",
                          "U16": "<u2", "I32": "<i4", "U32": "<u4", "U64": "<u8", "I8": "i1"}[dtype]
            got = np.frombuffer(blob, dtype=numpy_type)
        got = got.reshape(shape)
        want = np.array(values, dtype=got.dtype).reshape(shape)
        if not np.array_equal(got, want):
            fail("%s: values %r, expected %r" % (name, got.tolist(), want.tolist()))
    if cursor != len(data):
        fail("tensors end at %d but the data section has %d bytes" % (cursor, len(data)))
    print("OK %d tensors" % len(FIXTURE))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        fail("usage: test_safetensors_interop.py write|check FILE")
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        check(sys.argv[2])


if __name__ == "__main__":
    main()
