# The independent reference (docs/testing.md, "The reference check"): the
# engine writes a trace of its random choices and iterates, and a numpy
# implementation written from docs/algorithms.md, fed those choices, must
# reproduce every iterate. `make check` runs reference-check;
# mutation-check shows that deliberate bugs make it fail.
PYTHON ?= /usr/bin/python3
REFERENCE_BIN := $(BUILD)/reference/trace_run

$(REFERENCE_BIN): tests/reference/trace_run.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC_ALL) $(LDFLAGS) -o $@ $< $(ENGINE_LIB) $(LDLIBS_ENGINE)

.PHONY: reference-check mutation-check
reference-check: $(REFERENCE_BIN)
	@TRACE_RUN=$(abspath $(REFERENCE_BIN)) PYTHON=$(PYTHON) \
	    sh tests/reference/run.sh

mutation-check:
	@$(PYTHON) tools/mutation-check.py
