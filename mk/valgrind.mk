# valgrind memcheck over the engine's and the store's unit suites: any
# invalid access, use of uninitialised memory or definite/indirect leak
# fails the target. CK_FORK=no runs the tests in the suite's own process,
# so valgrind sees the code under test (and its leaks), not just fork().
#   make valgrind-check                      the suites below (CI)
#   make valgrind-check VALGRIND_SUITES=...  others, e.g. "algo"
# test_algo is left out by default: it runs whole ECLK jobs on mushrooms
# and a9a to convergence, which takes about 14 minutes under memcheck;
# run it with VALGRIND_SUITES=algo. The suites that start a server are
# for the ASan build (make asan-check), not for valgrind.

VALGRIND_BUILD ?= build-valgrind
VALGRIND_SUITES ?= libsvm compress problem wire jobspec store sha256 metrics_cursor
VALGRIND ?= valgrind
# Without fork Check cannot time a test out: a suite gets this many seconds.
VALGRIND_TIMEOUT ?= 900
VALGRIND_FLAGS := -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
                  --error-exitcode=1
VALGRIND_BIN := $(VALGRIND_SUITES:%=$(VALGRIND_BUILD)/tests/test_%)

.PHONY: valgrind-check

# Without sanitizers and at -O1, so reports point at real lines.
valgrind-check: fuzz-deps
	@$(MAKE) --no-print-directory BUILD=$(VALGRIND_BUILD) CFLAGS="-O1 -g" \
	    SAN= MPICC= $(VALGRIND_BIN)
	@fail=0; for t in $(VALGRIND_SUITES); do \
	    log=$(VALGRIND_BUILD)/valgrind-$$t.log; start=$$(date +%s); \
	    if CK_FORK=no timeout $(VALGRIND_TIMEOUT) $(VALGRIND) $(VALGRIND_FLAGS) \
	        $(VALGRIND_BUILD)/tests/test_$$t >$$log 2>&1; then r=ok; \
	    else r=FAILED; fail=1; fi; \
	    echo "valgrind test_$$t: $$r in $$(( $$(date +%s) - start )) s;" \
	        "$$(grep -E '^[0-9]+%: Checks' $$log)"; \
	    if [ $$r = FAILED ]; then tail -n 40 $$log; fi; \
	done; exit $$fail
