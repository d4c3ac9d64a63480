# The paper's comparison (bench/bench_paper.c): every table and plot of
# bench/results/paper/ from scratch, and the quick subset CI runs.
.PHONY: bench-paper bench-paper-quick

# About 850 CPU seconds, two processes sharing the runs (the tuned
# comparison's 324 of them included): 11 to 22 minutes on the shared
# 2-core machine, as loaded.
bench-paper: $(BUILD)/bench/bench_paper
	rm -rf bench/results/paper
	mkdir -p bench/results/paper
	$(BUILD)/bench/bench_paper --out bench/results/paper --jobs 2

# Under 2 minutes; fails unless ECLK reaches 1e-6 on mushrooms within its
# budget and the same seed gives the same run twice.
bench-paper-quick: $(BUILD)/bench/bench_paper
	@mkdir -p $(BUILD)/paper-quick
	$(BUILD)/bench/bench_paper --quick --out $(BUILD)/paper-quick --jobs 2

# ECLK's rules and guard (and the inflation's margin c) on a9a, mushrooms
# and w8a x five compressors, one seed: the table of
# bench/results/eclk-rules.md, from which the default is chosen.
.PHONY: bench-eclk-rules
bench-eclk-rules: $(BUILD)/bench/bench_eclk_defaults
	$(BUILD)/bench/bench_eclk_defaults --jobs 2 --seeds 1 --only a9a,mushrooms,w8a \
	    --configs plain,online,online-c1,online-c2,guarded-plain \
	    --out $(BUILD)/eclk-rules-table.md
	@echo "table in $(BUILD)/eclk-rules-table.md"

# ECLK at its defaults on six datasets and five compressors, beside the
# plain L-Katyusha constants and the nominal-delta rule (about 30 CPU
# minutes): the table of bench/results/eclk-defaults.md.
.PHONY: bench-eclk-defaults
bench-eclk-defaults: $(BUILD)/bench/bench_eclk_defaults
	$(BUILD)/bench/bench_eclk_defaults --jobs 2 --out $(BUILD)/eclk-defaults-table.md
	@echo "table in $(BUILD)/eclk-defaults-table.md"
