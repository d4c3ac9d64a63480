#!/bin/sh
# Two "hosts" on one machine for Open MPI: network namespaces TAGa and TAGb
# joined by a veth (TAGva, TAGvb) with addresses NET.1/24 and NET.2/24.
# tests/test_mpi_hosts.c and bench/bench_link.sh use it (as root).
#
#   mpi-netns.sh up TAG NET DIR   create the pair; write into DIR:
#       hosts        the hostfile: NET.1 and NET.2
#       agent        mpirun's rsh agent: `agent HOST CMD...` runs CMD in the
#                    namespace of HOST, with a hostname of its own (TAGb),
#                    as ssh would on a real host
#       mpirun-args  what ECOPT_MPIRUN_ARGS needs for the pair: the agent,
#                    TCP over the veth only, ranks alternating over the hosts
#   mpi-netns.sh down TAG         delete the pair (quietly, if there is any)
#
# mpirun itself runs in TAGa (`ip netns exec TAGa ecopt run ...`), so NET.1
# is its local host and NET.2 is reached through the agent. TAG is at most
# 12 characters (interface names have 15).
set -eu

usage() {
    echo "usage: $0 up TAG NET DIR | down TAG" >&2
    exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
tag=$2
[ ${#tag} -le 12 ] || { echo "$0: TAG '$tag' is longer than 12 characters" >&2; exit 2; }

case "$cmd" in
down)
    ip netns del "${tag}a" 2>/dev/null || true
    ip netns del "${tag}b" 2>/dev/null || true
    exit 0
    ;;
up)
    [ $# -eq 4 ] || usage
    net=$3
    dir=$4
    ;;
*)
    usage
    ;;
esac

ip netns add "${tag}a"
ip netns add "${tag}b"
ip link add "${tag}va" type veth peer name "${tag}vb"
ip link set "${tag}va" netns "${tag}a"
ip link set "${tag}vb" netns "${tag}b"
ip -n "${tag}a" addr add "$net.1/24" dev "${tag}va"
ip -n "${tag}b" addr add "$net.2/24" dev "${tag}vb"
for s in a b; do
    ip -n "${tag}$s" link set lo up
    ip -n "${tag}$s" link set "${tag}v$s" up
done

printf '%s.1 slots=8\n%s.2 slots=8\n' "$net" "$net" > "$dir/hosts"
cat > "$dir/agent" <<EOF
#!/bin/sh
# mpirun's rsh agent for the namespace pair $tag: HOST CMD...
host=\$1
shift
case "\$host" in
$net.1) ns=${tag}a ;;
$net.2) ns=${tag}b ;;
*) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
# A host of its own name: Open MPI tells nodes apart by hostname.
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns && \$*"
EOF
chmod 755 "$dir/agent"
printf '%s\n' "--oversubscribe --allow-run-as-root --map-by node --mca plm_rsh_agent $dir/agent --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include $net.0/24 --mca oob_tcp_if_include $net.0/24" > "$dir/mpirun-args"
