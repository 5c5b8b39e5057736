#!/usr/bin/env python3
"""Lists functions longer than a limit (default 100 lines) in C/C++ sources.

A function is a top-level or namespace/class-level brace block whose opening
line looks like a definition (a ')' before the '{', possibly with const,
noexcept, override, -> type or an initializer list). Lengths are counted from
the line that opens the body to the line that closes it, by brace matching on
text with comments, strings and character literals blanked out. Used to check
issue 28's "at most 5 functions over 100 lines" and STYLE.md rule 13.

usage: scripts/long_functions.py [--limit N] [PATH...]   (default: the source folders)
"""
import os
import re
import sys

FOLDERS = ["analyze", "loader", "store", "fleet", "runtime", "bpf", "include"]
EXTS = (".cpp", ".cc", ".h", ".c")


def blank(text):
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i-1].isalnum() or text[i-1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c); i += 1; continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    depth, stack, found = 0, [], []
    line = 1
    for idx, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            head = text[max(0, idx - 400):idx]
            head = head[head.rfind(";") + 1:] if ";" in head else head
            head = head[head.rfind("}") + 1:] if "}" in head else head
            is_fn = bool(re.search(r"\)\s*(const|noexcept|override|final|mutable|\s|->\s*[\w:<>,\s*&]+|:\s*[\w:]+\s*[({][^;]*?[)}]\s*,?)*$", head, re.S)) \
                and not re.search(r"\b(if|for|while|switch|catch)\s*\(", head.split("\n")[-1] if head.strip() else "") \
                and not re.search(r"=\s*\[[^\]]*\]\s*\(", head) and not re.search(r"\[[^\]]*\]\s*\([^)]*\)\s*(mutable\s*)?(->\s*[\w:<>]+\s*)?$", head)
            name = ""
            if is_fn:
                m = re.findall(r"([~\w:]+(?:<[^<>]*>)?::)?(~?\w+|operator\S+)\s*\(", head)
                name = (m[0][0] + m[0][1]) if m else "?"
            stack.append((is_fn and not any(s[0] for s in stack), line, name))
        elif c == "}":
            if stack:
                is_fn, start, name = stack.pop()
                if is_fn:
                    found.append((line - start + 1, start, name))
    return found


def main(argv):
    limit = 100
    if argv[:1] == ["--limit"]:
        limit = int(argv[1]); argv = argv[2:]
    roots = argv or FOLDERS
    rows = []
    for root in roots:
        paths = [root] if os.path.isfile(root) else [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(EXTS)]
        for p in sorted(paths):
            for length, start, name in functions(p):
                if length > limit:
                    rows.append((length, f"{p}:{start}", name))
    for length, where, name in sorted(rows, reverse=True):
        print(f"{length:5d}  {where}  {name}")
    print(f"{len(rows)} functions over {limit} lines", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
