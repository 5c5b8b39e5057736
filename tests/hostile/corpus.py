#!/usr/bin/env python3
"""Hostile-database corpus (issue 20): builds a small synthetic database with
the golden tests' mkdb, derives damaged and forged copies from it (special
files, links out, forged numbers, hostile names, every file truncated and
bit-flipped), and runs every report over each. Each run must end within a
time limit, exit 0 or 1 (1 with one line on stderr), and print no raw control
byte in text output. Nothing large is committed: the corpus is made here.

Environment: ECPI, MKDB, ANNOTEST (as for tests/golden)."""
import json, os, shutil, stat, subprocess, sys, tempfile

ECPI, MKDB, ANNOTEST = os.environ["ECPI"], os.environ["MKDB"], os.environ["ANNOTEST"]
LIMIT = 20  # seconds: a report over a few-KB database that takes longer hangs
EVIL = "evil\n\033[31mRED\033[0m\033]0;owned\007"

failures = []


def spec(image_path, comm):
    return {"epochs": [{
        "meta": {"hostname": "h", "processes": {"100": {"comm": comm, "cmdline": comm + " 1"}}},
        "profiles": [
            {"image": ANNOTEST, "event": "cpu-clock", "period": 1000000, "samples": [
                {"pid": 100, "symbol": "hot_loop", "offset": 0, "count": 200},
                {"pid": 100, "symbol": "leaf_work", "offset": 0, "count": 300}]},
            {"image": image_path, "build_id": "0123456789abcdef0123", "event": "cpu-clock", "period": 1000000,
             "samples": [{"pid": 100, "address": 4096, "count": 15}]}]}]}


def make_db(root, name, image_path="/nonexistent/libgone.so", comm="annotest"):
    path = os.path.join(root, name)
    spec_path = path + ".spec.json"
    with open(spec_path, "w") as f:
        json.dump(spec(image_path, comm), f)
    made = subprocess.run([MKDB, spec_path, path], capture_output=True, text=True)
    if made.returncode != 0:
        sys.exit("making %s: %s" % (name, made.stderr))
    return path


def epoch_dir(db):
    return os.path.join(db, "epochs", "00001")


def data_files(db):
    d = epoch_dir(db)
    return sorted(os.path.join(d, n) for n in os.listdir(d) if not n.startswith("."))


CLEAN = []  # a clean database to diff against, made first


def reports(db):
    other = CLEAN[0]
    return [["prof", db], ["prof", db, "--by", "image"], ["calc", db], ["stats", db], ["export", db, "--format", "folded"],
            ["diff", db, other]]


def run_reports(case, db):
    for args in reports(db):
        try:
            run = subprocess.run([ECPI] + args, capture_output=True, timeout=LIMIT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            failures.append("%s: `ecpi %s` hung (over %d s)" % (case, " ".join(args[:1]), LIMIT))
            continue
        where = "%s: `ecpi %s`" % (case, " ".join(a.replace(db, "DB") for a in args))
        if run.returncode not in (0, 1, 2):
            failures.append("%s exited %d (a crash?): %s" % (where, run.returncode, run.stderr.decode(errors="replace")))
            continue
        for stream, data in (("stdout", run.stdout), ("stderr", run.stderr)):
            bad = [b for b in data if (b < 0x20 and b not in (0x0a, 0x09)) or b == 0x7f]
            if bad:
                failures.append("%s put raw control byte 0x%02x on %s" % (where, bad[0], stream))
        if run.returncode != 0:
            lines = [l for l in run.stderr.decode(errors="replace").splitlines() if l.strip()]
            if len(lines) != 1:
                failures.append("%s: an error must be one line, got %d: %r" % (where, len(lines), lines))


def main():
    tmp = tempfile.mkdtemp(prefix="ecpi-hostile-")
    cases = 0
    try:
        outside = os.path.join(tmp, "outside")
        os.mkdir(outside)

        def fresh(name, **kw):
            nonlocal cases
            cases += 1
            return make_db(tmp, name, **kw)

        CLEAN.append(make_db(tmp, "clean"))
        # 1. Special files where profiles belong.
        db = fresh("fifo")
        os.mkfifo(os.path.join(epoch_dir(db), "x.cpu-clock.prof"))
        os.mkfifo(os.path.join(epoch_dir(db), "y.stk"))
        run_reports("fifo in the epoch", db)
        db = fresh("fifo_meta")
        meta = os.path.join(epoch_dir(db), "epoch.json")
        if os.path.exists(meta):
            os.unlink(meta)
        os.mkfifo(meta)
        run_reports("fifo as epoch.json", db)
        # 2. Image paths forged to devices and secrets.
        for i, forged in enumerate(["/dev/zero", "/dev/urandom", "/etc/shadow", "/proc/self/mem"]):
            run_reports("image path " + forged, fresh("image%d" % i, image_path=forged))
        # 3. Hostile names.
        run_reports("hostile image name", fresh("evil_image", image_path="/tmp/" + EVIL))
        run_reports("hostile command name", fresh("evil_comm", comm=EVIL))
        # 4. Links out of the database.
        db = fresh("link_epoch")
        shutil.copytree(epoch_dir(db), os.path.join(outside, "epoch"))
        os.symlink(os.path.join(outside, "epoch"), os.path.join(db, "epochs", "00002"))
        run_reports("epoch linked out", db)
        db = fresh("link_file")
        for path in data_files(db):
            if path.endswith(".prof"):
                target = os.path.join(outside, os.path.basename(path))
                shutil.move(path, target)
                os.symlink(target, path)
        run_reports("profile files linked out", db)
        # 5. Forged numbers in epoch.json.
        for i, forged in enumerate([{"events": {"cpu-clock": {"samples": 2**64 - 1, "period": 1000000}}},
                                    {"cpu_mhz": -1}, {"cpu_mhz": 1e308}, {"cpu_mhz_sampled": -1},
                                    {"events": {"cpu-clock": {"samples": 10, "unknown": 2**63}}}]):
            db = fresh("forged%d" % i)
            doc = {"schema": "ecpi.epoch", "version": 1}
            doc.update(forged)
            with open(os.path.join(epoch_dir(db), "epoch.json"), "w") as f:
                json.dump(doc, f)
            run_reports("forged epoch.json %s" % json.dumps(forged), db)
        # 6. Every file truncated (to 0, half, all but one byte) and bit-flipped.
        base = fresh("base")
        for k, path in enumerate(data_files(base)):
            size = os.path.getsize(path)
            for cut in sorted({0, size // 2, max(size - 1, 0)}):
                db = fresh("trunc%d_%d" % (k, cut))
                target = os.path.join(epoch_dir(db), os.path.basename(path))
                with open(target, "r+b") as f:
                    f.truncate(cut)
                run_reports("%s truncated to %d" % (os.path.basename(path), cut), db)
            for bit in range(0, size * 8, max(1, size * 8 // 6)):
                db = fresh("flip%d_%d" % (k, bit))
                target = os.path.join(epoch_dir(db), os.path.basename(path))
                with open(target, "r+b") as f:
                    data = bytearray(f.read())
                    data[bit // 8] ^= 1 << (bit % 8)
                    f.seek(0)
                    f.write(data)
                run_reports("%s bit %d flipped" % (os.path.basename(path), bit), db)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    print("%d damaged or forged databases, %d failures" % (cases, len(failures)))
    sys.exit(1 if failures else 0)


main()
