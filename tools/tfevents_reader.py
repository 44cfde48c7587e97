#!/usr/bin/env python3
"""Reads TensorBoard event files without TensorFlow or TensorBoard (plain python3).

Written from the published formats: each TFRecord is
    uint64 length (little-endian)
    uint32 masked CRC32C of the 8 length bytes
    bytes  data[length]
    uint32 masked CRC32C of data
with masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32), and each data is a
serialized tensorflow.Event (event.proto / summary.proto). Both CRCs of every record are
checked; the first mismatch ends the program with exit status 1, naming the file and record.

Usage:
  tfevents_reader.py PATH...                  every event as one JSON line
  tfevents_reader.py PATH... --summary        per tag: count, steps, last value
  tfevents_reader.py [PATH...] --compare-jsonl RUN_DIR/metrics.jsonl
      every scalar of the event files equals the metrics.jsonl value of the same step and tag
      (to float32 precision), and every metrics.jsonl value has its scalar; text samples
      match in number per step. PATH defaults to the tensorboard/ folder next to the jsonl.

PATH is an event file, a folder holding events.out.tfevents.* files, or a run folder (its
tensorboard/ subfolder is read). Files are read in time order (the seconds in their names,
then the name). As TensorBoard does, a SessionLog START at step s discards the values held
for steps >= s (a resumed run re-does them), and a later value for the same step and tag
replaces an earlier one.

Exit status: 0 on success, 1 on a CRC/format error or a comparison mismatch, 2 on usage errors.
"""

import argparse
import json
import math
import os
import re
import signal
import struct
import sys

# ---- CRC32C (Castagnoli, reflected polynomial 0x82F63B78) --------------------------------


def _make_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_CRC_TABLE = _make_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class FormatError(Exception):
    pass


# ---- Records -------------------------------------------------------------------------------


def read_records(path):
    """Yields (index, data) for each record, verifying both CRCs."""
    with open(path, "rb") as stream:
        blob = stream.read()
    offset = 0
    index = 0
    while offset < len(blob):
        where = "%s: record %d (byte offset %d)" % (path, index, offset)
        if len(blob) - offset < 12:
            raise FormatError("%s: truncated header (%d of 12 bytes)" % (where, len(blob) - offset))
        header = blob[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[offset + 8:offset + 12])
        if masked_crc32c(header) != length_crc:
            raise FormatError("%s: length CRC mismatch (stored 0x%08x, computed 0x%08x)"
                              % (where, length_crc, masked_crc32c(header)))
        end = offset + 12 + length + 4
        if end > len(blob):
            raise FormatError("%s: truncated (needs %d bytes, file has %d)" % (where, end - offset, len(blob) - offset))
        data = blob[offset + 12:offset + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[end - 4:end])
        if masked_crc32c(data) != data_crc:
            raise FormatError("%s: data CRC mismatch (stored 0x%08x, computed 0x%08x)"
                              % (where, data_crc, masked_crc32c(data)))
        yield index, data
        offset = end
        index += 1


# ---- Protobuf wire format ------------------------------------------------------------------


def _varint(data, offset):
    value = 0
    shift = 0
    while True:
        if offset >= len(data):
            raise FormatError("varint runs past the end of the message")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift >= 70:
            raise FormatError("varint longer than 10 bytes")


def fields(data):
    """Yields (field_number, wire_type, value): int for varints, bytes otherwise."""
    offset = 0
    while offset < len(data):
        key, offset = _varint(data, offset)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, offset = _varint(data, offset)
        elif wire == 1:
            value, offset = data[offset:offset + 8], offset + 8
        elif wire == 2:
            length, offset = _varint(data, offset)
            value, offset = data[offset:offset + length], offset + length
        elif wire == 5:
            value, offset = data[offset:offset + 4], offset + 4
        else:
            raise FormatError("unsupported wire type %d (field %d)" % (wire, number))
        if offset > len(data):
            raise FormatError("field %d runs past the end of the message" % number)
        yield number, wire, value


def _int64(value):
    return value - (1 << 64) if value >= (1 << 63) else value


def _utf8(raw):
    return raw.decode("utf-8", errors="replace")


SESSION_STATUS = {0: "STATUS_UNSPECIFIED", 1: "START", 2: "STOP", 3: "CHECKPOINT"}


def decode_value(raw):
    """Summary.Value -> (tag, kind, value): kind 'scalar' (float) or 'text' (str) or 'other'."""
    tag, kind, value, plugin = "", "other", None, None
    tensor = None
    for number, wire, field in fields(raw):
        if number == 1 and wire == 2:
            tag = _utf8(field)
        elif number == 2 and wire == 5:
            kind, value = "scalar", struct.unpack("<f", field)[0]
        elif number == 8 and wire == 2:
            tensor = field
        elif number == 9 and wire == 2:  # SummaryMetadata.plugin_data.plugin_name
            for meta_number, meta_wire, meta in fields(field):
                if meta_number == 1 and meta_wire == 2:
                    for plugin_number, plugin_wire, name in fields(meta):
                        if plugin_number == 1 and plugin_wire == 2:
                            plugin = _utf8(name)
    if tensor is not None:
        dtype, strings = None, []
        for number, wire, field in fields(tensor):
            if number == 1 and wire == 0:
                dtype = field
            elif number == 8 and wire == 2:
                strings.append(_utf8(field))
        if dtype == 7 and strings:  # DT_STRING
            kind, value = ("text" if plugin in (None, "text") else "other"), "\n".join(strings)
    return tag, kind, value


