#!/bin/sh
# The layer check (docs/architecture.md, "The layer check"): the floors
# of the code, lowest first,
#   engine (engine/include, engine/src, engine/mpi) < format < coord
#   < service/lib < service/core < service/api < cli
# only look down. Run from the top of the tree:
#   tools/layercheck.sh BUILD OBJECT...
# BUILD is the build directory; the objects are those of format/, service/
# and cli/ under it, as the Makefile lists them (a search of BUILD would
# find the objects of files since moved or deleted). Fails,
# naming what breaks which rule, when
#   (a) a .c or .h of engine/, format/, service/ or cli/ includes "X" and X,
#       resolved as the compiler does (the file's own folder first, then
#       -I engine/include format coord service/lib service/core service/api
#       cli),
#       is of a higher floor; a header generated under BUILD counts as of
#       the including file's floor; an include found nowhere is an error;
#   (b) from nm of the objects: each object is a module, except that the
#       objects of one module folder (service/lib/http/*.o) are one; A calls
#       B when A has an undefined symbol that B defines; any cycle of calls
#       among modules fails (naming a cycle), and so does any call from a
#       lower floor to a higher one (naming both);
#   (c) a .c or .h of format/, coord/, service/ or cli/ is over 1500 lines;
#   (d) processes: a module that starts a program as a process (the
#       service's runner starts `ecopt run`, whose code is cli/run) must
#       not be called back by it: every module the started one calls,
#       directly or not, is on a floor below the starter's. The pairs are
#       LAYERCHECK_SPAWNS, "STARTER=STARTED ..." (module names as in (b));
#       by default service/lib/runner=cli/run. Both must be among the
#       objects.
# On success it prints "layercheck: N files, M modules, ok";
# LAYERCHECK_VERBOSE=1 also lists every call between modules on stderr.
# POSIX sh, awk and nm only; tools/layercheck-test.sh checks this checker.
set -eu
LC_ALL=C
export LC_ALL

