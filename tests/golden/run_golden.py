#!/usr/bin/env python3
"""Golden tests (STYLE.md rule 10): run_golden.py CASE_DIR

A case directory holds case.json:
  {"dbs": ["run1", ...],          databases to build from tests/golden/dbs/<name>.json
   "args": ["stats", "@RUN1@"],   the ecpi command line (placeholders below)
   "exit": 0,                     expected exit status (default 0)
   "stderr": "regex",             must match stderr (optional); errors must be one line
   "output": "stdout" | PATH,     where the result goes (default stdout)
   "compare": "json" | "text" | "pprof" | "html" | "none",
   "ignore": ["key", ...],        JSON keys dropped everywhere before comparing
   "cwd": "@ANNOTEST_DIR@"}       where ecpi runs (optional; for relative paths in args)
and expected.json or expected.txt. JSON is compared by value. With
ECPI_UPDATE_GOLDENS=1 the expected file is rewritten from the actual output.

Placeholders: @<NAME>@ (a database made from dbs/<name>.json, upper case),
@TMP@, @OUT@ (a scratch directory), @ANNOTEST@, @ANNOTEST_DIR@ and
@ANNOTEST_BID@ (the test binary, its directory and its build id), @SRCDIR@ (the source tree). Outputs are normalized
back to the placeholders before comparing, so goldens hold no machine paths.
Environment: ECPI, MKDB, ANNOTEST, SRCDIR, PROTOC (optional: else protoc on PATH).
Exit 0 pass, 1 fail, 77 skip.
"""
import difflib
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else ""


def substitute(text, table):
    for key, value in table:
        text = text.replace(key, value)
    return text


def normalize(value, table):
    """Replaces machine-specific strings with their placeholders, recursively."""
    if isinstance(value, str):
        for key, real in table:
            value = value.replace(real, key)
        return value
    if isinstance(value, list):
        return [normalize(v, table) for v in value]
    if isinstance(value, dict):
        return {normalize(k, table): normalize(v, table) for k, v in value.items()}
    return value


def drop_keys(value, keys):
    if isinstance(value, list):
        return [drop_keys(v, keys) for v in value]
    if isinstance(value, dict):
        return {k: drop_keys(v, keys) for k, v in value.items() if k not in keys}
    return value


def documented_fields(srcdir, kind):
    """Field names docs/json-schema.md gives for a kind: (top level, any level).

    Top-level names are the backticked names in the first column of the
    section's tables ("`totals.<event>`" counts as "totals"); nested names may
    appear anywhere in the section."""
    text = open(os.path.join(srcdir, "docs", "json-schema.md")).read()
    marker = "## `%s`" % kind
    if marker not in text:
        fail("docs/json-schema.md has no section for %s" % kind)
    section = text.split(marker, 1)[1].split("\n## ", 1)[0]
    top, anywhere = set(), set(re.findall(r"`([A-Za-z_$][\w$]*)", section))
    for line in section.splitlines():
        if line.startswith("| `"):
            for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
                top.add(re.split(r"[.\[]", name)[0])
    return top, anywhere


