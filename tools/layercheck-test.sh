#!/bin/sh
# Checks the checker: tools/layercheck.sh on small trees made here, one
# that keeps every rule (it must pass) and one per way of breaking a rule
# (each must fail, with its own message). Deleting a line of the checker's
# enforcement makes one of these fail. Needs cc and nm.
#   tools/layercheck-test.sh [CHECKER]      (default tools/layercheck.sh)
set -eu
checker=$(cd "$(dirname "${1:-tools/layercheck.sh}")" && pwd)/$(basename "${1:-tools/layercheck.sh}")
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/layercheck-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
cases=0
# The tree has no runner: the process rule (d) is tried in case 8 alone.
LAYERCHECK_SPAWNS=
export LAYERCHECK_SPAWNS

# A tree whose floors call and include only downward:
#   cli/main.c -> service/api/route.c -> service/core/job.c
#   -> service/lib/kv/{kv,kv_io}.c (one module; they call each other)
#   -> format/spec.c -> engine/src/eng.c
# and service/api/route.c includes a header generated under build/.
make_tree() {
    root=$1
    rm -rf "$root"
    mkdir -p "$root/engine/include/ecopt" "$root/engine/src" "$root/format" \
        "$root/service/lib/kv" "$root/service/core" "$root/service/api" "$root/cli" \
        "$root/build/gen/web"
    cat > "$root/engine/include/ecopt/eng.h" <<'EOF'
int eng_step(int x);
EOF
    cat > "$root/engine/src/eng.c" <<'EOF'
#include "ecopt/eng.h"
int eng_step(int x) { return x + 1; }
EOF
    cat > "$root/format/spec.h" <<'EOF'
#include "ecopt/eng.h"
int spec_parse(int x);
EOF
    cat > "$root/format/spec.c" <<'EOF'
#include "spec.h"
int spec_parse(int x) { return eng_step(x); }
EOF
    cat > "$root/service/lib/kv.h" <<'EOF'
int kv_get(int x);
int kv_io_read(int x);
EOF
    cat > "$root/service/lib/kv/kv.c" <<'EOF'
#include "kv.h"
int kv_get(int x) { return x > 0 ? kv_io_read(x - 1) : 0; }
EOF
    cat > "$root/service/lib/kv/kv_io.c" <<'EOF'
#include "kv.h"
int kv_io_read(int x) { return kv_get(x); }
EOF
    cat > "$root/service/core/job.h" <<'EOF'
#include "spec.h"
#include "kv.h"
int job_submit(int x);
EOF
    cat > "$root/service/core/job.c" <<'EOF'
#include "job.h"
int job_submit(int x) { return spec_parse(x) + kv_get(x); }
EOF
    cat > "$root/service/api/route.h" <<'EOF'
#include "job.h"
int route(int x);
EOF
    cat > "$root/service/api/route.c" <<'EOF'
#include "route.h"
#include "assets.inc"
int route(int x) { return job_submit(x) + ASSETS; }
EOF
    echo '#define ASSETS 3' > "$root/build/gen/web/assets.inc"
    cat > "$root/cli/cmd.h" <<'EOF'
int cmd_main(void);
EOF
    cat > "$root/cli/main.c" <<'EOF'
#include "cmd.h"
#include "route.h"
int main(void) { return route(1); }
EOF
}

# Compiles every .c of format/, service/ and cli/ into build/ the way the
# Makefile does (the floors on the include path, own folder first).
build_tree() {
    (
        cd "$1"
        for c in $(find format service cli $(ls -d coord 2>/dev/null) -name '*.c'); do
            o=build/${c%.c}.o
            mkdir -p "$(dirname "$o")"
            $cc -c -Iengine/include -Iformat -Icoord -Iservice/lib -Iservice/core \
                -Iservice/api -Icli -Ibuild/gen/web "$c" -o "$o"
        done
    )
}

# expect NAME ok|fail PATTERN: runs the checker in $tmp/t.
expect() {
    name=$1 want=$2 pattern=$3
    cases=$((cases + 1))
    if (cd "$tmp/t" && sh "$checker" build $(find build -name '*.o' | sort)) > "$tmp/out" 2>&1
    then got=ok; else got=fail; fi
    if [ "$got" != "$want" ] || ! grep -q -- "$pattern" "$tmp/out"; then
        echo "layercheck-test: $name: expected $want with '$pattern', got $got:" >&2
        sed 's/^/    /' "$tmp/out" >&2
        failures=$((failures + 1))
    fi
}

# 1. The clean tree passes, with the kv/ folder as one module (its files
#    call each other) and the generated header taken as route.c's own.
make_tree "$tmp/t"; build_tree "$tmp/t"
expect "a tree that keeps the rules" ok "layercheck: 13 files, 5 modules, ok"

# 2. A header of a higher floor included: from lib, from format, from the
#    engine, and a service file including a CLI header. (The objects are
#    the clean tree's: only the includes change.)
make_tree "$tmp/t"; build_tree "$tmp/t"
echo '#include "job.h"' >> "$tmp/t/service/lib/kv.h"
expect "lib includes a core header" fail \
    'service/lib/kv.h:3: includes "job.h" (service/core/job.h, floor service/core) from the lower floor service/lib'
