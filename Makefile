# The two commands a new user needs:
#   make run   install deps, build (Release), start kilnd with a demo lab: the VM lab
#              (scripts/lab: qemu VMs PXE-booted by kilnd) when this machine can run it
#              (root, qemu, network namespaces), else fake-driver nodes (scripts/run-demo).
#              KILN_LAB=0 forces the fake lab; LAB_VMS sets the number of VMs (default 2).
#   make web   the portal (web/): npm ci when package-lock.json changed, then the
#              Vite build into web/dist, which kilnd serves at / (both build targets
#              run it; the browser tests under tests/browser need it)
#   make test  install deps, build with -Werror + ASan/UBSan, run every test via CTest,
#              the VM lab end-to-end test included (label e2e, about 13 minutes; it skips
#              with a reason where the machine cannot run VMs)
#   make e2e   only the VM lab end-to-end test, on the Release build
#   make fuzz  every libFuzzer target (tests/fuzz), built optimised in build/fuzz, for
#              FUZZ_SECONDS each (default 60); `make test` runs each for 3 s
JOBS ?= $(shell nproc)
# The compiler: clang 19 (scripts/install-deps installs it). GCC 12 miscompiles
# coroutine patterns (docs/coroutines.md); `make CC=gcc CXX=g++ ...` still picks another.
ifeq ($(origin CC),default)
CC := clang-19
endif
ifeq ($(origin CXX),default)
CXX := clang++-19
endif
RELEASE_DIR := build/release
KILN_LAB ?= 1
LAB_VMS ?= 2
TEST_DIR := build/test

FUZZ_SECONDS ?= 60

.PHONY: all deps web build build-test run test e2e fuzz bench clean

all: build

deps:
	@scripts/install-deps

# configure DIR OPTIONS: cmake with $(CC)/$(CXX). A build directory last configured with
# another compiler loses its cache first: CMake would drop it itself on the compiler change
# and reconfigure without the -D options given here (an ASan build would come back plain).
define configure
	@if [ -f $(1)/CMakeCache.txt ] && [ "$$(cat $(1)/.kiln-compiler 2>/dev/null)" != "$(CC) $(CXX)" ]; then \
	  echo "$(1): configured with another compiler; starting its CMake cache afresh"; \
	  rm -rf $(1)/CMakeCache.txt $(1)/CMakeFiles; \
	fi
	cmake -S . -B $(1) -DCMAKE_C_COMPILER=$(CC) -DCMAKE_CXX_COMPILER=$(CXX) $(2)
	@echo "$(CC) $(CXX)" > $(1)/.kiln-compiler
endef

# npm ci only when the lockfile changed; the Vite build when a source did.
WEB_SOURCES := $(shell find web/src web/index.html web/vite.config.ts web/tsconfig.json web/package.json -type f 2>/dev/null)
web/node_modules/.package-lock.json: web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	@touch $@
web/dist/index.html: web/node_modules/.package-lock.json $(WEB_SOURCES)
	cd web && npm run build
web: deps web/dist/index.html

build: deps web
	$(call configure,$(RELEASE_DIR),-DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF)
	cmake --build $(RELEASE_DIR) -j$(JOBS)

run: build
	@if [ "$(KILN_LAB)" = 1 ] && scripts/lab check; then \
	  KILN_BUILD_DIR=$(RELEASE_DIR) scripts/lab run $(LAB_VMS); \
	else \
	  echo "make run: using the fake demo lab"; scripts/run-demo $(RELEASE_DIR); \
	fi

# Line tables only, not full debug information: what the sanitizers' reports
# and a backtrace need (file:line), at half the object size, a third less link
# work and a tenth less compile time. For gdb's variables, configure a build
# of your own without CMAKE_*_FLAGS_DEBUG.
TEST_DEBUG_FLAGS := -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -DCMAKE_C_FLAGS_DEBUG=-gline-tables-only
build-test: deps web
	$(call configure,$(TEST_DIR),-DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON -DKILN_WERROR=ON $(TEST_DEBUG_FLAGS))
	cmake --build $(TEST_DIR) -j$(JOBS)

# One test more than cores: a fifth of the suites' time is spent waiting (a lease
# running out, a VM booting, a timeout that must fire), and a core idles meanwhile.
# Measured on 2 cores: -j2 1,628 s at 83% busy, -j3 1,388 s at 95%, no failures.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))

# CTest prints its summary ("100% tests passed, 0 tests failed out of N").
test: build-test
	cd $(TEST_DIR) && ctest --output-on-failure -j$(TEST_JOBS) --timeout 600

# Its own optimised build (tests/fuzz alone, RelWithDebInfo): `make test`'s fuzzers are
# built unoptimised for their 3 s runs and execute 3-12x fewer inputs a second.
FUZZ_DIR := build/fuzz
fuzz: deps
	cmake -S tests/fuzz -B $(FUZZ_DIR) -DCMAKE_C_COMPILER=$(CC) -DCMAKE_CXX_COMPILER=$(CXX) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_DIR) -j$(JOBS)
	cd $(FUZZ_DIR) && FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure --timeout $$(( $(FUZZ_SECONDS) * 2 + 120 ))

e2e: build
	KILN_BUILD_DIR=$(RELEASE_DIR) tests/e2e/lab/lab_e2e.sh

bench: build
	bench/run-all $(RELEASE_DIR)

clean:
	rm -rf build
