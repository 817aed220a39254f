#!/usr/bin/env python3
"""Keeps the code map of docs/architecture.md true.

Reads the two tables of its "## Code map" section: "### Behaviour → file:function" and "### Threads".
Each row names a file (a backticked path from the repository root) in its `file` column and a name in its
`function` column. A row fails when the file does not exist or the name does not occur in it as a whole
word; for `Class::method` (or `A::B::c`), every part must occur in the file as a whole word. The test also
fails when the behaviour table has fewer than MIN_BEHAVIOURS rows, or a table is missing.

Standard library only. Exit status 0 when every row holds, 1 otherwise, 2 on a usage error.

    python3 tests/docs/code_map_test.py docs/architecture.md REPOSITORY_ROOT
"""

import re
import sys
from pathlib import Path

MIN_BEHAVIOURS = 40
SECTION = "## Code map"
BEHAVIOUR_TABLE = "### Behaviour → file:function"
THREAD_TABLE = "### Threads"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BACKTICKED = re.compile(r"`([^`]+)`")


def split_row(line):
    """The cells of one table row (`| a | b |`), stripped."""
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return [cell.strip() for cell in inner.split("|")]


def section_lines(text, heading):
    """The lines under `heading` up to the next heading of the same or a higher level, with line numbers."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.strip() == heading:
            break
    else:
        return None
    out = []
    for number in range(start + 1, len(lines)):
        line = lines[number]
        stripped = line.lstrip()
        if stripped.startswith("#"):
            other = len(stripped) - len(stripped.lstrip("#"))
            if other <= level:
                break
        out.append((number + 1, line))
    return out


def read_table(lines, heading):
    """The first table under `heading`: its header cells and its rows as (line number, cells)."""
    table = [(n, line) for n, line in lines if line.lstrip().startswith("|")]
    if len(table) < 2:
        raise ValueError(f"'{heading}' has no table")
    header = [cell.lower() for cell in split_row(table[0][1])]
    rows = [(n, split_row(line)) for n, line in table[2:]]  # table[1] is the |---| line
    return header, rows


def only_backticked(cell):
    """The text of a cell that is exactly one backticked span, else None."""
    match = BACKTICKED.fullmatch(cell)
    return match.group(1).strip() if match else None


def occurs(word, text):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", text) is not None


def check_row(root, path_text, name):
    """None when the row holds, else why not."""
    if path_text.startswith("/") or ".." in Path(path_text).parts:
        return f"'{path_text}' is not a path inside the repository"
    path = root / path_text
    if not path.is_file():
        return f"{path_text} does not exist"
    parts = name.split("::")
    if not all(IDENTIFIER.fullmatch(part) for part in parts):
        return f"'{name}' is not an identifier or Class::member name"
    text = path.read_text(encoding="utf-8", errors="replace")
    missing = [part for part in parts if not occurs(part, text)]
    if missing:
        return f"{path_text} has no {', '.join(repr(m) for m in missing)} (for '{name}')"
    return None


def check_table(root, doc_name, lines, heading):
    """(rows checked, failures) of one table."""
    header, rows = read_table(lines, heading)
    try:
        file_column = header.index("file")
        name_column = header.index("function")
    except ValueError:
        raise ValueError(f"the table under '{heading}' needs a 'file' and a 'function' column, has {header}")
    failures = []
    for number, cells in rows:
        # The row's own words: every cell before its file column (the behaviour; the binary and thread).
        label = f"{doc_name}:{number}: {' / '.join(cells[:file_column]) if cells else ''}"
        if len(cells) != len(header):
            failures.append(f"{label}: {len(cells)} cells where the header has {len(header)}")
            continue
        path_text = only_backticked(cells[file_column])
        name = only_backticked(cells[name_column])
        if path_text is None or name is None:
            failures.append(f"{label}: the file and function cells must each be one backticked name")
            continue
        problem = check_row(root, path_text, name)
        if problem:
            failures.append(f"{label}: {problem}")
    return len(rows), failures


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    doc = Path(argv[1])
    root = Path(argv[2])
    if not doc.is_file() or not root.is_dir():
        print(f"code map: {doc} is not a file or {root} is not a directory", file=sys.stderr)
        return 2
    text = doc.read_text(encoding="utf-8")
    section = section_lines(text, SECTION)
    if section is None:
        print(f"code map: {doc} has no '{SECTION}' section", file=sys.stderr)
        return 1
    section_text = "\n".join(line for _, line in section)

    failures = []
    counts = {}
    for heading in (BEHAVIOUR_TABLE, THREAD_TABLE):
        lines = section_lines(section_text, heading)
        if lines is None:
            failures.append(f"{doc}: no '{heading}' under '{SECTION}'")
            continue
        # Line numbers of the whole document, not of the section.
        offset = section[0][0] - 1
        lines = [(n + offset, line) for n, line in lines]
        try:
            counts[heading], table_failures = check_table(root, str(doc), lines, heading)
        except ValueError as e:
            failures.append(f"{doc}: {e}")
            continue
        failures.extend(table_failures)

    behaviours = counts.get(BEHAVIOUR_TABLE, 0)
    if BEHAVIOUR_TABLE in counts and behaviours < MIN_BEHAVIOURS:
        failures.append(f"{doc}: the behaviour table has {behaviours} rows, fewer than {MIN_BEHAVIOURS}")

    for failure in failures:
        print(f"FAIL {failure}")
    total = sum(counts.values())
    print(f"code map: {total} rows checked ({behaviours} behaviours, {counts.get(THREAD_TABLE, 0)} threads), "
          f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