make_tree "$tmp/t"; build_tree "$tmp/t"
echo '#include "kv.h"' >> "$tmp/t/format/spec.c"
expect "format includes a lib header" fail 'format/spec.c:3: includes "kv.h" .* from the lower floor format'
make_tree "$tmp/t"; build_tree "$tmp/t"
echo '#include "spec.h"' >> "$tmp/t/engine/src/eng.c"
expect "the engine includes a format header" fail 'engine/src/eng.c:3: includes "spec.h" .* from the lower floor engine'
make_tree "$tmp/t"; build_tree "$tmp/t"
{ echo '#include "cmd.h"'; cat "$tmp/t/service/api/route.c"; } > "$tmp/route.c"
mv "$tmp/route.c" "$tmp/t/service/api/route.c"
expect "api includes a CLI header" fail 'service/api/route.c:1: includes "cmd.h" (cli/cmd.h, floor cli)'

# 3. An include that resolves nowhere (not in the tree, not generated).
make_tree "$tmp/t"; build_tree "$tmp/t"
echo '#include "nowhere.h"' >> "$tmp/t/service/core/job.h"
expect "an include found nowhere" fail 'service/core/job.h:4: includes "nowhere.h", which is in no folder'

# 4. A call upward: lib calls core (the include is left out, so only the
#    objects show it).
make_tree "$tmp/t"
echo 'int job_submit(int x); int kv_up(int x) { return job_submit(x); }' >> "$tmp/t/service/lib/kv/kv.c"
build_tree "$tmp/t"
expect "lib calls core" fail 'service/lib/kv/ (floor service/lib) calls service/core/job (floor service/core): job_submit'

# 5. A cycle within one floor: core/job calls core/sched and back.
make_tree "$tmp/t"
cat > "$tmp/t/service/core/sched.c" <<'EOF'
int job_submit(int x);
int sched_tick(int x) { return x > 0 ? job_submit(x - 1) : 0; }
EOF
echo 'int sched_tick(int x); int job_again(int x) { return sched_tick(x); }' >> "$tmp/t/service/core/job.c"
build_tree "$tmp/t"
expect "a call cycle in core" fail \
    'call cycle: service/core/job -> service/core/sched (sched_tick) -> service/core/job (job_submit); the 2 modules'

# 6. A cycle of three through a module folder, on one floor.
make_tree "$tmp/t"
mkdir -p "$tmp/t/service/lib/pc"
echo 'int kv_get(int x); int pc_get(int x) { return kv_get(x); }' > "$tmp/t/service/lib/pc/pc.c"
echo 'int pc_get(int x); int blob_put(int x) { return pc_get(x); }' > "$tmp/t/service/lib/blob.c"
echo 'int blob_put(int x); int kv_more(int x) { return blob_put(x); }' >> "$tmp/t/service/lib/kv/kv_io.c"
build_tree "$tmp/t"
expect "a cycle of three in lib" fail \
    'call cycle: service/lib/blob -> service/lib/pc/ (pc_get) -> service/lib/kv/ (kv_get) -> service/lib/blob (blob_put); the 3 modules'

# 7. A source file of service/ over 1500 lines (an engine file may be).
make_tree "$tmp/t"
awk 'BEGIN { for (i = 0; i < 1500; i++) print "/* filler */" }' >> "$tmp/t/service/core/job.c"
awk 'BEGIN { for (i = 0; i < 1600; i++) print "/* filler */" }' >> "$tmp/t/engine/src/eng.c"
build_tree "$tmp/t"
expect "a long core file" fail 'service/core/job.c: 1502 lines, over the limit of 1500'
if grep -q 'eng.c' "$tmp/out"; then
    echo "layercheck-test: the line limit was applied to the engine" >&2
    failures=$((failures + 1))
fi

# 8. Processes: service/core/job starts cli/tool as a process. The tool
#    calls the coordinator's floor (below core): fine. Calling the route
#    (service/api) or core's own job back is a circle between processes,
#    though every call of the objects looks down.
make_tree "$tmp/t"
mkdir -p "$tmp/t/coord"
echo 'int spec_parse(int x); int co_run(int x) { return spec_parse(x); }' > "$tmp/t/coord/co.c"
echo 'int co_run(int x); int tool_main(int x) { return co_run(x); }' > "$tmp/t/cli/tool.c"
build_tree "$tmp/t"
LAYERCHECK_SPAWNS=service/core/job=cli/tool
expect "a started program that calls down" ok "layercheck: 15 files, 7 modules, ok"
echo 'int job_submit(int x); int tool_back(int x) { return job_submit(x); }' >> "$tmp/t/cli/tool.c"
build_tree "$tmp/t"
expect "a started program that calls its starter back" fail \
    'service/core/job starts cli/tool as a process, which calls service/core/job (floor service/core, not below service/core): job_submit'
echo 'int kv_get(int x); int co_back(int x) { return kv_get(x); }' >> "$tmp/t/coord/co.c"
build_tree "$tmp/t"
expect "the coordinator's floor calls the service" fail \
    'coord/co (floor coord) calls service/lib/kv/ (floor service/lib): kv_get'
LAYERCHECK_SPAWNS=service/core/nothing=cli/tool
expect "a starter that is no module" fail 'LAYERCHECK_SPAWNS: service/core/nothing is not among the objects'
LAYERCHECK_SPAWNS=

if [ "$failures" -gt 0 ]; then
    echo "layercheck-test: $failures of $cases cases failed" >&2
    exit 1
fi
echo "layercheck-test: $cases cases, ok"
