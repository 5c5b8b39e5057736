# Front door for new users: `make demo` and `make test` install what is
# missing, build, and run. The build itself is CMake (build/).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps test-deps build demo test package clean

all: build

# `make demo` installs only what the build and the demo need; `make test`
# adds what the tests need (a browser, Go, ClickHouse, BOLT, valgrind, ...).
deps:
	@bash scripts/install-deps.sh

test-deps:
	@bash scripts/install-deps.sh --test

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: test-deps build
	@ctest --test-dir $(BUILD) --output-on-failure -j1

# A Debian package of what `build` made: build/ecpi_VERSION_ARCH.deb
# (then: sudo apt install ./build/ecpi_*.deb; cmake/package.cmake).
package: build
	@cd $(BUILD) && cpack -G DEB >/dev/null && ls -1 "$$PWD"/ecpi_*.deb

clean:
	rm -rf $(BUILD)
