# Arbiter: the two commands are `make run` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test run install format format-check lint clean bench fuzz

all: build

deps:
	@./scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DARBITER_BUILD_TESTS=ON -DARBITER_BUILD_BENCH=ON \
	  $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# `make run` installs and builds only what the server needs (no test tools, no test binaries),
# so that a new user's first job comes quickly.
run:
	@./scripts/install-deps.sh --run
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DARBITER_BUILD_TESTS=OFF -DARBITER_BUILD_BENCH=OFF \
	  $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target arbiter arbiter-shim
	@./scripts/run.sh $(BUILD_DIR)/arbiter

# `make install` (optional; not part of run or test): the binaries into $(DESTDIR)$(PREFIX)/bin,
# arbiter-shim and arbiter-srun beside arbiter (where the server and the agent look for them),
# and Slurm's command names as links to arbiter, which answers to them (docs/cli.md).
PREFIX ?= /usr/local
SLURM_COMMANDS = squeue sbatch scancel sinfo sacct
# An existing build folder is used as it is configured.
install:
	@test -f $(BUILD_DIR)/build.ninja || cmake -S . -B $(BUILD_DIR) -G Ninja \
	  -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DARBITER_BUILD_TESTS=OFF -DARBITER_BUILD_BENCH=OFF \
	  $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target arbiter arbiter-shim arbiter-srun
	@install -d "$(DESTDIR)$(PREFIX)/bin"
	@install -m 0755 $(BUILD_DIR)/arbiter $(BUILD_DIR)/arbiter-shim $(BUILD_DIR)/arbiter-srun \
	  "$(DESTDIR)$(PREFIX)/bin/"
	@for c in $(SLURM_COMMANDS); do ln -sf arbiter "$(DESTDIR)$(PREFIX)/bin/$$c"; done
	@echo "installed arbiter, arbiter-shim, arbiter-srun and $(SLURM_COMMANDS) in $(DESTDIR)$(PREFIX)/bin"

bench: build
	@$(BUILD_DIR)/arbiter bench --nodes 10000 --gpus-per-node 8 --queues 100 --jobs 200000 --policy binpack --json

format:
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

format-check:
	@git ls-files '*.h' '*.cc' | xargs clang-format --dry-run --Werror

lint: configure
	@git ls-files 'src/*.cc' | grep -v '_test.cc' | xargs clang-tidy -p $(BUILD_DIR) --quiet

clean:
	@rm -rf $(BUILD_DIR)

# The API fuzzer, built with clang, ASan and UBSan into build-fuzz/ and run for FUZZ_SECONDS from
# the seeds in fuzz/corpus/ (new inputs go to build-fuzz/corpus/, crashes to build-fuzz/).
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz:
	@./scripts/install-deps.sh --fuzz
	@cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DARBITER_FUZZ=ON -DARBITER_BUILD_TESTS=ON \
	  -DARBITER_WERROR=OFF >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target api_fuzz
	@mkdir -p $(FUZZ_DIR)/corpus
	@$(FUZZ_DIR)/api_fuzz $(FUZZ_DIR)/corpus fuzz/corpus -dict=fuzz/api.dict \
	  -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	  -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1
