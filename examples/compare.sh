#!/bin/sh
# Two runs of one problem side by side: ECLK with top-5 against
# uncompressed L-Katyusha on mushrooms (examples/eclk-mushrooms.json), then
# their curves by bits sent, into compare.svg. Needs a service (make run)
# and, when its auth is on, ECOPT_TOKEN; ECOPT_URL says where it is.
#   sh examples/compare.sh
set -eu
ecopt=${ECOPT:-build/ecopt}

a=$($ecopt submit examples/eclk-mushrooms.json | cut -d' ' -f1)
b=$($ecopt submit examples/eclk-mushrooms.json --algorithm lkatyusha \
    --set 'compressor={"type": "none"}' | cut -d' ' -f1)
# watch exits 0 when the target was reached, 5 when the budget ran out
# first, 3 when the run got worse, blew up or failed (docs/cli.md)
for id in "$a" "$b"; do
    $ecopt watch "$id" || [ $? -eq 5 ]
done
$ecopt compare "$a" "$b"
$ecopt plot "$a" "$b" --x bits -o compare.svg
echo "curves by bits sent: compare.svg"
