"""The stack a run sets on the rig's hosts: sysctls, congestion controls (BPF ones too),
the path manager (kernel or mptcpd), RBPM's controller, and the read-back that proves what
was set. Uses the rig to reach hosts; the runner uses it (docs/architecture.md)."""
