#!/usr/bin/env python3
"""Every path a map document names exists in the tree.

A reader follows docs/architecture.md to the code; a path there that no longer
exists sends them nowhere. This reads each document given, finds what looks like
a repository path (a name with a known source extension, or a top-level folder
followed by a path), expands shell braces (sqlite_rows.{h,cc}) and checks it:

  - a path with a slash must be a tracked file or folder, either from the
    repository root or as the tail of one (sections name files relative to the
    folder they describe: "sql/tokens.cc" under controller/store);
  - a bare file name must be the name of some tracked file.

Paths outside the repository (../shared/..., another project's file named
together with its project, e.g. "Ironic's drivers/base.py") are skipped when the
line says whose they are: see EXTERNAL below.

Usage: doc_paths_test.py REPO_ROOT DOC [DOC...]; exit 1 listing every missing path.
"""
import os
import re
import subprocess
import sys

EXTS = "h|cc|md|ts|tsx|sql|yaml|yml|py|sh|json|css|txt|cu|toml"
FILE_RE = re.compile(r"(?<![A-Za-z0-9_./{},*-])([A-Za-z0-9_.{},/-]+\.(?:" + EXTS + r"|\{[A-Za-z,]+\}))(?![A-Za-z0-9_])")
DIR_RE = re.compile(r"(?<![A-Za-z0-9_./-])((?:agent|bench|cli|common|controller|docs|drivers|schemas|scripts|tests|tools|web)/[A-Za-z0-9_./-]*)")
# A line naming another project's file says so; these words mark it.
EXTERNAL = re.compile(r"Ironic|MAAS|Tinkerbell|Metal3|openstack|bitcoin|Grafana|upstream|\.\./shared", re.I)


def expand(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand(token[: m.start()] + alt + token[m.end():]))
    return out


def main():
    root, docs = sys.argv[1], sys.argv[2:]
    tracked = subprocess.run(["git", "-C", root, "ls-files"], check=True, capture_output=True,
                             text=True).stdout.split("\n")
    tracked = [t for t in tracked if t]
    files = set(tracked)
    dirs = set()
    for t in tracked:
        parts = t.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    names = {t.rsplit("/", 1)[-1] for t in tracked}

    def exists(path):
        path = path.rstrip("./")
        if not path:
            return True
        if path in files or path in dirs:
            return True
        if "/" not in path:
            return path in names
        tail = "/" + path
        return any(t.endswith(tail) for t in files) or any(d.endswith(tail) for d in dirs)

    missing = []
    checked = 0
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if EXTERNAL.search(line):
                    continue
                file_tokens = set(FILE_RE.findall(line))
                # A folder match that is the start of a file match is that file.
                dir_tokens = {d for d in DIR_RE.findall(line) if not any(f.startswith(d) for f in file_tokens)}
                tokens = file_tokens | dir_tokens
                for token in tokens:
                    if "*" in token or token.startswith("http"):
                        continue
                    for path in expand(token):
                        checked += 1
                        if not exists(path):
                            missing.append(f"{doc}:{lineno}: {path}")
    if checked == 0:
        print("no paths found: the pattern or the documents are wrong", file=sys.stderr)
        return 1
    for m in missing:
        print("missing: " + m)
    print(f"{checked} paths checked in {len(docs)} document(s), {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
