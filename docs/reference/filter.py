#!/usr/bin/env python3
"""Doxygen's input filter for tern's headers: reads them as their comments
are written. The headers use plain // comments, each about the lines right
below it until a blank line; Doxygen wants /// and groups. So, outside
function bodies:

- a comment line (// ...) becomes a Doxygen one (/// ...);
- a comment on the end of a member's line (int x;  // ...) documents that
  member (///< ...);
- a comment followed by several declarations, with no blank line between,
  documents each of them: they become a member group whose documentation
  is the comment (DISTRIBUTE_GROUP_DOC). A run that opens a class, a struct,
  an enum or a namespace is left alone.

The files are not changed: Doxygen reads them through this (INPUT_FILTER)."""
import re
import sys

COMMENT = re.compile(r"^(\s*)//(?!/)( ?)(.*)$")
# A member's line with a comment on its end: a declaration (ending in ; or ,)
# or a definition whose body is on the line.
TRAILING = re.compile(r"^(\s*[^/\s}].*?(?:[;,]|\{.*\}))(\s+)//(?!/) (.*)$")
SCOPE = re.compile(r"^\s*(template\s*<.*>\s*)?(class|struct|enum|union|namespace)\b|^\s*extern \"C\"")


def braces(line):
    """The line's braces, in order, outside strings and comments."""
    code = line.split("//", 1)[0]
    code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
    code = re.sub(r"'(\\.|[^'\\])*'", "''", code)
    return [c for c in code if c in "{}"]


class Scopes:
    """Which braces are open: a scope (class, namespace) or code (a body)."""

    def __init__(self):
        self.stack = []

    def in_code(self):
        return "code" in self.stack

    def feed(self, line):
        kind = "scope" if SCOPE.match(line) else "code"
        for brace in braces(line):
            if brace == "{":
                self.stack.append(kind)
                kind = "code"  # a brace after the scope's own is code's
            elif self.stack:
                self.stack.pop()


def member(line):
    trailing = TRAILING.match(line)
    if trailing and trailing.group(3).startswith("NOLINT"):
        return line  # a note to clang-tidy, not documentation
    return f"{trailing.group(1)}{trailing.group(2)}///< {trailing.group(3)}" if trailing else line


def convert(lines):
    out = []
    closers = set()  # lines of `out` that end a group before anything else
    scopes = Scopes()
    i = 0
    while i < len(lines):
        match = None if scopes.in_code() else COMMENT.match(lines[i])
        if not match:
            out.append(lines[i] if scopes.in_code() else member(lines[i]))
            scopes.feed(lines[i])
            i += 1
            continue
        indent = match.group(1)
        start = i
        while i < len(lines) and COMMENT.match(lines[i]) and COMMENT.match(lines[i]).group(1) == indent:
            i += 1
        comment = [COMMENT.sub(r"\1///\2\3", line) for line in lines[start:i]]
        # The run of lines the comment is about: to a blank line, or to a
        # comment at its own level.
        run = Scopes()
        end = i
        declarations = 0
        groupable = True
        while end < len(lines) and lines[end].strip():
            line = lines[end]
            if not run.in_code():
                if COMMENT.match(line) or (not run.stack and line.strip().startswith("}")):
                    break  # the next comment's, or the end of the enclosing scope
                if SCOPE.match(line) or line.strip().startswith(("public:", "private:", "protected:", "#")):
                    groupable = False
                declarations += 1
            run.feed(line)
            end += 1
        if run.stack or declarations < 2 or not groupable:
            out.extend(comment)
            continue
        # The group's markers go on lines already there (the one before the
        # comment, the run's last), so that Doxygen's line numbers are the
        # file's.
        if out and not out[-1].strip():
            out[-1] = "/**@{*/"
        else:
            comment[0] = f"{indent}/**@{{*/ {comment[0].lstrip()}"
        out.extend(comment)
        body = Scopes()
        for line in lines[i:end]:
            out.append(line if body.in_code() else member(line))
            body.feed(line)
        closers.add(len(out))  # on the line after the run
        i = end
    for k in closers:
        if k < len(out):
            out[k] = "/**@}*/" if not out[k].strip() else "/**@}*/ " + out[k]
    return out


HEADLINE = re.compile(r"^// ([A-Z]\w*)(?:<[\w, ]*>)?(?:, ([A-Z]\w*)(?:<[\w, ]*>)?)*:")
NAMESPACE = re.compile(r"^namespace ([\w:]+) \{")


def headline(lines):
    """The file's opening comment, "// Buffer: a growable byte buffer ...",
    is also the documentation of the class it names: a \\class command
    (with the namespace the file declares it in) says so to Doxygen."""
    match = HEADLINE.match(lines[0]) if lines else None
    if not match:
        return lines
    names = re.findall(r"([A-Z]\w*)(?:<[\w, ]*>)?(?=[,:])", lines[0].split(":")[0] + ":")
    found = [(n, k) for n in names for k, line in enumerate(lines)
             if re.match(rf"^\s*(template\s*<.*>\s*)?(class|struct) {n}\b(?!;)", line)]
    if len(found) != 1:
        return lines
    name, at = found[0]
    # The namespace the class is declared in: the last one opened before it.
    namespace = next((m.group(1) for m in map(NAMESPACE.match, reversed(lines[:at])) if m), "")
    declared = [name]
    end = next((k for k, line in enumerate(lines) if not line.startswith("//")), len(lines))
    if end >= len(lines) or lines[end].strip() != "#pragma once":
        return lines
    qualified = f"{namespace}::{declared[0]}" if namespace else declared[0]
    # In place of `#pragma once`, which means nothing to Doxygen: the line
    # numbers stay the file's.
    return lines[:end] + [f"// \\class {qualified}"] + lines[end + 1:]


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read().split("\n")
    sys.stdout.write("\n".join(convert(headline(text))))
