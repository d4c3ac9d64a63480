#!/bin/sh
# make docker-check: the image built and run as a user would. Installs
# docker.io, docker-compose and debootstrap when missing, starts dockerd if
# none runs, makes the local debian:bookworm base with debootstrap when
# none is present (docker/base-image.sh; no image registry is needed),
# builds docker/Dockerfile with the classic `docker build`, runs the test
# suite in a container of the build stage, runs the image with the
# datasets as a volume, checks /livez, submits the README's job with a
# token and reads its whole CSV. Then it removes what it made: its containers,
# their volumes, the images it built, and dockerd if it started one. The
# base image stays, for the next run.
#   sh docker/check.sh        (as root; ECOPT_DATA_DIR: the datasets)
set -eu
cd "$(dirname "$0")/.."
data=$(cd "${ECOPT_DATA_DIR:-../shared/datasets}" && pwd)
base=debian:bookworm
tag=ecopt:check-$$
build_tag=ecopt-build:check-$$
compose_tag=ecopt:compose-check-$$
name=ecopt-check-$$
project=ecoptcheck$$
cid=
work=$(mktemp -d /tmp/ecopt-docker-check-XXXXXX)
dockerd_pid=
started=
docker=${DOCKER:-docker}

say() { echo "docker-check: $*"; }
fail() {
    echo "docker-check: FAILED: $*" >&2
    exit 1
}

cleanup() {
    status=$?
    trap - EXIT INT TERM
    if [ -n "$started" ]; then
        if [ "$status" -ne 0 ] && [ -n "$cid" ]; then
            $docker logs "$cid" 2>&1 | tail -20 >&2 || true
        fi
        ECOPT_IMAGE=$tag docker-compose -p "$project" -f docker/compose.yaml \
            down -v >/dev/null 2>&1 || true
        $docker rm -f -v "$name-tests" >/dev/null 2>&1 || true
        $docker rmi "$tag" "$build_tag" "$compose_tag" >/dev/null 2>&1 || true
        # a child first takes its untagged parents with it; twice for the rest
        for pass in 1 2; do
            $docker images -aq --no-trunc | sort -u | comm -13 "$work/images.before" - |
                xargs -r $docker rmi >/dev/null 2>&1 || true
        done
    fi
    if [ -n "$dockerd_pid" ]; then
        kill "$dockerd_pid" 2>/dev/null || true
        wait "$dockerd_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Seconds since the epoch, for the figures.
now() { date +%s; }

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
    deadline=$(($(now) + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$(now)" -lt "$deadline" ] || return 1
        sleep 1
    done
}

sh docker/install-deps.sh docker.io docker-compose debootstrap
# The client that comes with the daemon, wherever another one is on PATH.
docker=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)} ||
    fail "no docker client"
export DOCKER="$docker"

if ! $docker info >/dev/null 2>&1; then
    say "starting dockerd (log in $work/dockerd.log while it runs)"
    dockerd >"$work/dockerd.log" 2>&1 &
    dockerd_pid=$!
    wait_for 60 $docker info || {
        tail -20 "$work/dockerd.log" >&2
        fail "dockerd did not answer within 60 s"
    }
fi

t=$(now)
sh docker/base-image.sh "$base"
base_s=$(($(now) - t))

# Each image this run makes is removed at the end, the build stages'
# intermediate images too: those not present before it began.
$docker images -aq --no-trunc | sort -u >"$work/images.before"
started=1
# Debian's docker-compose (v1), with the check's own tokens, datasets, any
# free port and its own project (containers, network, volume).
export ECOPT_DATASETS="$data" ECOPT_TOKENS="$work/tokens" ECOPT_PORT=
compose() { docker-compose -p "$project" -f docker/compose.yaml "$@"; }
: >"$work/tokens"
compose config -q || fail "docker-compose rejects docker/compose.yaml"

say "docker build (log in $work/build.log while it runs)"
t=$(now)
if ! { $docker build -f docker/Dockerfile --target build -t "$build_tag" . &&
       $docker build -f docker/Dockerfile -t "$tag" .; } >"$work/build.log" 2>&1; then
    tail -30 "$work/build.log" >&2
    fail "docker build"
fi
build_s=$(($(now) - t))
mb() { echo "$(($($docker image inspect -f '{{.Size}}' "$1") / 1000000)) MB"; }
size=$(mb "$tag")
say "built in $build_s s: $tag $size (its build stage $(mb "$build_tag"), base $(mb "$base"))"

