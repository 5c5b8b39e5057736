/* A plugin host that reloads its plugin (tests/bpf/record_reload.sh): it
 * dlopen()s the first plugin, runs it, dlclose()s it, then dlopen()s the
 * second, which the loader maps at the address the first one left free,
 * and runs that. The two plugins' code sits at the same addresses with
 * different frames (reload_alpha.c keeps a frame pointer and a large stack
 * frame, reload_beta.c neither), so a walk of the second phase by rows found
 * in the first one goes wrong. Both phases' chains reach the thread's root:
 *   _start -> ... -> main -> host_run_plugin -> plugin_run -> <plugin's chain>
 * Prints each plugin's load address on stderr ("loaded PATH at 0xADDR") and
 * exits 3 when the first one stayed mapped after its dlclose (the second
 * could not reuse its addresses).
 * Usage: reload FIRST.so SECOND.so SECONDS-EACH */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

typedef unsigned long (*plugin_run_fn)(double seconds);

static volatile unsigned long sink;

static void *load_plugin(const char *path, plugin_run_fn *run)
{
	struct link_map *map;
	void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!handle) {
		fprintf(stderr, "reload: %s\n", dlerror());
		exit(2);
	}
	*run = (plugin_run_fn)dlsym(handle, "plugin_run");
	if (!*run || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0) {
		fprintf(stderr, "reload: %s: no plugin_run or link map: %s\n", path, dlerror());
		exit(2);
	}
	fprintf(stderr, "loaded %s at %#lx\n", path, (unsigned long)map->l_addr);
	return handle;
}

__attribute__((noinline)) static void host_run_plugin(const char *path, double seconds)
{
	plugin_run_fn run;
	void *handle = load_plugin(path, &run);

	sink += run(seconds);
	if (dlclose(handle) != 0) {
		fprintf(stderr, "reload: %s\n", dlerror());
		exit(2);
	}
	if (dlopen(path, RTLD_NOW | RTLD_NOLOAD)) {
		fprintf(stderr, "reload: %s stayed loaded after dlclose\n", path);
		exit(3);
	}
}

int main(int argc, char **argv)
{
	double seconds;

	if (argc != 4) {
		fprintf(stderr, "usage: reload FIRST.so SECOND.so SECONDS-EACH\n");
		return 2;
	}
	seconds = atof(argv[3]);
	host_run_plugin(argv[1], seconds);
	host_run_plugin(argv[2], seconds);
	return 0;
}
