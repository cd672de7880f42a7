# sonde - the user's interface to the build. CMake underneath.
#   make          build (./build)
#   make demo     build and run the demo pipeline, print its summary and the files it wrote
#   make test     every test: gcc build, clang -Werror build, ASan+UBSan and TSan builds
#   make bench    the overhead and throughput benchmarks (optimised build in ./build-bench), and
#                 the HTML report of 10^6 sections in headless Chromium
#   make fuzz     every libFuzzer target for FUZZ_SECONDS each (make test runs them 5 s each)
#   make soak     100 DataLoader runs with forked workers beside two busy loops (issue 62)
#   make install PREFIX=/some/dir
#   make python-install [PYTHON=python3]   the Python package and its C extension, built for
#                                          PYTHON and installed into its site-packages
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = fuzz_sonde fuzz_env fuzz_yaml fuzz_flags fuzz_report fuzz_perfmap fuzz_pyframes
CMAKE_FLAGS ?=

PYTHON ?= python3
PYBUILD ?= build-python

.PHONY: all build deps demo test bench bench-scale soak fuzz fuzz-run install python-install clean

all: build

deps:
	@bash scripts/setup.sh

build: deps
	@echo "sonde: building in ./build (a minute or two the first time on 2 cores; log: build.log)"
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) > build.log 2>&1 || (cat build.log; exit 1)
	@cmake --build build -j $(JOBS) >> build.log 2>&1 || (grep -E "error|warning" -A5 build.log | head -60; exit 1)
	@rm -f build.log

demo: build
	@./build/examples/pipeline

# One configuration: $(1) directory, $(2) compiler, $(3) CMake flags, $(4) ctest label regex.
define run_suite
	@echo "== $(1): $(2) $(3)"
	@CC=$(2) CXX=$(subst clang,clang++,$(subst gcc,g++,$(2))) cmake -S . -B $(1) $(3) > $(1).log 2>&1 || (cat $(1).log; exit 1)
	@cmake --build $(1) -j $(JOBS) >> $(1).log 2>&1 || (grep -E "error|warning" -A5 $(1).log | head -60; exit 1)
	@rm -f $(1).log
	@cd $(1) && ctest --output-on-failure -j $(JOBS) $(if $(4),-L "$(4)")
endef

test:
	@bash scripts/setup.sh test
	$(call run_suite,build,gcc,-DCMAKE_BUILD_TYPE=RelWithDebInfo,)
	$(call run_suite,build-clang,clang,-DCMAKE_BUILD_TYPE=Release,unit)
	$(call run_suite,build-asan,clang,-DCMAKE_BUILD_TYPE=Debug -DSONDE_SANITIZE=address -DSONDE_BUILD_BENCH=OFF,unit|e2e)
	$(call run_suite,build-tsan,clang,-DCMAKE_BUILD_TYPE=Debug -DSONDE_SANITIZE=thread -DSONDE_BUILD_BENCH=OFF,threads)
	@$(MAKE) --no-print-directory fuzz-run FUZZ_SECONDS=5
	@echo "make test: all suites passed"

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-run FUZZ_SECONDS=$(FUZZ_SECONDS)

