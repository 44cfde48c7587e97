#!/usr/bin/env python3
"""render_jinja2.py: renders chat cases with Python's jinja2 the way Hugging Face transformers
does (apply_chat_template), as a second, independent authority for the chat goldens.

Reads {"template": str, "cases": [{"messages", "tools"?, "add_generation_prompt",
"enable_thinking"?}, ...]} as JSON on stdin; writes a JSON array of the rendered strings on
stdout. The environment mirrors transformers' (utils/chat_template_utils.py): a sandboxed
environment with trim_blocks and lstrip_blocks, the loopcontrols extension, raise_exception,
and tojson as json.dumps(ensure_ascii=False). Extra keyword arguments (enable_thinking) are
passed only when the case sets them, as transformers passes **kwargs through.
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    request = json.load(sys.stdin)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(request["template"])
    out = []
    for case in request["cases"]:
        kwargs = {"messages": case["messages"], "tools": case.get("tools"),
                  "add_generation_prompt": case["add_generation_prompt"]}
        if "enable_thinking" in case:
            kwargs["enable_thinking"] = case["enable_thinking"]
        out.append(template.render(**kwargs))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
