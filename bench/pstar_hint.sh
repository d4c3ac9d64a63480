#!/bin/sh
# Writes a P* hint for a job's data (docs/api.md, "P* and storage"), as
# the service keeps one, so that the runs of a benchmark on a generated
# problem do not each repeat its P* solve: one in-process run of one round
# reports the problem (api/report-format.md), and the hint names the file
# it is for by device, inode, size and times; it carries lambda_max too,
# so the runs skip the Lanczos run as well.
#   sh bench/pstar_hint.sh ECOPT JOB.json DATA HINT.json
set -eu
ecopt=$1 spec=$2 data=$3 hint=$4
one=$(mktemp) start=$(mktemp)
trap 'rm -f "$one" "$start"' EXIT
python3 -c 'import json, sys
s = json.load(open(sys.argv[1])); s["max_rounds"] = 1; json.dump(s, open(sys.argv[2], "w"))' \
    "$spec" "$one"
"$ecopt" run "$one" --backend inproc --quiet --report-fd 3 3>"$start" >/dev/null </dev/null ||
    [ $? -eq 5 ]
python3 - "$start" "$data" "$hint" <<'EOP'
import json, os, sys
pb = json.loads(open(sys.argv[1]).readline())["problem"]
st = os.stat(sys.argv[2])
hint = {"file": {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size,
                 "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns},
        "loss": pb["loss"],
        "entries": [{"lambda1": pb["lambda1"], "lambda2": pb["lambda2"],
                     "p_star": pb["P_star"], "bound": pb["P_star_bound"],
                     "method": pb["solver"]["method"]}]}
# lambda_max holds for the file's row order: the contiguous split's
if pb["split"]["type"] == "contiguous" and pb["lambda_max"]["value"] is not None:
    lm = pb["lambda_max"]
    hint["lambda_max"] = {"value": lm["value"], "method": lm["method"],
                          "steps": lm["steps"]}
json.dump(hint, open(sys.argv[3], "w"))
EOP