# Builds the fuzz targets and runs each on a copy of its seed corpus; a finding fails the run.
fuzz-run:
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DSONDE_BUILD_FUZZ=ON -DSONDE_BUILD_TESTS=OFF -DSONDE_BUILD_BENCH=OFF -DSONDE_BUILD_EXAMPLES=OFF > build-fuzz.log 2>&1 || (cat build-fuzz.log; exit 1)
	@cmake --build build-fuzz -j $(JOBS) >> build-fuzz.log 2>&1 || (grep -E "error|warning" -A5 build-fuzz.log | head -60; exit 1)
	@rm -f build-fuzz.log
	@set -e; for t in $(FUZZ_TARGETS); do \
	    c=build-fuzz/corpus/$$t; mkdir -p $$c; cp tests/fuzz/corpus/$${t#fuzz_}/* $$c/; \
	    ./build-fuzz/tests/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	        -rss_limit_mb=1024 -malloc_limit_mb=256 \
	        -artifact_prefix=build-fuzz/$$t- $$c > build-fuzz/$$t.log 2>&1 \
	        || { tail -40 build-fuzz/$$t.log; echo "fuzz: $$t found a crash (build-fuzz/$$t-*)"; exit 1; }; \
	    echo "fuzz: $$t ran $$(awk '/stat::number_of_executed_units/ {print $$2}' build-fuzz/$$t.log) inputs in $(FUZZ_SECONDS) s, no finding"; \
	done

bench: deps
	@cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_TESTS=OFF > build-bench.log 2>&1 || (cat build-bench.log; exit 1)
	@cmake --build build-bench -j $(JOBS) >> build-bench.log 2>&1 || (cat build-bench.log; exit 1)
	@rm -f build-bench.log
	@mkdir -p build-bench/out && ./build-bench/bench/bench_scope --dir build-bench/out && rm -rf build-bench/out
	@mkdir -p build-bench/out && PYTHONPATH=build-bench/python ./build-bench/bench/bench_sample build-bench/tools/sonde/sonde --dir build-bench/out --python "$$(python3 -c 'import sys; print(sys.executable)')" tests/e2e/pyshares.py && rm -rf build-bench/out
	@bash bench/bench_python_versions.sh
	@bash tests/python/run_torch.sh "$(CURDIR)" "$(CURDIR)/build-bench" "$$(command -v python3)" build-bench/python bench/bench_torch.py || [ $$? -eq 77 ]
	@mkdir -p build-bench/out && ./build-bench/bench/bench_window --dir build-bench/out && rm -rf build-bench/out
	@bash tests/python/run_torch.sh "$(CURDIR)" "$(CURDIR)/build-bench" "$$(command -v python3)" build-bench/python bench/bench_window_torch.py || [ $$? -eq 77 ]
	@bash scripts/setup.sh browser
	@mkdir -p build-bench/out && ./build-bench/bench/bench_manyspans build-bench/out many 1000000 && node bench/bench_html.js build-bench/out/many.html; rc=$$?; rm -rf build-bench/out; exit $$rc
	@if [ -x build-bench/bench/bench_autotrace ]; then mkdir -p build-bench/out && ./build-bench/bench/bench_autotrace --dir build-bench/out && bench/uftrace_compare.sh build-bench/bench/bench_autotrace; rm -rf build-bench/out; fi

# Issue 18's scale benchmark: 10^7 section edges from 4 threads (the report's percentiles checked
# against exact ones), then EDGES (default 10^9: about a minute and 2 GB of disk), the report
# pass's time and peak RSS against the targets (docs/performance.md). The SQLite export beside
# it at 10^7 and at SQLITE_EDGES (default 10^8: about 4 minutes and 5 GB of disk; 0: not run),
# issue 64's 256 MiB.
EDGES ?= 1e9
SQLITE_EDGES ?= 1e8
bench-scale: deps
	@cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_TESTS=OFF > build-bench.log 2>&1 || (cat build-bench.log; exit 1)
	@cmake --build build-bench -j $(JOBS) --target bench_scale >> build-bench.log 2>&1 || (cat build-bench.log; exit 1)
	@rm -f build-bench.log
	@mkdir -p build-bench/out && ./build-bench/bench/bench_scale --edges 1e7 --dir build-bench/out --sqlite && { [ "$(SQLITE_EDGES)" = 0 ] || ./build-bench/bench/bench_scale --edges $(SQLITE_EDGES) --dir build-bench/out --sqlite; } && ./build-bench/bench/bench_scale --edges $(EDGES) --dir build-bench/out; rc=$$?; rm -rf build-bench/out; exit $$rc

# Issue 62's soak: SOAK_RUNS (default 100) DataLoader runs with forked workers, persistent and
# not, beside two busy loops (bench/soak_dataloader.py; about 3.5 minutes here), on the
# interpreter that has torch; a hang, a lost worker file or section fails it.
SOAK_RUNS ?= 100
soak: build
	@bash tests/python/run_torch.sh "$(CURDIR)" "$(CURDIR)/build" "$$(command -v python3)" build/python bench/soak_dataloader.py $(SOAK_RUNS)

# As root, ldconfig makes the new libsonde.so.0 known where PREFIX/lib is in the loader's path
# (/usr/local/lib on Debian); elsewhere the line says what a program needs to find it.
install: build
	@cmake --install build --prefix $(PREFIX)
	@if [ "$$(id -u)" = 0 ] && command -v ldconfig > /dev/null; then ldconfig; fi; \
	if ldconfig -p 2> /dev/null | grep -q "$(PREFIX)/lib/libsonde.so.0"; then \
	    echo "sonde: installed in $(PREFIX); programs find libsonde.so.0 there"; \
	else \
	    echo "sonde: installed in $(PREFIX); $(PREFIX)/lib is not in the loader's path: add it to" \
	         "/etc/ld.so.conf.d and run ldconfig as root, or set LD_LIBRARY_PATH=$(PREFIX)/lib"; \
	fi

# No network: CMake builds the extension against PYTHON's own headers, and the package is copied
# into PYTHON's site-packages (platlib). A virtual environment's python installs into it.
python-install: deps
	@py=$$(command -v $(PYTHON)) || { echo "sonde: no $(PYTHON) on PATH" >&2; exit 2; }; \
	cmake -S . -B $(PYBUILD) -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_TESTS=OFF \
	    -DSONDE_BUILD_BENCH=OFF -DSONDE_BUILD_EXAMPLES=OFF -DPython3_EXECUTABLE=$$py \
	    > $(PYBUILD).log 2>&1 || { cat $(PYBUILD).log; exit 1; }; \
	cmake --build $(PYBUILD) -j $(JOBS) --target sonde_python sonde_python_files \
	    >> $(PYBUILD).log 2>&1 || { grep -E "error|warning" -A5 $(PYBUILD).log | head -60; exit 1; }; \
	site=$$($$py -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])') && \
	rm -rf "$$site/sonde" && cp -r $(PYBUILD)/python/sonde "$$site/sonde" && \
	rm -f $(PYBUILD).log && \
	echo "sonde: Python package installed into $$site/sonde for $$($$py -c 'import sys; print(sys.executable)')"

clean:
	rm -rf build build-clang build-asan build-tsan build-bench build-fuzz build-python sonde-out
