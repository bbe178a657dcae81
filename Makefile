# tokd — build with `make`, test with `make test` (see README).
#
#   make            build/tokd and build/libtokd.a
#   make test       build and run every test (last line: "N passed, N failed")
#   make test-asan  the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-tsan  the threaded tests (engine, pool, server) under ThreadSanitizer
#   make fuzz       libFuzzer targets (clang), each run FUZZ_SECONDS (default 60)
#   make check      deps + test + test-asan + test-tsan + fuzz: what CI runs
#   make run        deps + build, then generate: MODEL=... PROMPT=... N=...
#   make deps       install missing Debian packages (scripts/install-deps.sh)
#
# Sources are discovered: every src/**/*.c goes into the library except src/cli/, every
# tests/test_*.c is one test program, every tests/e2e_*.sh one end-to-end script, every
# fuzz/fuzz_*.c one fuzzer.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
CFLAGS  ?=
WFLAGS  := -Wall -Wextra -Werror -Wno-unused-parameter
# Code placement: every function at a 64-byte line and every loop at 32 bytes, so that a
# kernel's speed does not depend on where the link happens to put it. Without it, the
# AVX2 attention (one KV head, 256 keys, hd 64) ran 1.1x slower for 2 to 8 query heads
# and 1.2-1.4x for one, depending only on the size of the code linked before it;
# with it, both placements ran at the faster speed, and the packed kernels read the same
# (BENCHMARKS.md, twenty-fourth session).
ALIGN   := -falign-functions=64 -falign-loops=32
# No fused multiply-add where the source has a multiply and an add: the quantisers
# reproduce llama.cpp's bytes operation by operation (gcc's ISO mode already does this;
# clang's default would fuse where a target has FMA).
FPFLAGS := -ffp-contract=off
# Debug information: full in the build you debug; the sanitizer trees take line tables
# only (DBGFLAGS=-g1), which is all a sanitizer's report prints, and which builds
# packed_avx2.c under ASan in 46 s instead of 64 on the Zen 3 host.
DBGFLAGS := -g
BASEFLAGS := -std=c17 -D_GNU_SOURCE $(DBGFLAGS) -Iinclude -Isrc $(WFLAGS) $(OPT) $(ALIGN) $(FPFLAGS) $(SAN) -pthread -MMD -MP
LIBS    := -lpcre2-8 -lcjson -lm -lpthread

