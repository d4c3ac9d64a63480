"""A job's rows as a pandas DataFrame, straight from the service.

    python3 examples/read_csv.py JOB_ID      # ECOPT_URL, ECOPT_TOKEN as for ecopt

The columns are those of docs/api.md, "Metric rows"; every real is in its
shortest text that reads back as the same double.
"""
import os
import sys
import urllib.request

import pandas as pd  # Debian: apt-get install python3-pandas

url = "%s/v1/jobs/%s/metrics?format=csv" % (
    os.environ.get("ECOPT_URL", "http://127.0.0.1:8080").rstrip("/"), sys.argv[1])
token = os.environ.get("ECOPT_TOKEN")
request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
with urllib.request.urlopen(request) as reply:
    rows = pd.read_csv(reply)

print(rows[["round", "bits_up", "rel_gap"]].tail())
print("rounds to 1e-6:", rows.loc[rows.rel_gap <= 1e-6, "round"].min())
