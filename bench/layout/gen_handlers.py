#!/usr/bin/env python3
"""Writes the layout benchmark's workload (issue 17's description) to stdout:
N request handlers, of which every K-th is hot; each handler has a common
cheap path and a rare path that looks a value up in a table far larger than
the caches (a miss). Code order interleaves hot and cold handlers, so the
hot code is spread over many pages, as in a large program that grew by
accretion. Usage: gen_handlers.py [N=1600] [K=10]"""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1600
k = int(sys.argv[2]) if len(sys.argv) > 2 else 10
out = ["#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>", "",
       "#define TABLE (1u << 24)  /* 128 MiB of uint64_t: a rare path misses every cache */",
       "static uint64_t *table;", "struct request { uint64_t id, flags, value; };", ""]
for i in range(n):
    out.append(f"""__attribute__((noinline)) uint64_t handler_{i}(struct request *r)
{{
	uint64_t v = r->value * {2 * i + 3}u + r->id;
	if (((r->value >> {i % 16}) & 1023) < 16) {{
		/* rare: a lookup that misses, and some bookkeeping */
		uint64_t slot = (v * 0x9e3779b97f4a7c15ull) >> 40;
		v ^= table[slot % TABLE];
		table[(slot + {i}) % TABLE] += v;
		r->flags |= 1ull << 32;
	}} else {{
		v = (v << 3) ^ (v >> 5) ^ {i}u;
	}}
	return v;
}}
""")
out.append("typedef uint64_t (*handler)(struct request *);")
out.append("static const handler handlers[] = {" + ", ".join(f"handler_{i}" for i in range(n)) + "};")
out.append(f"""
int main(int argc, char **argv)
{{
	uint64_t requests = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
	table = calloc(TABLE, sizeof *table);
	if (!table) {{ perror("calloc"); return 1; }}
	uint64_t state = 88172645463325252ull, sum = 0;
	for (uint64_t i = 0; i < requests; i++) {{
		state ^= state << 13; state ^= state >> 7; state ^= state << 17;
		struct request r = {{i, state, state >> 17}};
		/* hot handlers: every {k}th; the others are called once in a while */
		unsigned h = (state >> 48) % 128 ? (unsigned)((state >> 20) % {n // k}) * {k} : (unsigned)((state >> 20) % {n});
		sum += handlers[h](&r);
	}}
	printf("%llu\\n", (unsigned long long)sum);
	return 0;
}}""")
print("\n".join(out))
