# libFuzzer targets (fuzz/fuzz_*.c), built with clang under ASan and UBSan
# in their own directory so that their objects never mix with gcc's.
#   make fuzz-smoke                 each target FUZZ_SMOKE_SECONDS (30) s; CI
#   make fuzz FUZZ_SECONDS=600      the long run, one target at a time, with
#                                   a table of figures in FUZZ_DIR/report.md
# A crash fails either; the input is kept in FUZZ_DIR/crashes/TARGET/.

FUZZ_DIR ?= build-fuzz
FUZZ_CC ?= $(shell command -v clang-14 2>/dev/null || command -v clang 2>/dev/null || echo clang)
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 30
FUZZ_TARGETS := jobspec libsvm wire http metrics_cursor metric_record upload catalog_names \
                patch tokens
FUZZ_CFLAGS := -O1 -g -fno-omit-frame-pointer \
               -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CC_ALL = $(FUZZ_CC) $(XCFLAGS) $(FUZZ_CFLAGS)

# Everything but main(): the engine, the service and the CLI, instrumented
# for coverage; the archive lets each target pull in what it uses.
FUZZ_LIB_SRC := $(ENGINE_SRC) $(SERVICE_SRC) $(filter-out cli/main.c,$(CLI_SRC))
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o) \
                $(FUZZ_DIR)/obj/gen/migrations.o $(FUZZ_DIR)/obj/gen/openapi.o
FUZZ_LIB := $(FUZZ_DIR)/libecopt_fuzz.a
FUZZ_BIN := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-deps fuzz-seeds

fuzz-deps:
	@sh fuzz/install-deps.sh

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC_ALL) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/obj/gen/migrations.c: tools/embed-migrations.sh tools/embed-bytes.sh $(MIGRATIONS)
	@mkdir -p $(dir $@)
	sh tools/embed-migrations.sh $@ $(MIGRATIONS)

$(FUZZ_DIR)/obj/gen/openapi.c: tools/embed-bytes.sh api/openapi.yaml
	@mkdir -p $(dir $@)
	sh tools/embed-bytes.sh openapi_yaml api/openapi.yaml $@

$(FUZZ_DIR)/obj/gen/%.o: $(FUZZ_DIR)/obj/gen/%.c
	$(FUZZ_CC_ALL) -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_LIB)
	$(FUZZ_CC_ALL) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) $(LDLIBS_APP)

fuzz-build: $(FUZZ_BIN)

fuzz-smoke: fuzz-deps
	@$(MAKE) --no-print-directory fuzz-build
	@echo "| target | time | executions | exec/s | cov | ft | corpus | peak RSS | crashes |"
	@fail=0; for t in $(FUZZ_TARGETS); do \
	    sh fuzz/run.sh $(FUZZ_DIR) $$t $(FUZZ_SMOKE_SECONDS) || fail=1; \
	done; exit $$fail

fuzz: fuzz-deps
	@$(MAKE) --no-print-directory fuzz-build
	@mkdir -p $(FUZZ_DIR)
	@echo "| target | time | executions | exec/s | cov | ft | corpus | peak RSS | crashes |" \
	    > $(FUZZ_DIR)/report.md
	@echo "|---|---|---|---|---|---|---|---|---|" >> $(FUZZ_DIR)/report.md
	@fail=0; for t in $(FUZZ_TARGETS); do \
	    sh fuzz/run.sh $(FUZZ_DIR) $$t $(FUZZ_SECONDS) $(FUZZ_DIR)/report.md || fail=1; \
	done; cat $(FUZZ_DIR)/report.md; exit $$fail

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)

# The wire seeds are real frames made by the encoders; this remakes them.
$(FUZZ_DIR)/seeds_wire: fuzz/seeds_wire.c $(FUZZ_LIB)
	$(FUZZ_CC_ALL) -fsanitize=fuzzer-no-link -o $@ $< $(FUZZ_LIB) $(LDLIBS_APP)

fuzz-seeds: $(FUZZ_DIR)/seeds_wire
	@mkdir -p fuzz/corpus/wire
	$(FUZZ_DIR)/seeds_wire fuzz/corpus/wire