def decode_event(data):
    event = {"wall_time": 0.0, "step": 0}
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            event["step"] = _int64(value)
        elif number == 3 and wire == 2:
            event["file_version"] = _utf8(value)
        elif number == 5 and wire == 2:
            scalars, texts = {}, {}
            for value_number, value_wire, raw in fields(value):
                if value_number == 1 and value_wire == 2:
                    tag, kind, decoded = decode_value(raw)
                    if kind == "scalar":
                        scalars[tag] = decoded
                    elif kind == "text":
                        texts[tag] = decoded
            event["scalars"] = scalars
            if texts:
                event["texts"] = texts
        elif number == 7 and wire == 2:
            status = 0
            for log_number, log_wire, log_value in fields(value):
                if log_number == 1 and log_wire == 0:
                    status = log_value
            event["session_log"] = SESSION_STATUS.get(status, str(status))
    return event


# ---- Files ---------------------------------------------------------------------------------

_NAME = re.compile(r"events\.out\.tfevents\.(\d+)")


def event_files(paths):
    files = []
    for path in paths:
        if os.path.isdir(path):
            folder = os.path.join(path, "tensorboard") if os.path.isdir(os.path.join(path, "tensorboard")) else path
            found = [os.path.join(folder, name) for name in os.listdir(folder) if "tfevents" in name]
            if not found:
                raise FormatError("%s: no events.out.tfevents.* files" % folder)
            files.extend(found)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise FormatError("%s: no such file or folder" % path)

    def order(path):
        match = _NAME.search(os.path.basename(path))
        return (int(match.group(1)) if match else 0, os.path.basename(path))

    return sorted(set(files), key=order)


def read_events(files):
    """Yields (path, record index, event) over all files, in order."""
    for path in files:
        for index, data in read_records(path):
            try:
                event = decode_event(data)
            except FormatError as error:
                raise FormatError("%s: record %d: %s" % (path, index, error))
            if index == 0 and not event.get("file_version", "").startswith("brain.Event:"):
                raise FormatError("%s: record 0 is not a file_version event" % path)
            yield path, index, event


def _json_number(value):
    return value if math.isfinite(value) else repr(value)  # JSON has no nan/inf


def live_values(files):
    """{tag: {step: value}} for scalars and {step: [texts]} as TensorBoard would hold them."""
    scalars, texts = {}, {}
    for _, _, event in read_events(files):
        step = event["step"]
        if event.get("session_log") == "START":
            for series in scalars.values():
                for old in [s for s in series if s >= step]:
                    del series[old]
            for old in [s for s in texts if s >= step]:
                del texts[old]
        for tag, value in event.get("scalars", {}).items():
            scalars.setdefault(tag, {})[step] = value
        for tag, text in event.get("texts", {}).items():
            texts.setdefault(step, {})[tag] = text
    return scalars, texts


# ---- metrics.jsonl -------------------------------------------------------------------------

STEP_TAGS = {"loss": "train/loss", "smoothed_loss": "train/smoothed_loss", "lr": "train/lr",
             "grad_norm": "train/grad_norm", "tokens_per_second": "train/tokens_per_second"}
EVAL_TAGS = {"loss": "val/loss", "perplexity": "val/perplexity"}


def read_jsonl(path):
    """{tag: {step: value or None}} and {step: sample count} from a metrics.jsonl."""
    scalars, samples = {}, {}
    with open(path, "rb") as stream:
        blob = stream.read()
    lines = blob.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as error:
            if number == len(lines):  # unterminated last line: a write cut short
                break
            raise FormatError("%s line %d: not valid JSON (%s)" % (path, number, error))
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise FormatError("%s line %d: not an object with an integer \"step\"" % (path, number))
        step, kind = record["step"], record.get("type")
        if kind == "step":
            pairs = [(tag, record.get(field)) for field, tag in STEP_TAGS.items() if field in record]
        elif kind == "eval":
            pairs = [(tag, record.get(field)) for field, tag in EVAL_TAGS.items() if field in record]
        elif kind == "scalars":
            pairs = list(record.get("values", {}).items())
        elif kind == "sample":
            samples[step] = samples.get(step, 0) + 1
            continue
        else:
            continue
        for tag, value in pairs:
            if value is not None and not isinstance(value, (int, float)):
                raise FormatError("%s line %d: %s is not a number" % (path, number, tag))
            scalars.setdefault(tag, {})[step] = value
    return scalars, samples


