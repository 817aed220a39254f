"""Renders chat templates with Python Jinja2 set up as transformers' apply_chat_template sets it up: an
immutable sandbox with trim_blocks and lstrip_blocks, loop controls, the {% generation %} tag, and
transformers' tojson, raise_exception and strftime_now (the clock pinned to 2024-07-26 12:00).

usage: python3 chat_template_render.py INPUT.json OUTPUT.json  (the formats of chat_template_render.mjs)
"""
import datetime
import json
import sys

from jinja2 import TemplateError, nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """transformers' assistant-mask marker: the body renders in place."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


def strftime_now(fmt):
    return datetime.datetime(2024, 7, 26, 12, 0, 0).strftime(fmt)


def main():
    input_path, output_path = sys.argv[1:3]
    with open(input_path, encoding="utf-8") as f:
        data = json.load(f)
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, "jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    templates = {name: env.from_string(source) for name, source in data["templates"].items()}
    results = []
    for case in data["cases"]:
        try:
            results.append({"ok": True, "output": templates[case["template"]].render(**case["context"])})
        except Exception as error:  # every failure is compared, whatever its type
            results.append({"ok": False, "error": str(error)})
    with open(output_path, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)
    print(f"rendered {len(results)} cases with Python Jinja2")


if __name__ == "__main__":
    main()
