#!/bin/sh
# docs/campaign.md (trace): does netem slot pace a rate? Run inside the campaign VM, e.g.
#   .venv/bin/python -c "from mprig import vm; vm.run_in_vm([\"sh\", \"experiments/investigations/netem-slot.sh\"], [])"
# (Debian 6.1: 78 094 packets in 4 s through slots worth about 8 Mbit/s, i.e. no pacing).
export PATH=/usr/sbin:/sbin:$PATH
ip netns add sa; ip netns add sb
ip link add va netns sa type veth peer name vb netns sb
ip -n sa addr add 10.9.0.1/24 dev va; ip -n sb addr add 10.9.0.2/24 dev vb
for n in sa sb; do ip -n $n link set lo up; done
ip -n sa link set va up; ip -n sb link set vb up
ip netns exec sa ethtool -K va tso off gso off gro off; ip netns exec sb ethtool -K vb tso off gso off gro off
ip netns exec sb ethtool -k vb | grep -E "^(tcp-segmentation-offload|generic-segmentation-offload):"
ip netns exec sb iperf3 -s -D -p 5201
sleep 1
ip netns exec sb tc qdisc add dev vb root netem slot 1ms 2ms packets 1 bytes 1514 limit 1000
ip netns exec sa iperf3 -c 10.9.0.2 -p 5201 -R -t 4 -i 1 -f m | grep -E "sec .*Mbits/sec" | head -4
ip netns exec sb tc -s qdisc show dev vb
ip netns del sa; ip netns del sb
