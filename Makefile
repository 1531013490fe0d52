# The two commands a new user needs:
#   make run   install deps, build (Release), start kilnd with a demo lab
#   make test  install deps, build with -Werror + ASan/UBSan, run every test via CTest
JOBS ?= $(shell nproc)
RELEASE_DIR := build/release
TEST_DIR := build/test

.PHONY: all deps build build-test run test bench clean

all: build

deps:
	@scripts/install-deps

build: deps
	cmake -S . -B $(RELEASE_DIR) -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF
	cmake --build $(RELEASE_DIR) -j$(JOBS)

run: build
	scripts/run-demo $(RELEASE_DIR)

build-test: deps
	cmake -S . -B $(TEST_DIR) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON -DKILN_WERROR=ON
	cmake --build $(TEST_DIR) -j$(JOBS)

# CTest prints its summary ("100% tests passed, 0 tests failed out of N").
test: build-test
	cd $(TEST_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 600

bench: build
	bench/run-all $(RELEASE_DIR)

clean:
	rm -rf build
