# The dashboard (web/*) embedded in the binary, and its browser test.
#   make browser-check    the real server and headless Chromium driven by
#                         playwright-core (tests/browser/); skips with a
#                         message when node or chromium is missing, unless
#                         ECOPT_REQUIRE_BROWSER=1
#
# web/* become $(BUILD)/gen/web/ecopt_web_assets.inc (each file as bytes,
# tools/embed-bytes.sh, and a table of them), which service/api/ui.c
# includes; so the files live in service/api/ui.o itself and every program that
# links the service (ecopt, ecopt-mpi, the tests, the benches) has them
# with no change to any link line.

UI_WEB := $(sort $(wildcard web/*.html web/*.css web/*.js web/*.svg))
UI_INC := $(BUILD)/gen/web/ecopt_web_assets.inc

$(UI_INC): tools/embed-bytes.sh mk/ui.mk $(UI_WEB)
	@mkdir -p $(dir $@)
	@set -e; rm -f $@.tmp; i=0; \
	for f in $(UI_WEB); do \
	    sh tools/embed-bytes.sh ui_web_$$i $$f $@.$$i.c; \
	    cat $@.$$i.c >> $@.tmp; rm -f $@.$$i.c; i=$$((i + 1)); \
	done; \
	echo "static const struct ui_asset ui_assets[] = {" >> $@.tmp; \
	i=0; for f in $(UI_WEB); do \
	    echo "    {\"$$(basename $$f)\", ui_web_$$i, &ui_web_$${i}_len}," >> $@.tmp; \
	    i=$$((i + 1)); \
	done; \
	echo "};" >> $@.tmp; \
	echo "static const size_t ui_nassets = sizeof ui_assets / sizeof ui_assets[0];" >> $@.tmp; \
	mv $@.tmp $@
	@echo "embedded $(words $(UI_WEB)) dashboard files in $@"

$(BUILD)/service/api/ui.o: $(UI_INC)
$(BUILD)/service/api/ui.o: XCFLAGS += -I$(BUILD)/gen/web

.PHONY: browser-check
browser-check: $(BUILD)/ecopt
	@ECOPT_BIN=$(abspath $(BUILD)/ecopt) ECOPT_DATA_DIR=$(ECOPT_DATA_DIR) \
	    sh tests/browser/run.sh
