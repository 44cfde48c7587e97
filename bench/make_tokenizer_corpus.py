#!/usr/bin/env python3
"""Builds the tokenizer benchmark corpus (>= 10 MB of mixed text) from files that Debian
packages install, so any machine set up with scripts/setup.sh can rebuild it.

Sections (each written to OUT_DIR/<name>.txt, then all concatenated into mixed.txt):
  prose         English: /usr/share/common-licenses, then the packages' copyright files and
                changelogs (/usr/share/doc/*/copyright, changelog*.gz), in sorted order
  code          C and C++ headers (/usr/include) and the Python standard library
  multilingual  the translated messages (msgstr) of the gettext catalogues under
                /usr/share/locale for Japanese, Chinese, Korean, Russian, Arabic, Hindi, Thai,
                Greek, Hebrew, Ukrainian, German, French, Spanish
Files are visited in sorted order and each section stops at its byte budget, so the same
installed packages give the same corpus; the SHA-256 of each file is printed (JSON) so a
result can name the exact corpus it was measured on.

Usage: bench/make_tokenizer_corpus.py OUT_DIR
"""
import glob
import gzip
import hashlib
import json
import os
import struct
import sys

BUDGET = {"prose": 5_000_000, "code": 3_000_000, "multilingual": 2_500_000}
LANGUAGES = ["ja", "zh_CN", "zh_TW", "ko", "ru", "ar", "hi", "th", "el", "he", "uk", "de", "fr", "es"]


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None  # binary, unreadable or not UTF-8: skip


def fill(paths, budget, reader=read_text):
    out, size = [], 0
    for path in paths:
        text = reader(path)
        if not text:
            continue
        encoded = len(text.encode("utf-8"))
        if size + encoded > budget:
            continue  # a smaller file later may still fit
        out.append(text if text.endswith("\n") else text + "\n")
        size += encoded
        if size > budget * 0.98:
            break
    return "".join(out)


def mo_messages(path):
    """The translated strings of a gettext .mo catalogue (format: GNU gettext manual, 'MO Files')."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < 28:
        return None
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if order is None:
        return None
    _, count, _, translations = struct.unpack(order + "4I", data[4:20])
    texts = []
    for i in range(1, count):  # entry 0 is the catalogue header
        length, offset = struct.unpack(order + "2I", data[translations + 8 * i: translations + 8 * i + 8])
        raw = data[offset: offset + length]
        try:
            texts.extend(s for s in raw.decode("utf-8").split("\0") if s)
        except UnicodeDecodeError:
            continue
    return "\n".join(texts)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    prose_paths = sorted(glob.glob("/usr/share/common-licenses/*"))
    prose_paths += sorted(glob.glob("/usr/share/doc/*/copyright"))
    prose_paths += sorted(glob.glob("/usr/share/doc/*/changelog*.gz"))
    code_paths = sorted(p for p in glob.glob("/usr/include/**/*.h", recursive=True))
    code_paths += sorted(glob.glob("/usr/lib/python3*/*.py"))
    sections = {
        "prose": fill(prose_paths, BUDGET["prose"]),
        "code": fill(code_paths, BUDGET["code"]),
    }
    # Interleave languages so that every one is represented within the budget.
    per_language = BUDGET["multilingual"] // len(LANGUAGES)
    multilingual = []
    for language in LANGUAGES:
        catalogues = sorted(glob.glob(f"/usr/share/locale/{language}/LC_MESSAGES/*.mo"))
        multilingual.append(fill(catalogues, per_language, reader=mo_messages))
    sections["multilingual"] = "".join(multilingual)
    sections["mixed"] = sections["prose"] + sections["code"] + sections["multilingual"]

    report = {}
    for name, text in sections.items():
        data = text.encode("utf-8")
        with open(os.path.join(out_dir, name + ".txt"), "wb") as f:
            f.write(data)
        report[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    print(json.dumps(report, indent=2))
    if report["mixed"]["bytes"] < 10_000_000:
        sys.exit(f"corpus is only {report['mixed']['bytes']} bytes (need >= 10 MB); install more packages")


if __name__ == "__main__":
    main()
