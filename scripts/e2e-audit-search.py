#!/usr/bin/env python3
"""The search and the table of scripts/e2e-audit: which text is in which artefact.

  --text NAME=TEXT          a text to look for (numbered 1, 2, ... in the order given)
  --secret NAME=FILE[:FILE] an artefact no text may be in (a core dump, Redis's files, a capture)
  --history NAME=FILE=N,M   a client's history, which must hold texts N, M, ...
  --control NAME=TEXT       metadata the relay must know (a room name), which every secret
                            artefact must hold: shows the search sees into each artefact, so
                            that "absent" there means something (columns c1, c2, ...)

A text is found in a file when its UTF-8 bytes, its JSON-escaped form, its UTF-16 encodings
(either byte order) or its base64 encodings (standard or URL-safe, at each of the three
alignments within a longer encoded string) occur in the file's bytes. Exits 1 when a text is
in a secret artefact, missing from a history that must hold it, or a control text is missing
from a secret artefact.
"""
import argparse
import base64
import json
import math
import sys


def base64_forms(text):
    """The base64 characters that encode `text` wherever it starts in a longer encoded string:
    for each alignment, only the characters made of the text's bits alone."""
    forms = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + text)
        first = math.ceil(8 * offset / 6)
        last = (8 * (offset + len(text))) // 6
        core = encoded[first:last]
        forms += [core, core.translate(bytes.maketrans(b"+/", b"-_"))]
    return forms


def forms_of(text):
    """Every encoding a text is looked for in, with a short name each."""
    raw = text.encode("utf-8")
    forms = [("utf-8", raw)]
    escaped = json.dumps(text)[1:-1].encode("utf-8")
    if escaped != raw:
        forms.append(("json", escaped))
    forms += [("utf-16le", text.encode("utf-16-le")), ("utf-16be", text.encode("utf-16-be"))]
    forms += [("base64", form) for form in base64_forms(raw)]
    return forms


def find(text, paths):
    """The names of the forms of `text` found in any of `paths` ("utf-8+base64"), or None."""
    found = []
    for path in paths:
        with open(path, "rb") as file:
            data = file.read()
        for name, form in forms_of(text):
            if name not in found and form in data:
                found.append(name)
    return "+".join(found) or None


def named(value, parts):
    pieces = value.split("=", parts - 1)
    if len(pieces) != parts:
        sys.exit(f"e2e-audit-search: expected NAME=... in {value!r}")
    return pieces


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", action="append", default=[])
    parser.add_argument("--secret", action="append", default=[])
    parser.add_argument("--history", action="append", default=[])
    parser.add_argument("--control", action="append", default=[])
    arguments = parser.parse_args()
    texts = [named(value, 2) for value in arguments.text]
    controls = [named(value, 2) for value in arguments.control]
    rows = []  # (artefact, paths, texts that must be there or None for a secret artefact)
    for value in arguments.secret:
        name, paths = named(value, 2)
        rows.append((name, [path for path in paths.split(":") if path], None))
    for value in arguments.history:
        name, path, numbers = named(value, 3)
        rows.append((name, [path], {int(number) for number in numbers.split(",")}))

    width = max(len(row[0]) for row in rows)
    print("texts:")
    for number, (name, text) in enumerate(texts, 1):
        print(f"  {number}. {name}: {text!r}")
    for number, (name, text) in enumerate(controls, 1):
        print(f"  c{number}. {name} (control: must be in every core dump, Redis file and capture): {text!r}")
    print()
    columns = [str(number) for number in range(1, len(texts) + 1)] + [f"c{number}" for number in range(1, len(controls) + 1)]
    print(f"{'artefact':<{width}}  " + "  ".join(f"{column:<20}" for column in columns))
    problems = []
    for name, paths, must_hold in rows:
        cells = []
        for number, (text_name, text) in enumerate(texts, 1):
            found = find(text, paths)
            if must_hold is None:
                cell = f"LEAK ({found})" if found else "absent"
                if found:
                    problems.append(f"{text_name} is in {name} ({found})")
            elif number in must_hold:
                cell = f"found ({found})" if found else "MISSING"
                if not found:
                    problems.append(f"{text_name} is missing from {name}")
            else:
                cell = f"found ({found})" if found else "-"
            cells.append(f"{cell:<20}")
        for control_name, control in controls:
            found = find(control, paths)
            if must_hold is None and not found:
                problems.append(f"control {control_name} is missing from {name}: the search does not see into it")
            cells.append(f"{('found (' + found + ')') if found else ('MISSING' if must_hold is None else '-'):<20}")
        print(f"{name:<{width}}  " + "  ".join(cells))
    print()
    if problems:
        print("FAIL:")
        for problem in problems:
            print(f"  {problem}")
        sys.exit(1)
    print("PASS: no text in any core dump, Redis file or capture; every text in its receivers' history;"
          " every control in every core dump, Redis file and capture")


if __name__ == "__main__":
    main()
