#!/bin/sh
# I-cache: writes a call-heavy C program whose code footprint is far larger
# than the L1 I-cache: FUNCS small functions, each aligned to 4 KiB, called in
# turn. The alignment maps every entry to the same L1 I-cache set (and the
# same few L2 sets), so each call misses the I-cache however large the
# cache. Each function multiplies twice (unstalled issue points for frequency
# estimation, DCPI 6.1.3); the chain through the functions is short, so the
# back end has no backlog to hide the fetch behind.
# Usage: gen_icache.sh FUNCS > icache.c
funcs=${1:-128}
echo '#include <stdio.h>'
echo '#include <stdlib.h>'
i=0
while [ $i -lt "$funcs" ]; do
	echo "__attribute__((noinline, aligned(4096))) unsigned long f$i(unsigned long x, unsigned long m) { return (x * m) * m + $i; }"
	i=$((i + 1))
done
echo 'int main(int argc, char **argv) {'
echo '  long reps = argc > 1 ? atol(argv[1]) : 2000;'
echo '  unsigned long x = 1, m = 0x9e3779b97f4a7c15ul + (unsigned long)argc;'
echo '  for (long r = 0; r < reps; r++) {'
i=0
while [ $i -lt "$funcs" ]; do
	echo "    x = f$i(x, m);"
	i=$((i + 1))
done
echo '  }'
printf '%s\n' '  printf("%lu\n", x); return 0; }'