# The test suite in a container of the build stage: root, the default
# capabilities (no CAP_SYS_PTRACE), the datasets a read-only volume.
say "make check in the build stage"
t=$(now)
if ! $docker run --name "$name-tests" -v "$data:/datasets:ro" "$build_tag" \
        make check >"$work/tests.log" 2>&1; then
    grep -E '^(FAILED|[^ ]*:[0-9]+:[FE]:)' "$work/tests.log" >&2 || true
    tail -5 "$work/tests.log" >&2
    fail "make check in the build stage"
fi
tests_s=$(($(now) - t))
$docker rm -v "$name-tests" >/dev/null
suites=$(grep '^suites:' "$work/tests.log")
say "$suites, in $tests_s s"
grep '^test_' "$work/tests.log" | sed 's/^/docker-check:   /' || true

# docker-compose builds it too (its own cache: docker-py's context differs
# from the docker client's in the tar headers).
say "docker-compose build (log in $work/compose.log while it runs)"
t=$(now)
export ECOPT_IMAGE="$compose_tag"
compose build ecopt >"$work/compose.log" 2>&1 || {
    tail -30 "$work/compose.log" >&2
    fail "docker-compose build"
}
compose_s=$(($(now) - t))
say "docker-compose built $compose_tag in $compose_s s"

# The service as the compose file runs it, on the image docker build made:
# the token a secret, the datasets a volume, the database the image's.
export ECOPT_IMAGE="$tag"
uid=$($docker run --rm --entrypoint id "$tag" -u)
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf 'check:%s\n' "$secret" >"$work/tokens"
chown "$uid" "$work/tokens"
chmod 600 "$work/tokens"
compose up -d --no-build ecopt >"$work/up.log" 2>&1 || {
    cat "$work/up.log" >&2
    fail "docker-compose up"
}
cid=$(compose ps -q ecopt)
addr=$(compose port ecopt 8080)
url=http://$addr
wait_for 60 curl -fsS "$url/livez" || fail "no /livez within 60 s at $url"
say "$url/livez: $(curl -fsS "$url/livez")"

code=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/jobs")
[ "$code" = 401 ] || fail "GET /v1/jobs without a token: $code, not 401"
auth="Authorization: Bearer $secret"
job='{"dataset": "mushrooms", "algorithm": "eclk", "compressor": {"type": "topk", "k": 5},
      "lambda2_rel": 1e-3, "workers": 20, "max_rounds": 5000}'
curl -fsS -X POST "$url/v1/jobs" -H "$auth" -H 'Content-Type: application/json' \
    -d "$job" >"$work/submit.json" || fail "POST /v1/jobs"
id=$(sed -n 's/^{"id":"\([^"]*\)".*/\1/p' "$work/submit.json")
[ -n "$id" ] || fail "no job id in $(cat "$work/submit.json")"

job_state() {
    curl -fsS -H "$auth" "$url/v1/jobs/$id" >"$work/job.json" &&
        grep -o '"state":"[a-z]*"' "$work/job.json" | head -1 | cut -d'"' -f4
}
ended() {
    case $(job_state) in succeeded | failed | cancelled | interrupted) ;; *) return 1 ;; esac
}
wait_for 600 ended || fail "job $id did not end within 600 s: $(cat "$work/job.json")"
state=$(job_state)
[ "$state" = succeeded ] || fail "job $id $state: $(cat "$work/job.json")"

curl -fsS -H "$auth" -H 'Accept: text/csv' "$url/v1/jobs/$id/metrics" \
    >"$work/metrics.csv" || fail "GET /v1/jobs/$id/metrics as CSV"
head -1 "$work/metrics.csv" | grep -q '^round,' ||
    fail "the CSV has no header: $(head -1 "$work/metrics.csv")"
rows=$(($(wc -l <"$work/metrics.csv") - 1))
last=$(tail -1 "$work/metrics.csv")
rounds=${last%%,*}
[ "$rows" -gt 1 ] || fail "the CSV of job $id has $rows rows"
say "job $id: $state after $rounds rounds; CSV: $rows rows, the last $last"

# SIGTERM: the service closes its database and exits 0.
compose stop -t 30 ecopt >/dev/null 2>&1
exit_code=$($docker inspect -f '{{.State.ExitCode}}' "$cid")
[ "$exit_code" = 0 ] || fail "ecopt serve exited $exit_code on SIGTERM"

say "passed: image $size, built in $build_s s (base: $base_s s; docker-compose" \
    "build $compose_s s), $suites in $tests_s s, job $id $rounds rounds," \
    "$rows CSV rows;" \
    "removing the containers and images it made (the base $base stays)"
