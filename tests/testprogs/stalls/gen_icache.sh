#!/bin/sh
# I-cache: writes a C program whose hot code (FUNCS straight-line functions
# of about 400 bytes, called in turn) is far larger than the L1 I-cache
# (32-48 KiB) and L2's share, so fetch misses dominate. Usage: gen_icache.sh FUNCS > icache.c
funcs=${1:-2048}
echo '#include <stdio.h>'
echo '#include <stdlib.h>'
i=0
while [ $i -lt "$funcs" ]; do
	echo "__attribute__((noinline)) unsigned long f$i(unsigned long x) {"
	j=0
	while [ $j -lt 24 ]; do
		echo "  x = (x ^ (x >> $((j % 13 + 3)))) * $((i * 2 + j * 7 + 1))ul + $((i + j));"
		j=$((j + 1))
	done
	echo "  return x; }"
	i=$((i + 1))
done
echo 'int main(int argc, char **argv) {'
echo '  long reps = argc > 1 ? atol(argv[1]) : 2000; unsigned long x = 1;'
echo '  for (long r = 0; r < reps; r++) {'
i=0
while [ $i -lt "$funcs" ]; do
	echo "    x = f$i(x);"
	i=$((i + 1))
done
echo '  }'
printf '%s\n' '  printf("%lu\n", x); return 0; }'