[ $# -ge 2 ] || { echo "usage: tools/layercheck.sh BUILD OBJECT..." >&2; exit 2; }
build=${1%/}
shift
max_lines=${LAYERCHECK_MAX_LINES:-1500}
spawns=${LAYERCHECK_SPAWNS-service/lib/runner=cli/run}
for d in engine format service cli; do
    [ -d "$d" ] || { echo "layercheck: no $d/ here: run it from the top of the tree" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/layercheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The floors, lowest first: a path prefix and the floor's name.
cat > "$tmp/floors" <<'EOF'
engine/ engine
format/ format
coord/ coord
service/lib/ service/lib
service/core/ service/core
service/api/ service/api
cli/ cli
EOF
# The -I folders, in the compiler's order (the Makefile's LAYER_DIRS).
incdirs="engine/include format coord service/lib service/core service/api cli"

top="engine format service cli"
[ -d coord ] && top="$top coord"
find $top -type f | sort > "$tmp/tree"
grep -E '\.[ch]$' "$tmp/tree" > "$tmp/sources" || :
if [ -d "$build" ]; then
    find "$build" -type f \( -name '*.h' -o -name '*.inc' \) | sort > "$tmp/generated"
else
    : > "$tmp/generated"
fi

# Common awk: the floor of a path, and a path with "." and ".." resolved.
cat > "$tmp/common.awk" <<'EOF'
function load_floors(file,    line, f) {
    nfloors = 0
    while ((getline line < file) > 0) {
        split(line, f, " ")
        floor_prefix[nfloors] = f[1]
        floor_name[nfloors] = f[2]
        nfloors++
    }
    close(file)
}
# The floor of a path (the longest prefix wins), or -1.
function floor_of(path,    i, best, bestlen) {
    best = -1
    bestlen = 0
    for (i = 0; i < nfloors; i++)
        if (index(path, floor_prefix[i]) == 1 && length(floor_prefix[i]) > bestlen) {
            best = i
            bestlen = length(floor_prefix[i])
        }
    return best
}
function normalize(path,    n, part, i, out, k, stack) {
    n = split(path, part, "/")
    k = 0
    for (i = 1; i <= n; i++) {
        if (part[i] == "" || part[i] == ".")
            continue
        if (part[i] == ".." && k > 0 && stack[k] != "..") {
            k--
            continue
        }
        stack[++k] = part[i]
    }
    out = ""
    for (i = 1; i <= k; i++)
        out = out (i > 1 ? "/" : "") stack[i]
    return out
}
EOF

# (a) includes and (c) lengths.
cat > "$tmp/includes.awk" <<'EOF'
BEGIN {
    load_floors(floors)
    while ((getline p < tree) > 0)
        exists[p] = 1
    close(tree)
    ngen = 0
    while ((getline p < generated) > 0)
        gen[ngen++] = p
    close(generated)
    ndirs = split(incdirs, dirs, " ")
}
# Where the compiler finds "x" from file: its folder, then the -I folders.
function resolve(file, x,    dir, cand, i) {
    dir = file
    sub(/\/[^\/]*$/, "", dir)
    cand = normalize(dir "/" x)
    if (cand in exists)
        return cand
    for (i = 1; i <= ndirs; i++) {
        cand = normalize(dirs[i] "/" x)
        if (cand in exists)
            return cand
    }
    return ""
}
function is_generated(x,    i, tail) {
    tail = "/" x
    for (i = 0; i < ngen; i++)
        if (length(gen[i]) >= length(tail) &&
            substr(gen[i], length(gen[i]) - length(tail) + 1) == tail)
            return 1
    return 0
}
{
    file = $0
    ff = floor_of(file)
    if (ff < 0) {
        printf "%s: not in any floor (engine/, format/, coord/, service/lib/, service/core/, service/api/, cli/)\n", file
        next
    }
    nfiles++
    lineno = 0
    while ((getline line < file) > 0) {
        lineno++
        if (line !~ /^[ \t]*#[ \t]*include[ \t]*"/)
            continue
        x = line
        sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", x)
        sub(/".*$/, "", x)
        to = resolve(file, x)
        if (to == "") {
            if (!is_generated(x))
                printf "%s:%d: includes \"%s\", which is in no folder of the tree nor generated under %s/\n", file, lineno, x, build
            continue
        }
        tf = floor_of(to)
        if (tf > ff)
            printf "%s:%d: includes \"%s\" (%s, floor %s) from the lower floor %s\n", file, lineno, x, to, floor_name[tf], floor_name[ff]
    }
    close(file)
    if (file ~ /^(format|coord|service|cli)\// && lineno > max_lines)
        printf "%s: %d lines, over the limit of %d\n", file, lineno, max_lines
}
END { print nfiles + 0 > count }
EOF
awk -v tree="$tmp/tree" -v generated="$tmp/generated" -v floors="$tmp/floors" \
    -v incdirs="$incdirs" -v max_lines="$max_lines" -v build="$build" \
    -v count="$tmp/nfiles" -f "$tmp/common.awk" -f "$tmp/includes.awk" \
    "$tmp/sources" > "$tmp/violations"

# (b) calls, from nm -P of each object: "OBJECT NAME TYPE".
for o in "$@"; do echo "$o"; done | sort > "$tmp/objects"
: > "$tmp/symbols"
while read -r o; do
    [ -f "$o" ] || { echo "layercheck: $o is missing (build first)" >&2; exit 2; }
    nm -P "$o" | awk -v o="$o" 'NF >= 2 { print o, $1, $2 }' >> "$tmp/symbols"
done < "$tmp/objects"

cat > "$tmp/calls.awk" <<'EOF'
BEGIN { load_floors(floors) }
# The module of an object: its path under BUILD without ".o", or its module
# folder ("service/lib/http/") when it lies below the top of its floor.
function module_of(obj,    rel, f, rest) {
    rel = obj
    if (index(rel, build "/") == 1)
        rel = substr(rel, length(build) + 2)
    f = floor_of(rel)
    if (f < 0)
        return ""
    rest = substr(rel, length(floor_prefix[f]) + 1)
    if (index(rest, "/") > 0)
        return floor_prefix[f] substr(rest, 1, index(rest, "/"))
    sub(/\.o$/, "", rel)
    return rel
}
{
    m = module_of($1)
    if (m == "") {
        printf "%s: an object outside format/, coord/, service/ and cli/\n", $1
        next
    }
    if (!(m in floor_mod)) {
        floor_mod[m] = floor_of(m)
        mods[nmods++] = m
    }
    if ($3 == "U" || $3 == "w")
        undef[m, $2] = 1
    else if ($3 ~ /^[A-TV-Z]$/)
        defs[$2] = ($2 in defs) ? defs[$2] SUBSEP m : m
}
END {
    # The calls: A -> B with the first symbol (in name order) for each.
    for (k in undef) {
        split(k, ab, SUBSEP)
        a = ab[1]; s = ab[2]
        if (!(s in defs))
            continue
        n = split(defs[s], bs, SUBSEP)
        for (i = 1; i <= n; i++) {
            b = bs[i]
            if (b == a)
                continue
            if (!((a, b) in edge) || s < edge[a, b])
                edge[a, b] = s
        }
    }
    # Sorted modules and successor lists, so that reports are stable.
    for (i = 1; i < nmods; i++)
        for (j = i; j > 0 && mods[j] < mods[j - 1]; j--) {
            t = mods[j]; mods[j] = mods[j - 1]; mods[j - 1] = t
        }
    for (i = 0; i < nmods; i++) {
        nsucc[i] = 0
        for (j = 0; j < nmods; j++)
            if ((mods[i], mods[j]) in edge)
                succ[i, nsucc[i]++] = j
    }
    # Every call between modules, when asked (LAYERCHECK_VERBOSE=1).
    if (verbose != "")
        for (i = 0; i < nmods; i++)
            for (k = 0; k < nsucc[i]; k++)
                printf "%s -> %s (%s)\n", mods[i], mods[succ[i, k]], edge[mods[i], mods[succ[i, k]]] > verbose
    # Calls upward.
    for (i = 0; i < nmods; i++)
        for (k = 0; k < nsucc[i]; k++) {
            j = succ[i, k]
            if (floor_mod[mods[i]] < floor_mod[mods[j]])
                printf "%s (floor %s) calls %s (floor %s): %s\n", mods[i], floor_name[floor_mod[mods[i]]], mods[j], floor_name[floor_mod[mods[j]]], edge[mods[i], mods[j]]
        }
    # (d) Processes: what a started program's module reaches must stand
    # below the module that starts it.
    nsp = split(spawns, sp, " ")
    for (p = 1; p <= nsp; p++)
        check_spawn(sp[p])
    # Cycles: the strongly connected components of two or more (Tarjan).
    index_next = 0
    nstack = 0
    for (i = 0; i < nmods; i++)
        if (!(i in idx))
            strong(i)
    print nmods > count
}
function module_index(name,    i) {
    for (i = 0; i < nmods; i++)
        if (mods[i] == name)
            return i
    return -1
}
# STARTER=STARTED: every module STARTED reaches is below STARTER's floor.
function check_spawn(pair,    parts, a, b, head, tail, queue, seen, i, k, w) {
    if (split(pair, parts, "=") != 2) {
        printf "LAYERCHECK_SPAWNS: \"%s\" is not STARTER=STARTED\n", pair
        return
    }
    a = module_index(parts[1])
    b = module_index(parts[2])
    if (a < 0 || b < 0) {
        printf "LAYERCHECK_SPAWNS: %s is not among the objects\n", a < 0 ? parts[1] : parts[2]
        return
    }
    head = tail = 0
    queue[tail++] = b
    seen[b] = 1
    while (head < tail) {
        i = queue[head++]
        for (k = 0; k < nsucc[i]; k++) {
            w = succ[i, k]
            if (w in seen)
                continue
            seen[w] = 1
            queue[tail++] = w
            if (floor_mod[mods[w]] >= floor_mod[mods[a]])
                printf "%s starts %s as a process, which calls %s (floor %s, not below %s): %s\n", mods[a], mods[b], mods[w], floor_name[floor_mod[mods[w]]], floor_name[floor_mod[mods[a]]], edge[mods[i], mods[w]]
        }
    }
}
function strong(v,    k, w, members, n, c) {
    idx[v] = low[v] = index_next++
    stack[nstack++] = v
    onstack[v] = 1
    for (k = 0; k < nsucc[v]; k++) {
        w = succ[v, k]
        if (!(w in idx)) {
            strong(w)
            if (low[w] < low[v])
                low[v] = low[w]
        } else if (onstack[w] && idx[w] < low[v])
            low[v] = idx[w]
    }
    if (low[v] != idx[v])
        return
    n = 0
    delete comp
    do {
        w = stack[--nstack]
        onstack[w] = 0
        comp[w] = 1
        n++
    } while (w != v)
    if (n >= 2)
        report_cycle(n)
}
# One cycle through the lowest-named module of the component (a shortest
# way back to it, found breadth first), then the whole component.
function report_cycle(n,    s, i, k, w, head, tail, queue, m, out, list, prev) {
    s = -1
    for (i = 0; i < nmods; i++)
        if (i in comp) { s = i; break }
    head = tail = 0
    delete seen
    delete from
    for (k = 0; k < nsucc[s]; k++) {
        w = succ[s, k]
        if ((w in comp) && !(w in seen)) {
            seen[w] = 1; from[w] = s; queue[tail++] = w
        }
    }
    while (head < tail && !(s in seen)) {
        i = queue[head++]
        for (k = 0; k < nsucc[i]; k++) {
            w = succ[i, k]
            if ((w in comp) && !(w in seen)) {
                seen[w] = 1; from[w] = i; queue[tail++] = w
            }
        }
    }
    # Back from s along from[]: path[0] = s, path[1] its caller in the
    # cycle, ..., path[m - 1] the module s calls first.
    m = 0
    w = s
    do {
        path[m++] = w
        w = from[w]
    } while (w != s)
    out = mods[s]
    prev = s
    for (i = m - 1; i >= 1; i--) {
        out = out " -> " mods[path[i]] " (" edge[mods[prev], mods[path[i]]] ")"
        prev = path[i]
    }
    out = out " -> " mods[s] " (" edge[mods[prev], mods[s]] ")"
    list = ""
    for (i = 0; i < nmods; i++)
        if (i in comp)
            list = list (list == "" ? "" : ", ") mods[i]
    printf "call cycle: %s; the %d modules that call each other round: %s\n", out, n, list
}
EOF
verbose=
[ -n "${LAYERCHECK_VERBOSE:-}" ] && verbose=/dev/stderr
awk -v floors="$tmp/floors" -v build="$build" -v count="$tmp/nmods" -v verbose="$verbose" \
    -v spawns="$spawns" \
    -f "$tmp/common.awk" -f "$tmp/calls.awk" "$tmp/symbols" >> "$tmp/violations"

if [ -s "$tmp/violations" ]; then
    cat "$tmp/violations" >&2
    echo "layercheck: $(wc -l < "$tmp/violations" | tr -d ' ') violations" >&2
    exit 1
fi
echo "layercheck: $(cat "$tmp/nfiles") files, $(cat "$tmp/nmods") modules, ok"
