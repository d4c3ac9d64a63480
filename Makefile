# ecopt: one non-recursive Makefile.
#   make            build build/ecopt
#   make check      install missing Debian packages (as root), build, run every test
#   make run        install, build, and serve on 127.0.0.1:8080
#   make bench      benchmarks (results in bench/results/)
#   make asan-check the test suite under AddressSanitizer + UBSan

CC       ?= cc
# The floors of the code, lowest first (docs/architecture.md, "Floors"): a
# file may include the headers of its own floor and of those below it,
# never above; `make layercheck` proves it.
LAYER_DIRS := engine/include format coord service/lib service/core service/api cli
LAYER_INC  := $(addprefix -I,$(LAYER_DIRS))
BUILD    ?= build
CFLAGS   ?= -O2 -g
# Flags the code needs whatever CFLAGS says (a sanitizer build sets SAN).
XCFLAGS  := -std=c11 -Wall -Wextra -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
            $(LAYER_INC) -MMD -MP
SAN      ?=
# The engine's kernels at -O3: GCC vectorises their element-wise loops only
# there (its -O2 cost model refuses loops that need an alias check). Sums
# stay in order (no -ffast-math), so the numbers are the same bits.
ENGINE_OPT ?= -O3
CC_ALL    = $(CC) $(XCFLAGS) $(CFLAGS) $(SAN) $(OBJ_OPT)
LDLIBS_ENGINE := -lz -lm
LDLIBS_APP    := -lmicrohttpd -lsqlite3 -lcurl -ljansson -lnettle -lpthread $(LDLIBS_ENGINE)
CHECK_LIBS    := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm -lpthread)

