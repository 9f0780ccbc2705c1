#!/bin/sh
# Regenerates one_tcp_connection.txt and .json: a fresh network namespace after one TCP
# connection over loopback (1 MB sent), read twice back to back, as text (`nstat -asz`)
# and as `nstat -asz --json`. Nothing else runs in the namespace, so both read the same
# counters. Needs root.
set -eu
here=$(dirname "$0")
unshare -n sh -c '
    ip link set lo up
    python3 -c "
import socket
srv = socket.create_server((\"127.0.0.1\", 5201))
cli = socket.create_connection((\"127.0.0.1\", 5201))
conn, _ = srv.accept()
cli.sendall(bytes(1000000))
cli.close()
got = 0
while chunk := conn.recv(65536):
    got += len(chunk)
conn.close()
"
    nstat -asz >"$1/one_tcp_connection.txt"
    nstat -asz --json >"$1/one_tcp_connection.json"
' sh "$here"
