#!/bin/sh
# The citation check: the code and its documents cite the manual in docs/
# by file and section heading, e.g.  docs/algorithms.md, "ECLK's constants",
# and nothing that is not in the repository. Run from the top of the tree:
#   tools/citecheck.sh
# Fails, naming the file and line, when a text file of the tree
#   (a) cites the design document that is not in the repository
#       (DESIGN[.]md);
#   (b) cites an issue or pull request by number (the word issue, or a
#       hash sign, before a number);
#   (c) cites a section of the top-level README by name: the README is a
#       front page, its sections are not cited;
#   (d) cites a docs file with a quoted heading where the file does not
#       exist or has no heading (a line of #s, outside code fences) with
#       exactly that text. A citation may wrap over comment lines; inside
#       docs/ a bare FILE.md (or a link [FILE.md](FILE.md)) cites
#       docs/FILE.md.
# On success it prints "citecheck: N files, M citations, ok".
# POSIX sh, find, grep and awk only; tools/citecheck-test.sh checks this
# checker.
set -eu
LC_ALL=C
export LC_ALL

[ -d docs ] || { echo "citecheck: no docs/ here: run it from the top of the tree" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/citecheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The tree's text files: sources, scripts, make files, schema, web, docs and
# results; not build output, dependencies, images or fuzz seeds, nor the
# checker's own test, whose trees break every rule on purpose.
find . \( -name .git -o -type d -name 'build*' -o -name node_modules -o -path ./fuzz/corpus \
    -o -path ./tools/citecheck-test.sh \) -prune \
    -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.sh' -o -name '*.mk' \
    -o -name Makefile -o -name '*.sql' -o -name '*.yaml' -o -name '*.yml' \
    -o -name '*.js' -o -name '*.mjs' -o -name '*.css' -o -name '*.html' \
    -o -name '*.md' -o -name '*.py' -o -name Dockerfile -o -path ./.ci/run \) \
    -print | sed 's|^\./||' | sort > "$tmp/files"

# The headings of docs/*.md, as "FILE<TAB>Heading".
for f in docs/*.md; do
    [ -f "$f" ] || continue
    awk -v f="$f" '
        BEGIN { print f "\t" }
        /^```/ { fence = !fence; next }
        !fence && /^#+[ \t]/ { h = $0; sub(/^#+[ \t]+/, "", h); sub(/[ \t]+$/, "", h); print f "\t" h }
    ' "$f"
done > "$tmp/headings"

status=0
# (a) to (c): one line each. The patterns are spelled so that this file
# does not match them itself.
# A hash sign before digits is a colour in CSS, so .css files are read
# for the first patterns only.
design='DESIGN[.]md'
issue='([Ii]ssues?|PR|[Pp]ull request) #?[0-9]+'
hash='(^|[ (,;[])#[0-9]+([ ),.:;]|$)'
readme='README[,:] *"?[A-Z]'
grep -v '[.]css$' "$tmp/files" > "$tmp/notcss" || :
grep '[.]css$' "$tmp/files" > "$tmp/css" || :
{
    xargs grep -n -I -E "$design|$issue|$hash|$readme" < "$tmp/notcss" || :
    xargs grep -n -I -E "$design|$issue|$readme" < "$tmp/css" || :
} > "$tmp/bad" 2>/dev/null
if [ -s "$tmp/bad" ]; then
    while IFS= read -r line; do
        echo "citecheck: $line" >&2
    done < "$tmp/bad"
    echo "citecheck: the lines above cite the design document, an issue" \
         "number or a README section; cite the docs by file and section" \
         "instead, e.g." \
         "docs/algorithms.md, \"ECLK's constants\"" >&2
    status=1
fi

# (d): the citations, each file's text joined into one line with comment
# leaders and C string quotes taken away, so that a citation may wrap.
# Prints "FILE<TAB>docs/NAME.md<TAB>Heading" per citation.
while IFS= read -r f; do
    awk -v f="$f" '
        {
            s = $0
            sub(/^[ \t]*(\/\/+|\/?\*+\/?|#+|--+|;+)?[ \t]*/, "", s)
            gsub(/\\"/, "\"", s)
            text = text " " s
        }
        END {
            indocs = (f ~ /^docs\//)
            t = text
            while (match(t, /(docs\/)?[A-Za-z0-9_.-]+\.md\)?,[ \t]+"[^"]+"/)) {
                c = substr(t, RSTART, RLENGTH)
                t = substr(t, RSTART + RLENGTH)
                name = c
                sub(/\)?,[ \t]+".*$/, "", name)
                head = c
                sub(/^[^"]*"/, "", head)
                sub(/"$/, "", head)
                gsub(/[ \t]+/, " ", head)
                if (name !~ /^docs\//) {
                    if (!indocs || name ~ /\//)
                        continue
                    name = "docs/" name
                }
                print f "\t" name "\t" head
            }
        }
    ' "$f"
done < "$tmp/files" > "$tmp/cites"

awk -F '\t' '
    FILENAME == ARGV[1] { have[$1 "\t" $2] = 1; file[$1] = 1; next }
    {
        if (!($2 in file)) {
            printf "citecheck: %s cites %s, which does not exist\n", $1, $2 > "/dev/stderr"
            bad = 1
        } else if (!(($2 "\t" $3) in have)) {
            printf "citecheck: %s cites %s, \"%s\": no such heading there\n", $1, $2, $3 > "/dev/stderr"
            bad = 1
        }
    }
    END { exit bad }
' "$tmp/headings" "$tmp/cites" || status=1

if [ "$status" -eq 0 ]; then
    echo "citecheck: $(wc -l < "$tmp/files" | tr -d ' ') files," \
         "$(wc -l < "$tmp/cites" | tr -d ' ') citations, ok"
fi
exit "$status"
