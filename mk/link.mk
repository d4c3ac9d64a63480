# What compression buys in seconds (bench/bench_link.sh): Open MPI across
# two network namespaces with a tbf rate limit on the veth, as root; about
# 15 minutes. Not in make bench (it needs root and ip netns).
.PHONY: bench-link
bench-link: all
	@mkdir -p bench/results
	ECOPT=$(abspath $(BUILD)/ecopt) sh bench/bench_link.sh bench/results/link.md
