// SPDX-License-Identifier: GPL-2.0
/* The empty perf-event handler of bench/overhead.sh's baseline: it does
 * nothing, so what it costs is the sampling itself (timer interrupt, perf
 * overflow path, BPF dispatch), the floor any BPF profiler pays. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("perf_event")
int ecpi_bench_empty(void *ctx)
{
	return 0;
}