def check_documented(doc, srcdir):
    """Every field an ecpi document carries is documented for its kind."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("ecpi."):
        return
    top, anywhere = documented_fields(srcdir, doc["schema"])
    missing = sorted(k for k in doc if k not in top)
    # Objects keyed by data (events, pids) are not walked; arrays of records are.
    def walk(value, path):
        if isinstance(value, list):
            for v in value:
                walk(v, path + "[]")
        elif isinstance(value, dict):
            for k, v in value.items():
                if k not in anywhere:
                    missing.append(path + "." + k)
                walk(v, path + "." + k)
    for key in ("rows", "sets", "lines", "blocks", "frames", "a", "b"):
        if key in doc:
            walk(doc[key], key)
    if missing:
        fail("%s fields not documented in docs/json-schema.md: %s" % (doc["schema"], ", ".join(missing)))


def html_data(page):
    for url in ("http://", "https://"):
        if url in page:
            fail("the html page refers to the network (%s)" % url)
    m = re.search(r'<script id="ecpi-data" type="application/json">(.*?)</script>', page, re.S)
    if not m:
        fail("no data block in the html page")
    return json.loads(m.group(1))


def pprof_text(data, protoc):
    raw = gzip.decompress(data)
    proto = os.path.join(HERE, "profile.proto")
    out = subprocess.run([protoc, "--proto_path=" + HERE, "--decode=perftools.profiles.Profile", proto],
                         input=raw, capture_output=True, check=False)
    if out.returncode != 0:
        fail("protoc could not decode the pprof output: " + out.stderr.decode())
    text = out.stdout.decode()
    # Link-time addresses depend on the compiler: keep the structure only.
    # and which line each address falls on (tests/unit/symbols checks lines
    # against addr2line); function declarations (start_line) stay exact.
    text = re.sub(r"\b(address|memory_start|memory_limit): \d+", r"\1: @ADDR@", text)
    return re.sub(r"\bline: \d+", "line: @LINE@", text)


def check_schema_first(data):
    """docs/json-schema.md: "schema" and "version" start every document, in
    the text itself (a reader may look only at the first lines)."""
    keys = json.loads(data, object_pairs_hook=lambda pairs: [k for k, _ in pairs])
    if isinstance(keys, list) and "schema" in keys and keys[:2] != ["schema", "version"]:
        fail("the document does not start with schema and version: its keys start %s" % keys[:3])


def main():
    case_dir = os.path.abspath(sys.argv[1])
    case = json.load(open(os.path.join(case_dir, "case.json")))
    ecpi, mkdb = os.environ["ECPI"], os.environ["MKDB"]
    annotest, srcdir = os.environ["ANNOTEST"], os.environ["SRCDIR"]
    compare = case.get("compare", "json")
    # protoc is looked up when the test runs, not when CMake configured: `make
    # demo` configures before `make test` installs protobuf-compiler (issue 34).
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    if compare == "pprof" and not protoc:
        print("SKIP: protoc not found on PATH (install protobuf-compiler: make test-deps)", file=sys.stderr)
        sys.exit(77)
    update = os.environ.get("ECPI_UPDATE_GOLDENS") == "1"

    tmp = tempfile.mkdtemp(prefix="ecpi-golden-")
    try:
        out_dir = os.path.join(tmp, "out")
        os.mkdir(out_dir)
        table = [("@OUT@", out_dir), ("@ANNOTEST_BID@", build_id(annotest)), ("@ANNOTEST@", annotest),
                 ("@ANNOTEST_DIR@", os.path.dirname(annotest)),
                 ("@SRCDIR@", srcdir)]
        for name in case.get("dbs", []):
            table.insert(0, ("@%s@" % name.upper(), os.path.join(tmp, name)))
        table.append(("@TMP@", tmp))
        for name in case.get("dbs", []):
            spec = substitute(open(os.path.join(HERE, "dbs", name + ".json")).read(), table)
            spec_path = os.path.join(tmp, name + ".spec.json")
            open(spec_path, "w").write(spec)
            made = subprocess.run([mkdb, spec_path, os.path.join(tmp, name)], capture_output=True, text=True)
            if made.returncode != 0:
                fail("making %s: %s" % (name, made.stderr))

        args = [substitute(a, table) for a in case["args"]]
        cwd = substitute(case["cwd"], table) if "cwd" in case else None  # for relative paths in args
        run = subprocess.run([ecpi] + args, capture_output=True, timeout=60, cwd=cwd)
        stderr = run.stderr.decode(errors="replace")
        want_exit = case.get("exit", 0)
        if run.returncode != want_exit:
            fail("ecpi %s exited %d, expected %d\nstderr: %s" % (" ".join(args), run.returncode, want_exit, stderr))
        if "stderr" in case and not re.search(case["stderr"], stderr):
            fail("stderr lacks /%s/: %s" % (case["stderr"], stderr))
        if want_exit != 0:
            lines = [l for l in stderr.splitlines() if l.strip()]
            if len(lines) != 1:
                fail("an error must be one line on stderr, got %d:\n%s" % (len(lines), stderr))
            if not lines[0].startswith("ecpi " + case["args"][0] + ": "):
                fail("the error line must start with 'ecpi %s: ': %s" % (case["args"][0], lines[0]))
        if compare == "none":
            return

        where = case.get("output", "stdout")
        data = run.stdout if where == "stdout" else open(substitute(where, table), "rb").read()
        # Longest real values first, so a database path is not cut by @TMP@.
        reverse = sorted(((k, v) for k, v in table if v), key=lambda kv: -len(kv[1]))
        if compare == "json" or compare == "html":
            actual = html_data(data.decode()) if compare == "html" else json.loads(data)
            if compare == "json":
                check_schema_first(data)
            check_documented(actual, srcdir)
            actual = drop_keys(normalize(actual, reverse), set(case.get("ignore", [])))
            expected_path = os.path.join(case_dir, "expected.json")
            if update:
                with open(expected_path, "w") as f:
                    json.dump(actual, f, indent=1, sort_keys=True)
                    f.write("\n")
                return
            expected = json.load(open(expected_path))
            if actual != expected:
                a = json.dumps(expected, indent=1, sort_keys=True).splitlines()
                b = json.dumps(actual, indent=1, sort_keys=True).splitlines()
                fail("output differs from %s:\n%s" % (expected_path, "\n".join(
                    difflib.unified_diff(a, b, "expected", "actual", lineterm=""))))
        else:
            text = pprof_text(data, protoc) if compare == "pprof" else data.decode()
            text = normalize(text, reverse)
            expected_path = os.path.join(case_dir, "expected.txt")
            if update:
                open(expected_path, "w").write(text)
                return
            expected = open(expected_path).read()
            if text != expected:
                fail("output differs from %s:\n%s" % (expected_path, "".join(
                    difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "expected", "actual"))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
    print("PASS")
