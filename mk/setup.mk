# A job's set-up (bench/bench_setup.c): lambda_max by Lanczos against the
# power iteration it replaced, and P* by Newton / Newton-CG against
# restarted FISTA, alternating A and B on the same data. The real
# datasets take seconds; SETUP_BIG=1 adds generated files of d = 1e6
# (100k rows) and of 1e6 rows (d = 1e5), written once under
# $(BUILD)/setup-data, whose power iterations take minutes each.
.PHONY: bench-setup
SETUP_REPS ?= 3
SETUP_DATA := $(BUILD)/setup-data
bench-setup: $(BUILD)/bench/bench_setup $(BUILD)/ecopt
	@mkdir -p bench/results $(SETUP_DATA)
	@{ echo "# Set-up (make bench-setup), $$(date -u +%F), load $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	  echo; \
	  echo "| data | shape | A: CPU s | A: steps | B: CPU s | B: steps | B / A (min-max) | (A - B) / A |"; \
	  echo "|---|---|---|---|---|---|---|---|"; } > $(BUILD)/setup.md
	for f in a9a w8a mushrooms; do \
	  ECOPT_DATA_DIR=$(ECOPT_DATA_DIR) $(BUILD)/bench/bench_setup $$f $(SETUP_REPS) lmax && \
	  ECOPT_DATA_DIR=$(ECOPT_DATA_DIR) $(BUILD)/bench/bench_setup $$f $(SETUP_REPS) pstar \
	  || exit 1; done >> $(BUILD)/setup.md
	if [ -n "$(SETUP_BIG)" ]; then \
	  [ -s $(SETUP_DATA)/d1e6.svm ] || $(BUILD)/ecopt gen --rows 100000 --features 1000000 --nnz 20 -o $(SETUP_DATA)/d1e6.svm; \
	  [ -s $(SETUP_DATA)/n1e6.svm ] || $(BUILD)/ecopt gen --rows 1000000 --features 100000 --nnz 20 -o $(SETUP_DATA)/n1e6.svm; \
	  $(BUILD)/bench/bench_setup $(SETUP_DATA)/d1e6.svm 1 lmax >> $(BUILD)/setup.md && \
	  $(BUILD)/bench/bench_setup $(SETUP_DATA)/d1e6.svm 1 pstar >> $(BUILD)/setup.md && \
	  $(BUILD)/bench/bench_setup $(SETUP_DATA)/n1e6.svm 1 lmax >> $(BUILD)/setup.md || exit 1; \
	fi
	cat $(BUILD)/setup.md
	@echo "(copy the rows you keep to bench/results/setup.md)"

# The set-up (L_f, then P*) by two versions of the engine on the generated
# files, alternating: SETUP_AB_REV (A, the landed main by default) against
# the working tree (B); bench/bench_setup_ab.sh.
.PHONY: bench-setup-ab
SETUP_AB_REV ?= origin/main
bench-setup-ab: $(BUILD)/ecopt
	@mkdir -p $(SETUP_DATA)
	[ -s $(SETUP_DATA)/d1e6.svm ] || $(BUILD)/ecopt gen --rows 100000 --features 1000000 --nnz 20 -o $(SETUP_DATA)/d1e6.svm
	[ -s $(SETUP_DATA)/n1e6.svm ] || $(BUILD)/ecopt gen --rows 1000000 --features 100000 --nnz 20 -o $(SETUP_DATA)/n1e6.svm
	sh bench/bench_setup_ab.sh -a $(SETUP_AB_REV) -r $(SETUP_REPS) \
	    $(SETUP_DATA)/d1e6.svm $(SETUP_DATA)/n1e6.svm
	@echo "(copy the section to bench/results/setup.md)"
