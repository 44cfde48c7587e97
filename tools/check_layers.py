#!/usr/bin/env python3
"""Checks every `#include "..."` under src/ and include/ against the layer table of
docs/ARCHITECTURE.md, so the table is the one declaration of what may include what.

The table lists the layers bottom-up. A row's last cell ("may include") names, in backticks,
the layers (`core/`) or single headers (`model/tokenizer_metadata.h`) that layer may include;
"every layer above" allows all rows above it. Every name there must be a row above the one
that names it, so the table itself cannot allow an upward include. An include that resolves to
a file of another layer must be allowed by the including layer's row; includes that resolve to
nothing in the repository (third-party headers) are not checked.

    check_layers.py [--root DIR]   check the repository at DIR (default: this script's repo)
    check_layers.py --selftest     prove the check fails on an upward include and on a table
                                   that allows one, then check this repository
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

ARCHITECTURE = os.path.join("docs", "ARCHITECTURE.md")
ROW = re.compile(r"^\|\s*`([a-z]+)/`\s*\|")
ALLOWANCE = re.compile(r"`([a-z]+)/([A-Za-z0-9_./]*)`")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
EVERY_LAYER_ABOVE = "every layer above"


class Layer:
    def __init__(self, name, line):
        self.name = name
        self.line = line          # line of the table row in ARCHITECTURE.md
        self.layers = set()       # whole layers it may include
        self.headers = set()      # single headers it may include ("model/tokenizer_metadata.h")


def read_table(root):
    """Returns (layers in table order, errors) from the layer table."""
    with open(os.path.join(root, ARCHITECTURE), encoding="utf-8") as f:
        rows = [(number, ROW.match(line), line) for number, line in enumerate(f.read().split("\n"), 1)]
    rows = [(number, match.group(1), line) for number, match, line in rows if match]
    names = {name for _, name, _ in rows}
    layers, errors = [], []
    for number, name, line in rows:
        layer = Layer(name, number)
        may_include = line.rstrip().rstrip("|").rsplit("|", 1)[-1]
        above = {l.name for l in layers}
        if EVERY_LAYER_ABOVE in may_include:
            layer.layers |= above
        for target, header in ALLOWANCE.findall(may_include):
            if target not in above:
                why = "listed below it" if target in names else "not a row of the table"
                errors.append(f"{ARCHITECTURE}:{number}: {name}/ may include {target}/, {why}")
            elif header:
                layer.headers.add(f"{target}/{header}")
            else:
                layer.layers.add(target)
        layers.append(layer)
    if not layers:
        errors.append(f"{ARCHITECTURE}: no layer table found")
    return layers, errors


def layer_of(relative):
    """The layer a repository file belongs to: its folder under src/, or "include"."""
    parts = relative.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "include":
        return "include"
    return None


def resolve(root, including, target):
    """The repository path an include names, searched as the compiler does (the including
    file's folder, then src/ and include/), or None for a header from outside."""
    for base in (os.path.dirname(including), "src", "include"):
        candidate = os.path.normpath(os.path.join(root, base, target))
        if os.path.isfile(candidate):
            return os.path.relpath(candidate, root).replace(os.sep, "/")
    return None


def check(root):
    """Returns the list of violations (empty when the includes agree with the table)."""
    layers, errors = read_table(root)
    by_name = {layer.name: layer for layer in layers}
    order = {layer.name: index for index, layer in enumerate(layers)}
    folders = sorted(d for d in os.listdir(os.path.join(root, "src"))
                     if os.path.isdir(os.path.join(root, "src", d)))
    for folder in folders:
        if folder not in by_name:
            errors.append(f"src/{folder}/: no row in the layer table of {ARCHITECTURE}")
    for top in ("src", "include"):
        for directory, _, files in sorted(os.walk(os.path.join(root, top))):
            for file in sorted(files):
                if not file.endswith(SOURCE_SUFFIXES):
                    continue
                relative = os.path.relpath(os.path.join(directory, file), root).replace(os.sep, "/")
                errors += check_file(root, relative, by_name, order)
    return errors


def check_file(root, relative, by_name, order):
    source = by_name.get(layer_of(relative))
    if source is None:
        return []  # a folder without a row is reported once, by check()
    errors = []
    with open(os.path.join(root, relative), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = resolve(root, relative, match.group(1))
            if target is None:
                continue
            layer = layer_of(target)
            if layer is None or layer == source.name:
                continue
            header = target.split("/", 1)[1] if target.startswith("src/") else target
            if layer in source.layers or header in source.headers:
                continue
            upward = order.get(layer, len(order)) > order[source.name]
            kind = "upward include" if upward else "include not in the table"
            errors.append(f'{relative}:{number}: {kind}: {source.name}/ may not include '
                          f'"{match.group(1)}" ({layer}/; see {ARCHITECTURE}:{source.line})')
    return errors


def selftest(root):
    """Runs the check on copies of the repository with one fault each; every fault must be
    reported. Returns a list of failures of the check itself."""
    failures = []
    with tempfile.TemporaryDirectory() as temp:
        copy = os.path.join(temp, "repo")
        shutil.copytree(os.path.join(root, "src"), os.path.join(copy, "src"))
        shutil.copytree(os.path.join(root, "include"), os.path.join(copy, "include"))
        os.makedirs(os.path.join(copy, "docs"))
        shutil.copy(os.path.join(root, ARCHITECTURE), os.path.join(copy, ARCHITECTURE))
        baseline = check(copy)
        if baseline:
            failures.append("the unmodified copy fails: " + "; ".join(baseline))

        # An upward include: core/ (the lowest layer) reaching into runtime/.
        victim = os.path.join(copy, "src", "core", "files.cpp")
        with open(victim, encoding="utf-8") as f:
            original = f.read()
        with open(victim, "w", encoding="utf-8") as f:
            f.write('#include "runtime/engine.h"\n' + original)
        found = check(copy)
        if not any(e.startswith('src/core/files.cpp:1: upward include') and '"runtime/engine.h"' in e
                   for e in found):
            failures.append("an upward include in src/core/files.cpp was not reported: " + repr(found))
        with open(victim, "w", encoding="utf-8") as f:
            f.write(original)

        # A table that allows an upward include: core/ may include cli/.
        table = os.path.join(copy, ARCHITECTURE)
        with open(table, encoding="utf-8") as f:
            text = f.read()
        core_row = next(line for line in text.split("\n") if ROW.match(line) and ROW.match(line).group(1) == "core")
        with open(table, "w", encoding="utf-8") as f:
            f.write(text.replace(core_row, core_row.rstrip().rstrip("|").rstrip() + ", `cli/` |"))
        found = check(copy)
        if not any("core/ may include cli/, listed below it" in e for e in found):
            failures.append("a table allowing core/ to include cli/ was not reported: " + repr(found))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--selftest", action="store_true")
    args = parser.parse_args()
    if args.selftest:
        failures = selftest(args.root)
        for failure in failures:
            print(f"selftest: {failure}", file=sys.stderr)
        if failures:
            return 1
        print("selftest: an upward include and an upward table entry are both reported")
    errors = check(args.root)
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print(f"{len(errors)} layer violation(s)", file=sys.stderr)
        return 1
    print(f"layers: every include under src/ and include/ agrees with {ARCHITECTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
