#!/bin/sh
# Checks the checker: tools/citecheck.sh on small trees made here, one
# whose citations all hold (it must pass) and one per way of breaking the
# rules (each must fail, naming the file). Deleting a rule of the checker
# makes one of these fail.
#   tools/citecheck-test.sh [CHECKER]      (default tools/citecheck.sh)
set -eu
checker=$(cd "$(dirname "${1:-tools/citecheck.sh}")" && pwd)/$(basename "${1:-tools/citecheck.sh}")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/citecheck-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
cases=0

# A tree whose citations hold: a C comment citing a heading over two
# lines, a C string citing one with escaped quotes, a shell comment, a
# docs page citing another by a bare name and by a link, and a CSS colour.
make_tree() {
    root=$1
    rm -rf "$root"
    mkdir -p "$root/docs" "$root/src" "$root/web" "$root/build"
    cat > "$root/docs/algo.md" <<'EOF'
# Algorithms

## ECLK's constants

```
# not a heading: inside a fence
```

### The baselines' steps
EOF
    cat > "$root/docs/api.md" <<'EOF'
# API

## Job fields

See algo.md, "ECLK's constants", and [algo.md](algo.md), "The baselines' steps".
EOF
    cat > "$root/src/a.c" <<'EOF'
/*
 * The margin (see docs/algo.md,
 * "ECLK's constants"); 64 is EF21's factor.
 */
static const char *s = "default steps (docs/algo.md, \"The baselines' steps\")";
EOF
    cat > "$root/src/run.sh" <<'EOF'
# The fields are those of docs/api.md, "Job fields".
echo "$#"
EOF
    printf '.x { color: #101828; }\n' > "$root/web/app.css"
    # Build output is not read.
    printf '/* issue 12 */\n' > "$root/build/gen.c"
}

# expect NAME pass|fail [TEXT]: run the checker on $tmp/t, which must pass
# or fail as told, and on failure say TEXT.
expect() {
    cases=$((cases + 1))
    if (cd "$tmp/t" && sh "$checker") > "$tmp/out" 2>&1; then
        got=pass
    else
        got=fail
    fi
    if [ "$got" != "$2" ]; then
        echo "citecheck-test: $1: expected $2, got $got:" >&2
        sed 's/^/  /' "$tmp/out" >&2
        failures=$((failures + 1))
    elif [ $# -ge 3 ] && ! grep -qF -- "$3" "$tmp/out"; then
        echo "citecheck-test: $1: the message does not say '$3':" >&2
        sed 's/^/  /' "$tmp/out" >&2
        failures=$((failures + 1))
    fi
}

make_tree "$tmp/t"
expect "a tree whose citations hold" pass "5 citations, ok"

make_tree "$tmp/t"
printf '# The floors (DESIGN.md section 2).\n' >> "$tmp/t/src/run.sh"
expect "the outside design document" fail "src/run.sh:3:"

make_tree "$tmp/t"
printf '/* Fixed for issue 16. */\n' >> "$tmp/t/src/a.c"
expect "an issue number" fail "src/a.c:6:"

make_tree "$tmp/t"
printf -- '-- Owners (#16).\n' > "$tmp/t/src/m.sql"
expect "a hash-numbered issue" fail "src/m.sql:1:"

make_tree "$tmp/t"
printf '/* default steps (README, Defaults) */\n' >> "$tmp/t/src/a.c"
expect "a README section" fail "src/a.c:6:"

make_tree "$tmp/t"
printf '/* see docs/algo.md, "ECLK constants" */\n' >> "$tmp/t/src/a.c"
expect "a heading that does not exist" fail \
    'src/a.c cites docs/algo.md, "ECLK constants": no such heading'

make_tree "$tmp/t"
printf '/* see docs/algo.md,\n * "not a heading: inside a fence" */\n' >> "$tmp/t/src/a.c"
expect "a heading-like line inside a code fence" fail 'no such heading'

make_tree "$tmp/t"
printf '# see docs/mpi.md, "Across hosts"\n' >> "$tmp/t/src/run.sh"
expect "a docs file that does not exist" fail \
    'src/run.sh cites docs/mpi.md, which does not exist'

make_tree "$tmp/t"
printf 'As [api.md](api.md), "Routes" says.\n' >> "$tmp/t/docs/algo.md"
expect "a docs page citing a missing heading of another" fail \
    'docs/algo.md cites docs/api.md, "Routes": no such heading'

if [ "$failures" -gt 0 ]; then
    echo "citecheck-test: $failures of $cases cases failed" >&2
    exit 1
fi
echo "citecheck-test: $cases cases, ok"
