#!/usr/bin/env python3
"""Writes examples/sft/conversations.jsonl: a few hundred short, checkable conversations in the
OpenAI messages format for the instruction-tuning example (configs/sft-example.yaml).

The tasks are simple enough for the quickstart's tiny model to learn the turn format and some
of the content: small sums and differences, the next weekday or month, spelling a word
backwards, and answering in a fixed phrase. Deterministic (fixed seed): rerunning gives the
same file.

Usage: tools/make_sft_example.py [OUTPUT]   (default: examples/sft/conversations.jsonl)
"""
import json
import random
import sys
from pathlib import Path

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
WORDS = ["cat", "dog", "fish", "bird", "tree", "house", "river", "stone", "cloud", "apple", "bread",
         "light", "music", "paper", "water", "green", "quick", "table", "train", "smile"]
SYSTEM = "You are a brief assistant. Answer in one sentence."


def conversation(rng):
    kind = rng.randrange(5)
    if kind == 0:
        a, b = rng.randrange(1, 50), rng.randrange(1, 50)
        return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
    if kind == 1:
        a = rng.randrange(10, 99)
        b = rng.randrange(1, a)
        return f"What is {a} minus {b}?", f"{a} minus {b} is {a - b}."
    if kind == 2:
        i = rng.randrange(7)
        return f"Which day comes after {DAYS[i]}?", f"The day after {DAYS[i]} is {DAYS[(i + 1) % 7]}."
    if kind == 3:
        i = rng.randrange(12)
        return f"Which month comes after {MONTHS[i]}?", f"The month after {MONTHS[i]} is {MONTHS[(i + 1) % 12]}."
    word = rng.choice(WORDS)
    return f"Spell {word} backwards.", f"{word} backwards is {word[::-1]}."


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "examples/sft/conversations.jsonl")
    rng = random.Random(20261203)
    lines = []
    for index in range(400):
        question, answer = conversation(rng)
        messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        if index % 4 == 0:
            messages.insert(0, {"role": "system", "content": SYSTEM})
        lines.append(json.dumps({"messages": messages}))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} conversations to {out}")


if __name__ == "__main__":
    main()