ENGINE_SRC := $(sort $(wildcard engine/src/*.c))
FORMAT_SRC := $(sort $(wildcard format/*.c))
COORD_SRC  := $(sort $(wildcard coord/*.c))
SERVICE_SRC := $(FORMAT_SRC) $(COORD_SRC) $(sort $(wildcard service/lib/*.c service/lib/*/*.c)) \
               $(sort $(wildcard service/core/*.c)) $(sort $(wildcard service/api/*.c))
CLI_SRC    := $(sort $(wildcard cli/*.c))
TEST_SRC   := $(sort $(wildcard tests/test_*.c))
BENCH_SRC  := $(sort $(wildcard bench/*.c))

ENGINE_OBJ  := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
SERVICE_OBJ := $(SERVICE_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ     := $(CLI_SRC:%.c=$(BUILD)/%.o)
# The schema, embedded: migrations/NNNN_slug.sql become a generated C file.
MIGRATIONS  := $(sort $(wildcard migrations/*.sql))
MIGRATIONS_OBJ := $(BUILD)/gen/migrations.o $(BUILD)/gen/openapi.o
# Everything of the binary but its main(), so tests can link the same code.
APP_OBJ     := $(SERVICE_OBJ) $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ)) $(MIGRATIONS_OBJ)
TEST_BIN    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN   := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

ENGINE_LIB := $(BUILD)/libecopt_engine.a

# Open MPI: where mpicc exists, build/ecopt-mpi is the same program with
# the MPI backend (engine/mpi/) linked in; mpirun runs it as the ranks.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
MPI_BIN := $(BUILD)/ecopt-mpi
MPI_OBJ := $(BUILD)/mpi/engine/mpi/mpi.o $(BUILD)/mpi/cli/main.o $(BUILD)/mpi/coord/launch_mpi.o
endif

# Where the tests and `make run` find the LibSVM datasets.
ECOPT_DATA_DIR ?= $(abspath ../shared/datasets)
export ECOPT_DATA_DIR

.PHONY: all check run bench deps clean asan-check engine-linkcheck layercheck citecheck \
        tests install
PREFIX ?= /usr/local
all: $(BUILD)/ecopt $(MPI_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC_ALL) -c $< -o $@

$(BUILD)/gen/migrations.c: tools/embed-migrations.sh tools/embed-bytes.sh $(MIGRATIONS)
	@mkdir -p $(dir $@)
	sh tools/embed-migrations.sh $@ $(MIGRATIONS)

$(BUILD)/gen/migrations.o: $(BUILD)/gen/migrations.c service/lib/store_migrations.h
	$(CC_ALL) -c $< -o $@

# The API contract, served at /openapi.yaml.
$(BUILD)/gen/openapi.c: tools/embed-bytes.sh api/openapi.yaml
	@mkdir -p $(dir $@)
	sh tools/embed-bytes.sh openapi_yaml api/openapi.yaml $@

$(BUILD)/gen/openapi.o: $(BUILD)/gen/openapi.c
	$(CC_ALL) -c $< -o $@

# test_embed's fixture of awkward bytes, embedded by the same tool.
$(BUILD)/gen/tests/embed_fixture.inc: tools/embed-bytes.sh tests/fixtures/embed.bin
	@mkdir -p $(dir $@)
	sh tools/embed-bytes.sh embed_fixture tests/fixtures/embed.bin $@

$(BUILD)/tests/test_embed: $(BUILD)/gen/tests/embed_fixture.inc
$(BUILD)/tests/test_embed: XCFLAGS += -I$(BUILD)/gen/tests

$(ENGINE_OBJ): OBJ_OPT = $(ENGINE_OPT)

$(ENGINE_LIB): $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/ecopt: $(BUILD)/cli/main.o $(APP_OBJ) $(ENGINE_LIB)
	$(CC_ALL) $(LDFLAGS) -o $@ $^ $(LDLIBS_APP)

# The test build (docs/testing.md, "Test hooks"): the same program with
# the hooks the tests inject faults through (ECOPT_FAULT) compiled in,
# and the worker step's baseline code alone (no AVX2 clone), which the
# suites compare with the shipped build's row for row.
# The suites find it as ECOPT_TEST_BIN; the shipped build/ecopt has no hook.
TEST_HOOKS_SRC := engine/src/proc.c engine/src/algo.c
TEST_HOOKS_OBJ := $(patsubst %.c,$(BUILD)/test-hooks/%.o,$(TEST_HOOKS_SRC))
$(TEST_HOOKS_OBJ): OBJ_OPT = $(ENGINE_OPT)
$(TEST_HOOKS_OBJ): $(BUILD)/test-hooks/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC_ALL) -DECOPT_TEST_HOOKS -c $< -o $@

$(BUILD)/ecopt-test: $(BUILD)/cli/main.o $(APP_OBJ) $(TEST_HOOKS_OBJ) \
                     $(filter-out $(patsubst %.c,$(BUILD)/%.o,$(TEST_HOOKS_SRC)),$(ENGINE_OBJ))
	$(CC_ALL) $(LDFLAGS) -o $@ $^ $(LDLIBS_APP)

$(BUILD)/mpi/%.o: %.c
	@mkdir -p $(dir $@)
	$(MPICC) $(XCFLAGS) $(CFLAGS) $(SAN) -DECOPT_WITH_MPI -c $< -o $@

$(MPI_BIN): $(MPI_OBJ) $(filter-out $(BUILD)/coord/launch_mpi.o,$(APP_OBJ)) $(ENGINE_LIB)
	$(MPICC) $(XCFLAGS) $(CFLAGS) $(SAN) $(LDFLAGS) -o $@ $^ $(LDLIBS_APP)

# The engine must link with libc, libm and zlib alone: no JSON, SQL, HTTP.
$(BUILD)/engine-linkcheck: tests/engine_linkcheck.c $(ENGINE_LIB)
	$(CC_ALL) $(LDFLAGS) -o $@ $(filter %.c %.a,$^) $(LDLIBS_ENGINE)

engine-linkcheck: $(BUILD)/engine-linkcheck
	@if nm -u $(ENGINE_LIB) | grep -E ' (json_|sqlite3_|MHD_|curl_)'; then \
	    echo "engine depends on a service library" >&2; exit 1; fi
	$(BUILD)/engine-linkcheck

# The floors only look down (tools/layercheck.sh): no file includes a
# header of a higher floor; the objects of format/, coord/, service/ and
# cli/ call each other in no circle and never upward (read from nm); the
# command the service starts as a process (cli/run) reaches nothing of the
# service; no file of format/, coord/, service/ or cli/ is over 1500 lines. tools/layercheck-test.sh first
# checks the checker itself on small trees that break each rule.
layercheck: $(SERVICE_OBJ) $(CLI_OBJ)
	@sh tools/layercheck-test.sh
	@sh tools/layercheck.sh $(BUILD) $(SERVICE_OBJ) $(CLI_OBJ)

# Comments and documents cite the manual by file and section heading
# (tools/citecheck.sh): no design document outside the repository, no
# issue numbers, no README sections, and every heading of docs/ that is
# cited exists. tools/citecheck-test.sh first checks the checker.
citecheck:
	@sh tools/citecheck-test.sh
	@sh tools/citecheck.sh

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/serverutil.h $(APP_OBJ) $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC_ALL) -Itests $(LDFLAGS) -o $@ $< $(APP_OBJ) $(ENGINE_LIB) $(LDLIBS_APP) $(CHECK_LIBS)

$(BUILD)/bench/%: bench/%.c $(APP_OBJ) $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC_ALL) $(LDFLAGS) -o $@ $< $(APP_OBJ) $(ENGINE_LIB) $(LDLIBS_APP)

tests: $(TEST_BIN) $(BUILD)/ecopt $(BUILD)/ecopt-test $(MPI_BIN)

deps:
	@sh docker/install-deps.sh

# Each suite is its own program; all run even if one fails, then the totals;
# then the independent reference of every algorithm (mk/reference.mk).
check: deps
	@$(MAKE) --no-print-directory tests engine-linkcheck layercheck citecheck
	@ECOPT_BIN=$(abspath $(BUILD)/ecopt) ECOPT_TEST_BIN=$(abspath $(BUILD)/ecopt-test) \
	    sh tests/run-suites.sh $(TEST_BIN)
	@$(MAKE) --no-print-directory reference-check

asan-check: deps
	@$(MAKE) --no-print-directory BUILD=build-asan CFLAGS="-O1 -g" MPICC= \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    tests
	@ECOPT_BIN=$(abspath build-asan/ecopt) ECOPT_TEST_BIN=$(abspath build-asan/ecopt-test) \
	    CK_DEFAULT_TIMEOUT=600 \
	    sh tests/run-suites.sh $(TEST_SRC:tests/%.c=build-asan/tests/%)

# The service on 127.0.0.1:8080 (make run LISTEN=127.0.0.1:9000 moves it)
# with an SQLite file here and the shared datasets; authentication is off,
# explicitly, for this local quick start.
LISTEN ?= $(or $(ECOPT_LISTEN),127.0.0.1:8080)
run: deps all
	./$(BUILD)/ecopt serve --listen $(LISTEN) --db ecopt.db \
	    --data-dir $(ECOPT_DATA_DIR) --auth off

# Each benchmark writes its table to bench/results/ as well as stdout.
bench: all $(BENCH_BIN)
	@mkdir -p bench/results
	$(BUILD)/bench/bench_compress bench/results/compress.txt
	$(BUILD)/bench/bench_kernel a9a > bench/results/kernel.md && cat bench/results/kernel.md
	$(BUILD)/bench/bench_curves bench/results/eclk-vs-ecgd.md
	$(BUILD)/bench/bench_runtime bench/results/runtime.md
	$(BUILD)/bench/bench_accel bench/results/accel.md
	ECOPT=$(abspath $(BUILD)/ecopt) sh bench/bench_service.sh bench/results/service.md
	ECOPT_BIN=$(abspath $(BUILD)/ecopt) $(BUILD)/bench/bench_load bench/results/load.md

# The binaries (migrations and openapi.yaml are embedded in them), the
# API contract, the report format and an example systemd unit.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/ecopt
	install -m 755 $(BUILD)/ecopt $(DESTDIR)$(PREFIX)/bin/ecopt
	if [ -x $(BUILD)/ecopt-mpi ]; then install -m 755 $(BUILD)/ecopt-mpi $(DESTDIR)$(PREFIX)/bin/; fi
	install -m 644 api/openapi.yaml api/report-format.md docker/ecopt.service \
	    $(DESTDIR)$(PREFIX)/share/ecopt/

clean:
	rm -rf build build-asan

# Further targets (fuzzing, the paper benchmarks, the browser test) each
# keep their rules in a fragment of their own.
include $(sort $(wildcard mk/*.mk))

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