def to_float32(value):
    """Round a double as a float32 summary does; beyond float's range becomes infinity."""
    if not math.isfinite(value):
        return value
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def same_value(expected, stored):
    if expected is None:  # null in the jsonl: a NaN or infinity was logged
        return not math.isfinite(stored)
    rounded = to_float32(float(expected))
    if math.isnan(rounded) or math.isnan(stored):
        return math.isnan(rounded) and math.isnan(stored)
    if math.isinf(rounded) or math.isinf(stored):
        return rounded == stored
    return math.isclose(rounded, stored, rel_tol=2.0 ** -23, abs_tol=1e-45)


def compare(files, jsonl_path):
    event_scalars, event_texts = live_values(files)
    json_scalars, json_samples = read_jsonl(jsonl_path)
    problems = []
    checked = 0
    for tag in sorted(set(event_scalars) | set(json_scalars)):
        events = event_scalars.get(tag, {})
        logged = json_scalars.get(tag, {})
        for step in sorted(set(events) | set(logged)):
            if step not in logged:
                problems.append("%s step %d: in the event files (%r), not in %s" % (tag, step, events[step], jsonl_path))
            elif step not in events:
                problems.append("%s step %d: in %s (%r), not in the event files" % (tag, step, jsonl_path, logged[step]))
            elif not same_value(logged[step], events[step]):
                problems.append("%s step %d: event file has %r, %s has %r"
                                % (tag, step, events[step], jsonl_path, logged[step]))
            else:
                checked += 1
    for step in sorted(set(event_texts) | set(json_samples)):
        in_events, in_jsonl = len(event_texts.get(step, {})), json_samples.get(step, 0)
        if in_events != in_jsonl:
            problems.append("step %d: %d text samples in the event files, %d in %s" % (step, in_events, in_jsonl, jsonl_path))
    return checked, problems


# ---- Main ----------------------------------------------------------------------------------


def self_test():
    # The CRC-32C check value and the RFC 3720 (iSCSI) B.4 test vectors.
    vectors = [(b"123456789", 0xE3069283), (bytes(32), 0x8A9136AA), (b"\xff" * 32, 0x62A8AB43),
               (bytes(range(32)), 0x46DD794E), (bytes(range(31, -1, -1)), 0x113FDB5C)]
    for data, expected in vectors:
        if crc32c(data) != expected:
            print("FAIL: crc32c(%r) = 0x%08x, expected 0x%08x" % (data[:12], crc32c(data), expected))
            return 1
    print("OK: crc32c matches %d published check values" % len(vectors))
    return 0



def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", help="event files, folders of them, or run folders")
    parser.add_argument("--summary", action="store_true", help="per tag: count, step range, last value")
    parser.add_argument("--compare-jsonl", metavar="METRICS_JSONL",
                        help="check the scalars against this metrics.jsonl, both ways")
    parser.add_argument("--self-test", action="store_true",
                        help="check this reader's CRC32C against the published check values, then exit")
    args = parser.parse_args(argv)

    if args.self_test:
        return self_test()
    paths = args.paths
    if not paths:
        if not args.compare_jsonl:
            parser.error("give an event file or folder (or --compare-jsonl RUN_DIR/metrics.jsonl)")
        paths = [os.path.join(os.path.dirname(os.path.abspath(args.compare_jsonl)), "tensorboard")]

    try:
        files = event_files(paths)
        if args.compare_jsonl:
            checked, problems = compare(files, args.compare_jsonl)
            if problems:
                for problem in problems[:20]:
                    print("mismatch: " + problem)
                if len(problems) > 20:
                    print("... and %d more" % (len(problems) - 20))
                print("FAIL: %d mismatches between %d event file(s) and %s" % (len(problems), len(files), args.compare_jsonl))
                return 1
            print("OK: %d scalars in %d event file(s) match %s" % (checked, len(files), args.compare_jsonl))
            return 0
        if args.summary:
            records = 0
            scalars, texts = live_values(files)
            for _ in read_events(files):
                records += 1
            print("%d event file(s), %d records, all CRCs valid" % (len(files), records))
            for tag in sorted(scalars):
                steps = sorted(scalars[tag])
                if steps:
                    print("%-28s %6d values, steps %d..%d, last %.6g" % (tag, len(steps), steps[0], steps[-1], scalars[tag][steps[-1]]))
            if texts:
                print("%-28s %6d steps with text samples" % ("(text)", len(texts)))
            return 0
        for path, index, event in read_events(files):
            out = {"file": os.path.basename(path), "record": index}
            out.update(event)
            if "scalars" in out:
                out["scalars"] = {tag: _json_number(value) for tag, value in out["scalars"].items()}
            print(json.dumps(out, ensure_ascii=False))
        return 0
    except FormatError as error:
        print("tfevents_reader: error: %s" % error, file=sys.stderr)
        return 1
    except OSError as error:
        print("tfevents_reader: error: %s" % error, file=sys.stderr)
        return 1


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends quietly
    sys.exit(main(sys.argv[1:]))
