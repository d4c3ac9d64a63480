# The paper's comparison (bench/bench_paper.c): every table and plot of
# bench/results/paper/ from scratch, and the quick subset CI runs.
.PHONY: bench-paper bench-paper-quick bench-paper-fair bench-paper-accel

# The fair comparison's scope (bench/results/paper/fair.md's: 3 seeds,
# the multipliers 0.5, 1, 4 and 16; 568 runs and 863 CPU s on a9a alone,
# 1704 runs on the three datasets it covers by default). FAIR_ARGS= runs the
# program's defaults, the protocol in full: 5 seeds, x0.5 .. x32 in
# factors of 2 (about 5000 runs, some 6000 CPU seconds, estimated from a
# subset).
FAIR_ARGS ?= --fair-seeds 3 --fair-grid 0.5,1,4,16

# About 850 CPU seconds for the tables, the sweeps and the tuned
# comparison, two processes sharing the runs, plus the fair comparison's
# (about 2000 at FAIR_ARGS), the accelerated comparison's (FAIR_ARGS
# apply to it too) and the slopes': several hours on the shared 2-core
# machine; bench-paper-fair and bench-paper-accel run their parts alone.
bench-paper: $(BUILD)/bench/bench_paper
	rm -rf bench/results/paper
	mkdir -p bench/results/paper
	$(BUILD)/bench/bench_paper --out bench/results/paper --jobs 2 $(FAIR_ARGS)

# The fair comparison alone (fair.md, fair-DATASET.md).
bench-paper-fair: $(BUILD)/bench/bench_paper
	mkdir -p bench/results/paper
	nice -n 10 $(BUILD)/bench/bench_paper --part fair --out bench/results/paper --jobs 2 $(FAIR_ARGS)

# The accelerated comparison (accel-family.md, accel-family-DATASET.md:
# ECLK, ADIANA, ADEF, EControl, L-Katyusha, EC-LSVRG (Qian) and the
# DIANA/EF21 family under the fair protocol, on a9a and mushrooms) and
# the acceleration slopes (accel-slopes.md, .svg: rounds to 1e-6 against
# kappa for each accelerated method, a slope per seed). ACCEL_ARGS sets
# the comparison's seeds, grid, datasets and compressors; SLOPE_ARGS the
# slopes' seeds and kappas (--slope-kappas 4 adds lambda2_rel 1e-5).
ACCEL_ARGS ?= --fair-seeds 3 --fair-grid 1,4,16,64 --fair-datasets mushrooms,a9a \
	--fair-compressors topk,randk
SLOPE_ARGS ?= --slope-seeds 3
bench-paper-accel: $(BUILD)/bench/bench_paper
	mkdir -p bench/results/paper
	nice -n 10 $(BUILD)/bench/bench_paper --part accel-family --out bench/results/paper \
	    --jobs 2 $(ACCEL_ARGS)
	nice -n 10 $(BUILD)/bench/bench_paper --part slopes --out bench/results/paper \
	    --jobs 2 $(SLOPE_ARGS)

# Under 2 minutes; fails unless ECLK reaches 1e-6 on mushrooms within its
# budget and the same seed gives the same run twice.
bench-paper-quick: $(BUILD)/bench/bench_paper
	@mkdir -p $(BUILD)/paper-quick
	$(BUILD)/bench/bench_paper --quick --out $(BUILD)/paper-quick --jobs 2

# ECLK's rules and guards on a9a, mushrooms, w8a and madelon x five
# compressors, two seeds: the table of bench/results/eclk-rules.md, from
# which the default is chosen (about 20 CPU minutes; add --batch full for
# full local gradients, --configs online-c1,online-c2,guarded-plain for the
# earlier candidates).
.PHONY: bench-eclk-rules
bench-eclk-rules: $(BUILD)/bench/bench_eclk_defaults
	nice -n 10 $(BUILD)/bench/bench_eclk_defaults --jobs 2 --seeds 2 \
	    --only a9a,mushrooms,w8a,madelon --configs plain,online,adaptive \
	    --out $(BUILD)/eclk-rules-table.md
	@echo "table in $(BUILD)/eclk-rules-table.md"

# ECLK at its defaults on six datasets and five compressors, beside the
# plain L-Katyusha constants and the nominal-delta rule (about 30 CPU
# minutes): the table of bench/results/eclk-defaults.md.
.PHONY: bench-eclk-defaults
bench-eclk-defaults: $(BUILD)/bench/bench_eclk_defaults
	$(BUILD)/bench/bench_eclk_defaults --jobs 2 --out $(BUILD)/eclk-defaults-table.md
	@echo "table in $(BUILD)/eclk-defaults-table.md"
