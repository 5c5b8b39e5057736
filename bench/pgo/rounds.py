#!/usr/bin/env python3
"""Interleaved timing rounds for bench/pgo.sh (issue 33).

    rounds.py TIMES PROGRAM ROUNDS SEED DIR ARGS... 

Runs ROUNDS rounds of PROGRAM's builds DIR/PROGRAM.VARIANT (VARIANTS in the
environment, space separated), each build once per round, in an order
shuffled afresh each round (seeded: SEED), so that neither a build's place in
the round nor a slow spell that lasts one round favours one build. Appends one
line per run to TIMES:

    PROGRAM VARIANT WALL CPU ROUND

WALL is the wall-clock seconds, CPU the child's user plus system seconds
(wait4's rusage: time the program spent on a CPU, not waiting for one; on
this 2-CPU VM the wall clock also counts other engineers' processes and the
other vCPU's interruptions). ROUND names the round (SEED-k), so that the
report pairs runs by round rather than by their order in the file.
"""
import os
import random
import sys
import time


def run_once(argv):
    """Wall and CPU seconds of one run of argv, its output discarded."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        start = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1),
                                           (os.POSIX_SPAWN_DUP2, devnull, 2)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
    finally:
        os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench/pgo/rounds.py: {argv[0]} failed ({status:#x}); run it by hand")
    return wall, usage.ru_utime + usage.ru_stime


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    times, program, rounds, seed, folder = sys.argv[1:6]
    args = sys.argv[6:]
    variants = os.environ["VARIANTS"].split()
    rng = random.Random(seed)
    with open(times, "a") as out:
        for k in range(int(rounds)):
            order = variants[:]
            rng.shuffle(order)
            for variant in order:
                wall, cpu = run_once([os.path.join(folder, f"{program}.{variant}")] + args)
                out.write(f"{program} {variant} {wall:.4f} {cpu:.4f} {seed}-{k}\n")
                out.flush()


if __name__ == "__main__":
    main()