LIB_SRCS  := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
CLI_SRCS  := $(sort $(wildcard src/cli/*.c))
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
E2E       := $(sort $(wildcard tests/e2e_*.sh))
FUZZ_SRCS := $(sort $(wildcard fuzz/fuzz_*.c))

LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test test-asan test-tsan fuzz check clean bench deps run
all: $(BUILD)/tokd $(BUILD)/libtokd.a

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -c $< -o $@

# The file quantisers at -O3 in the optimised build: their scale searches are short
# fixed-length loops, which -O3 unrolls and partly vectorises, as llama.cpp builds them.
# The float sums keep their source order (no -ffast-math, no contraction), so the bytes
# are the same; Q6_K and Q4_0 with an importance matrix quantise 1.2-1.6x faster.
ifeq ($(OPT),-O2)
$(BUILD)/obj/src/kernels/quants.o $(BUILD)/obj/src/kernels/quants_weighted.o: CFLAGS += -O3
endif

$(BUILD)/libtokd.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/tokd: $(CLI_OBJS) $(BUILD)/libtokd.a
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libtokd.a $(LIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libtokd.a tests/t.h tests/t_golden.h tests/t_rand.h tests/tiny_model.h
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libtokd.a $(LIBS)

export RESULTS_FILE
RUN_TESTS ?= $(TEST_BINS) $(E2E)
test: $(BUILD)/tokd $(filter $(BUILD)/tests/%,$(RUN_TESTS))
	TOKD=$(abspath $(BUILD)/tokd) tests/run.sh $(RUN_TESTS)

test-asan:
	$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 DBGFLAGS=-g1 SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

# ThreadSanitizer over the tests whose threads share data: the engine (its scheduler
# thread beside callers that submit and cancel), the thread pool and the regions built on
# it (the one-region decode step's barriers included), the bench probe, the grid
# quantisers' search tables (built by whichever thread first needs them; 4 s), and the
# server's end-to-end tests (libmicrohttpd's connection threads beside the scheduler).
# A report makes the program exit 66, which fails it. The whole suite under TSan takes
# ~20 minutes on 2 cores (the single-threaded parsers' tests most of it); this subset
# takes about 4.
TSAN_TESTS := test_attention test_batch test_decode_step test_engine test_gemm test_step_profile \
              test_quantize_iq1 test_quantize_iq2 test_quantize_iq3
TSAN_E2E   := tests/e2e_bench.sh tests/e2e_server_disconnect.sh tests/e2e_server_hostile.sh \
              tests/e2e_server_invariance.sh tests/e2e_server_openai.sh
test-tsan:
	$(MAKE) --no-print-directory BUILD=build-tsan OPT=-O1 DBGFLAGS=-g1 SAN="-fsanitize=thread -fno-omit-frame-pointer" \
	  RUN_TESTS="$(TSAN_TESTS:%=build-tsan/tests/%) $(TSAN_E2E)" test

FUZZ_SECONDS ?= 60
FUZZ_BINS := $(FUZZ_SRCS:fuzz/%.c=build-fuzz/%)
FUZZCOMMON := -std=c17 -D_GNU_SOURCE -g1 -O1 -Iinclude -Isrc $(WFLAGS) $(FPFLAGS) -fno-sanitize-recover=all -pthread -MMD -MP
FUZZ_LIB_SRCS := $(filter-out src/server/server.c,$(LIB_SRCS))
FUZZ_OBJS := $(FUZZ_LIB_SRCS:%.c=build-fuzz/obj/%.o)
FUZZ_SAN  := -fsanitize=fuzzer-no-link,address,undefined
# The SIMD kernel files and attention.c are built here with coverage only, no ASan/UBSan:
# the fuzzers drive the parsers, not the kernels, and clang instrumenting those files'
# unrolled intrinsics took ~9 of CI's minutes (attention.c alone 86-105 s on the Zen 3
# host, against 4 s). The kernels run under ASan+UBSan in test-asan.
FUZZ_KERNEL_OBJS := $(filter build-fuzz/obj/src/kernels/%avx2.o build-fuzz/obj/src/kernels/%avx512.o \
                             build-fuzz/obj/src/attention.o,$(FUZZ_OBJS))
$(FUZZ_KERNEL_OBJS): FUZZ_SAN := -fsanitize=fuzzer-no-link
build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZCOMMON) $(FUZZ_SAN) -c $< -o $@
build-fuzz/libtokd-fuzz.a: $(FUZZ_OBJS)
	rm -f $@ && ar rcs $@ $^
build-fuzz/%: fuzz/%.c build-fuzz/libtokd-fuzz.a
	clang $(FUZZCOMMON) -fsanitize=fuzzer,address,undefined -o $@ $< build-fuzz/libtokd-fuzz.a $(LIBS)
fuzz: $(FUZZ_BINS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run_fuzz.sh $(FUZZ_BINS)

deps:
	@scripts/install-deps.sh

MODEL  ?= ../shared/models/stories260K.gguf
PROMPT ?= Once upon a time
N      ?= 128
run: deps
	$(MAKE) all
	$(BUILD)/tokd run -m "$(MODEL)" -p "$(PROMPT)" -n $(N)

# The stages append their counts to build/check-results; the last line is the total.
# Compiles run on every core (JOBS); the tests themselves still run one after another.
# The benchmarks are built first (not run: speed is not a test) so that they cannot fall
# behind the library's interfaces unnoticed, as bench_dot and bench_regions once did.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
# Each stage's wall time (build and run) is printed after it and again at the end, so a
# CI log shows where its minutes went.
STAGE = s=$$(date +%s); $(MAKE) --no-print-directory -j$(JOBS) $(1) RESULTS_FILE=$(abspath build/check-results) && \
	t=$$(( $$(date +%s) - s )) && echo "$(1) $$t" >>build/check-times && echo "stage $(1): $$t s"
check: deps
	@mkdir -p build && rm -f build/check-results build/check-times
	@$(call STAGE,bench)
	@$(call STAGE,test)
	@$(call STAGE,test-asan)
	@$(call STAGE,test-tsan)
	@$(call STAGE,fuzz)
	@awk '{printf "%s%s %d s", (NR > 1 ? ", " : "stage times: "), $$1, $$2} END {print ""}' build/check-times
	@awk '{p += $$1; f += $$2} END {printf "all stages (test, test-asan, test-tsan, fuzz):\n%d passed, %d failed\n", p, f}' build/check-results

bench: $(BUILD)/tokd $(BUILD)/libtokd.a
	@mkdir -p $(BUILD)/bench
	@for f in $(sort $(wildcard bench/*.c)); do b=$(BUILD)/bench/$$(basename $$f .c); echo "CC $$b"; \
	  $(CC) $(BASEFLAGS) $(CFLAGS) -o $$b $$f $(BUILD)/libtokd.a $(LIBS) || exit 1; done
	@echo "benchmarks in $(BUILD)/bench: see bench/README.md"

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d) $(wildcard build-fuzz/obj/src/*.d build-fuzz/obj/src/*/*.d)
