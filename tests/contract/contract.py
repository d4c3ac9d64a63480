#!/usr/bin/env python3
"""The API contract, checked against the real server: every operation of
api/openapi.yaml is called for a success and for its errors, and each answer
must be a status the operation documents with a body its schema accepts.
An operation the document lists but this script never reaches, or a route the
server answers that the document lacks, fails too; so does /metrics when
promtool (Debian's prometheus package) rejects it.

Usage: contract.py OPENAPI_YAML BASE_URL TOKEN OTHER_TOKEN
Exit status 0 when everything holds; the first lines say what did not."""
import copy
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import jsonschema
import yaml

spec_path, base, token, other = sys.argv[1:5]
with open(spec_path) as f:
    doc = yaml.safe_load(f)

failures = []
seen = set()


def to_json_schema(node):
    """OpenAPI 3.0 schema objects to JSON Schema draft 4: nullable becomes
    a null type (or a null alternative); $refs stay, resolved in doc."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable"):
        if "type" in out:
            t = out["type"]
            out["type"] = (t if isinstance(t, list) else [t]) + ["null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = out["enum"] + [None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


root = to_json_schema(copy.deepcopy(doc))
resolver = jsonschema.RefResolver.from_schema(root)


def deref(node):
    while isinstance(node, dict) and "$ref" in node:
        node = resolver.resolve(node["$ref"])[1]
    return node


def operation(method, pattern):
    item = doc["paths"].get(pattern)
    if item is None or method.lower() not in item:
        return None
    return item[method.lower()]


def call(method, path, pattern, body=None, auth=True, tok=None, headers=None,
         raw=None, ctype="application/json"):
    """One request; checks the answer against the operation's contract and
    returns (status, parsed body or text)."""
    url = base + path
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if auth:
        req.add_header("Authorization", "Bearer " + (tok or token))
    if data is not None:
        req.add_header("Content-Type", ctype)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, ct, payload = r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        status, ct, payload = e.code, e.headers.get("Content-Type", ""), e.read()
    seen.add((method, pattern))
    op = operation(method, pattern)
    where = "%s %s (%s)" % (method, path, pattern)
    if op is None:
        failures.append("%s: the contract has no such operation" % where)
        return status, payload
    responses = {str(k): v for k, v in op.get("responses", {}).items()}
    if str(status) not in responses:
        failures.append("%s: status %d is not documented (documented: %s); body %.200s"
                        % (where, status, ", ".join(sorted(responses)), payload))
        return status, payload
    resp = deref(responses[str(status)])
    media = ct.split(";")[0].strip()
    parsed = payload
    if media in ("application/json", "application/problem+json"):
        try:
            parsed = json.loads(payload)
        except ValueError as e:
            failures.append("%s: %d body is not JSON: %s" % (where, status, e))
            return status, payload
    content = resp.get("content")
    if content is None:
        return status, parsed
    if media not in content:
        failures.append("%s: %d answered %s, the contract says %s"
                        % (where, status, media, ", ".join(content)))
        return status, parsed
    schema = content[media].get("schema") if content[media] else None
    if schema is not None and media.endswith("json"):
        try:
            jsonschema.Draft4Validator(to_json_schema(schema), resolver=resolver).validate(parsed)
        except jsonschema.ValidationError as e:
            failures.append("%s: %d body breaks its schema at %s: %s"
                            % (where, status, "/".join(str(p) for p in e.absolute_path),
                               e.message[:300]))
    return status, parsed


def wait_final(job_id, tok=None):
    for _ in range(600):
        s, j = call("GET", "/v1/jobs/" + job_id, "/v1/jobs/{id}", tok=tok)
        if s == 200 and j["state"] not in ("queued", "running"):
            return j
        time.sleep(0.1)
    failures.append("job %s did not end" % job_id)
    return None


job = {"dataset": "heart_scale", "workers": 2, "algorithm": "eclk",
       "compressor": {"type": "topk", "k": 2}, "max_rounds": 200, "target": 0,
       "name": "contract", "labels": {"suite": "contract"}}
endless = {"dataset": "heart_scale", "workers": 2, "max_rounds": 40000000, "target": 0}

# Health, the contract itself, the dashboard, problem types.
call("GET", "/livez", "/livez", auth=False)
call("GET", "/livez?x=1", "/livez", auth=False)
call("GET", "/readyz", "/readyz", auth=False)
call("GET", "/openapi.yaml", "/openapi.yaml", auth=False)
call("GET", "/problems/invalid-job", "/problems/{kind}", auth=False)
call("GET", "/problems/nothing", "/problems/{kind}", auth=False)
call("GET", "/", "/", auth=False)
call("GET", "/ui/app.js", "/ui/{file}", auth=False)
call("GET", "/ui/missing.js", "/ui/{file}", auth=False)

# Jobs.
s, created = call("POST", "/v1/jobs", "/v1/jobs", body=job)
jid = created["id"] if s == 201 else None
call("POST", "/v1/jobs", "/v1/jobs", body=job, auth=False)
call("POST", "/v1/jobs", "/v1/jobs", body={"dataset": "heart_scale", "workers": 0})
call("POST", "/v1/jobs", "/v1/jobs", raw=b"{not json")
call("POST", "/v1/jobs", "/v1/jobs", raw=b"dataset=a9a", ctype="text/plain")
s, run = call("POST", "/v1/jobs", "/v1/jobs", body=endless)
call("GET", "/v1/jobs?limit=5&label=suite=contract", "/v1/jobs")
call("GET", "/v1/jobs?state=bogus", "/v1/jobs")
call("GET", "/v1/jobs?stop_reason=bogus", "/v1/jobs")
if jid:
    wait_final(jid)
    s, ended = call("GET", "/v1/jobs/" + jid, "/v1/jobs/{id}")
    # What an ended job used, and when its rows were measured, are there.
    usage = ended.get("usage") if s == 200 else None
    if not (isinstance(usage, dict) and (usage.get("cpu_seconds") or 0) > 0 and
            (usage.get("max_rss_bytes") or 0) > 0 and
            (usage.get("rss_sum_bytes") or 0) >= (usage.get("max_rss_bytes") or 0)):
        failures.append("GET /v1/jobs/%s: an ended job's usage is %r" % (jid, usage))
    if s == 200 and not isinstance((ended.get("latest") or {}).get("time"), (int, float)):
        failures.append("GET /v1/jobs/%s: the latest row has no time" % jid)
    call("GET", "/v1/jobs/" + jid, "/v1/jobs/{id}", tok=other)
    call("PATCH", "/v1/jobs/" + jid, "/v1/jobs/{id}",
         body={"name": "renamed", "labels": {"suite": None, "round": "2"}})
    call("PATCH", "/v1/jobs/" + jid, "/v1/jobs/{id}", body={"labels": {"bad key": "x"}})
    call("PATCH", "/v1/jobs/" + jid, "/v1/jobs/{id}", body={"state": "queued"})
    call("GET", "/v1/jobs/%s/metrics?limit=3" % jid, "/v1/jobs/{id}/metrics")
    call("GET", "/v1/jobs/%s/metrics?format=csv" % jid, "/v1/jobs/{id}/metrics")
    call("GET", "/v1/jobs/%s/metrics?limit=0" % jid, "/v1/jobs/{id}/metrics")
    call("GET", "/v1/jobs/%s/metrics?wait=1&after=100000" % jid, "/v1/jobs/{id}/metrics")
    call("GET", "/v1/jobs/%s/events?after=190" % jid, "/v1/jobs/{id}/events")
    call("GET", "/v1/jobs/%s/events" % jid, "/v1/jobs/{id}/events",
         headers={"Last-Event-ID": "x"})
    call("GET", "/v1/jobs/%s/plot.svg?x=bits" % jid, "/v1/jobs/{id}/plot.svg")
    call("GET", "/v1/jobs/%s/plot.svg?x=nope" % jid, "/v1/jobs/{id}/plot.svg")
    call("POST", "/v1/jobs/%s/cancel" % jid, "/v1/jobs/{id}/cancel")      # ended: 409
    call("POST", "/v1/jobs/%s/retry" % jid, "/v1/jobs/{id}/retry")        # succeeded: 409
    call("GET", "/v1/jobs/%s/log" % jid, "/v1/jobs/{id}/log")
call("GET", "/v1/jobs/j_0000000000000000/metrics", "/v1/jobs/{id}/metrics")
if run.get("id") if isinstance(run, dict) else False:
    call("POST", "/v1/jobs/%s/cancel" % run["id"], "/v1/jobs/{id}/cancel")
    wait_final(run["id"])
    s, again = call("POST", "/v1/jobs/%s/retry" % run["id"], "/v1/jobs/{id}/retry")
    if s == 201:
        call("POST", "/v1/jobs/%s/cancel" % again["id"], "/v1/jobs/{id}/cancel")
        wait_final(again["id"])
    call("DELETE", "/v1/jobs/" + run["id"], "/v1/jobs/{id}")
call("DELETE", "/v1/jobs/j_0000000000000000", "/v1/jobs/{id}")
call("POST", "/v1/jobs/j_0000000000000000/retry", "/v1/jobs/{id}/retry")
call("PATCH", "/v1/jobs/j_0000000000000000", "/v1/jobs/{id}", body={"name": "x"})
call("GET", "/v1/jobs/j_0000000000000000/log", "/v1/jobs/{id}/log")

# Experiments and comparisons.
xbody = {"name": "contract", "base": {"dataset": "heart_scale", "workers": 2,
                                      "max_rounds": 30, "target": 0},
         "variants": [{"algorithm": "gd"}, {"algorithm": "eclk"}]}
s, x = call("POST", "/v1/experiments", "/v1/experiments", body=xbody)
call("POST", "/v1/experiments", "/v1/experiments", body={"base": {}, "variants": []})
call("GET", "/v1/experiments?limit=2", "/v1/experiments")
call("GET", "/v1/experiments?cursor=zz", "/v1/experiments")
if s == 201:
    call("GET", "/v1/experiments/" + x["id"], "/v1/experiments/{id}")
    call("GET", "/v1/experiments/%s/plot.svg" % x["id"], "/v1/experiments/{id}/plot.svg")
    ids = ",".join(j["id"] for j in x["jobs"])
    for j in x["jobs"]:
        wait_final(j["id"])
    call("GET", "/v1/compare?jobs=" + ids, "/v1/compare")
    call("GET", "/v1/compare/plot.svg?jobs=" + ids, "/v1/compare/plot.svg")
# A tuned one: its "tuned" member, once its runs are done, and a hostile grid.
tbody = {"base": {"dataset": "heart_scale", "workers": 2, "max_rounds": 200,
                  "target": 1e-3},
         "variants": [{"algorithm": "gd"}], "tune": {"step_multiplier": [0.5, 2]}}
s, tx = call("POST", "/v1/experiments", "/v1/experiments", body=tbody)
call("POST", "/v1/experiments", "/v1/experiments",
     body=dict(tbody, tune={"step_multiplier": [2, 2]}))
if s == 201:
    for j in tx["jobs"]:
        wait_final(j["id"])
    call("GET", "/v1/experiments/" + tx["id"], "/v1/experiments/{id}")
call("GET", "/v1/experiments/x_0000000000000000", "/v1/experiments/{id}")
call("GET", "/v1/experiments/x_0000000000000000/plot.svg", "/v1/experiments/{id}/plot.svg")
call("GET", "/v1/compare", "/v1/compare")
call("GET", "/v1/compare?jobs=j_0000000000000000", "/v1/compare")
call("GET", "/v1/compare/plot.svg?jobs=", "/v1/compare/plot.svg")

# Datasets.
call("GET", "/v1/datasets", "/v1/datasets")
call("GET", "/v1/datasets/heart_scale", "/v1/datasets/{name}")
call("GET", "/v1/datasets/no-such-file", "/v1/datasets/{name}")
name = "contract-%d" % int(time.time() * 1000)
call("POST", "/v1/datasets?name=" + name, "/v1/datasets", raw=b"+1 1:1\n-1 2:1\n",
     ctype="application/octet-stream")
call("POST", "/v1/datasets?name=" + name, "/v1/datasets", raw=b"+1 1:1\n-1 2:1\n",
     ctype="application/octet-stream")
call("POST", "/v1/datasets?name=.hidden", "/v1/datasets", raw=b"+1 1:1\n",
     ctype="application/octet-stream")
call("POST", "/v1/datasets?name=" + name + "-bad", "/v1/datasets", raw=b"this is not libsvm\n",
     ctype="application/octet-stream")
call("POST", "/v1/datasets?name=" + name + "-s&shared=maybe", "/v1/datasets",
     raw=b"+1 1:1\n", ctype="application/octet-stream")
# Private by default: another token does not see it; its owner shares it.
call("GET", "/v1/datasets/" + name, "/v1/datasets/{name}", tok=other)
call("PATCH", "/v1/datasets/" + name, "/v1/datasets/{name}", body={"shared": True})
call("PATCH", "/v1/datasets/" + name, "/v1/datasets/{name}", body={"shared": "yes"})
call("PATCH", "/v1/datasets/" + name, "/v1/datasets/{name}", body={"shared": False},
     tok=other)
call("PATCH", "/v1/datasets/" + name, "/v1/datasets/{name}", raw=b"{not json")
call("PATCH", "/v1/datasets/no-such-file", "/v1/datasets/{name}", body={"shared": True})
call("DELETE", "/v1/datasets/" + name, "/v1/datasets/{name}", tok=other)
call("DELETE", "/v1/datasets/" + name, "/v1/datasets/{name}")
call("DELETE", "/v1/datasets/" + name, "/v1/datasets/{name}")

# The server's tables, the contract's enums and the dashboard's menus are
# the same lists: the dashboard builds its menus from /v1/vocabulary and
# holds no copy of them.
s, vocab = call("GET", "/v1/vocabulary", "/v1/vocabulary")
call("GET", "/v1/vocabulary", "/v1/vocabulary", auth=False)
call("GET", "/v1/vocabulary?x=1", "/v1/vocabulary")
if s == 200:
    names = lambda rows: [r["name"] for r in rows]
    schemas = doc["components"]["schemas"]
    spec, jobschema = schemas["JobSpec"]["properties"], schemas["Job"]["properties"]
    params = {p["name"]: p for p in doc["paths"]["/v1/jobs"]["get"]["parameters"]}
    choosable = [c["name"] for c in vocab["compressors"] if c["contraction"]]
    same = [
        ("algorithms", names(vocab["algorithms"]), spec["algorithm"]["enum"]),
        ("compressors", choosable, spec["compressor"]["oneOf"][0]["enum"]),
        ("compressors", choosable, spec["compressor"]["oneOf"][1]["properties"]["type"]["enum"]),
        ("losses", vocab["losses"], spec["loss"]["enum"]),
        ("backends", names(vocab["backends"]), spec["backend"]["enum"]),
        ("stop_reasons", names(vocab["stop_reasons"]),
         [v for v in jobschema["stop_reason"]["enum"] if v is not None]),
        ("stop_reasons", names(vocab["stop_reasons"]), params["stop_reason"]["schema"]["enum"]),
        ("outcomes", names(vocab["outcomes"]),
         [v for v in jobschema["outcome"]["enum"] if v is not None]),
        ("states", names(vocab["states"]), jobschema["state"]["enum"]),
        ("states", names(vocab["states"]), params["state"]["schema"]["enum"]),
    ]
    for what, served, documented in same:
        if list(served) != list(documented):
            failures.append("the contract's %s enum %s is not the server's %s"
                            % (what, documented, served))
    for c in vocab["compressors"]:
        if c["shift"] not in names(vocab["compressors"]):
            failures.append("compressor %s: shift %s is no compressor" % (c["name"], c["shift"]))
    import os
    import re
    app_js = open(os.path.join(os.path.dirname(spec_path), "..", "web", "app.js")).read()
    # A hard-coded menu is an array of string literals naming two or more of
    # one list (stop reasons that are also states aside: FINAL lists states).
    states = set(names(vocab["states"]))
    lists = {"algorithms": set(names(vocab["algorithms"])),
             "compressors": set(names(vocab["compressors"])),
             "stop reasons": set(names(vocab["stop_reasons"])) - states}
    for literal in re.findall(r"""\[\s*(?:['"][^'"\n]*['"]\s*,\s*)+['"][^'"\n]*['"]\s*,?\s*\]""",
                              app_js):
        words = set(re.findall(r"""['"]([^'"\n]*)['"]""", literal))
        for what, known in lists.items():
            if len(words & known) >= 2:
                failures.append("web/app.js holds a list of %s (%s): its menus must come from "
                                "/v1/vocabulary" % (what, literal[:80]))
    if "/v1/vocabulary" not in app_js:
        failures.append("web/app.js does not read /v1/vocabulary")

# /metrics: behind a token, and what promtool accepts.
call("GET", "/metrics", "/metrics", auth=False)
s, text = call("GET", "/metrics", "/metrics")
promtool = shutil.which("promtool")
if promtool is None:
    failures.append("promtool is not installed (Debian package prometheus)")
elif s == 200:
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    if p.returncode != 0:
        failures.append("promtool check metrics: " + (p.stdout + p.stderr).decode()[:800])

# Every operation of the contract was exercised.
for pattern, item in doc["paths"].items():
    for method in item:
        if method in ("get", "post", "put", "patch", "delete") and \
                (method.upper(), pattern) not in seen:
            failures.append("%s %s is in the contract but was never called"
                            % (method.upper(), pattern))

for f in failures:
    print("contract:", f)
print("contract: %d operations called, %d failures" % (len(seen), len(failures)))
sys.exit(1 if failures else 0)
