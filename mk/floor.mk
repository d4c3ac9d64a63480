# Large rounds against their memory floor, and top-k old against new
# (bench/bench_floor.c): writes bench/results/floor.md. About two minutes,
# most of it the setup of a d = 1e6 problem. Not in make bench.
.PHONY: bench-floor
bench-floor: $(BUILD)/bench/bench_floor
	@mkdir -p bench/results
	$(BUILD)/bench/bench_floor bench/results/floor.md
