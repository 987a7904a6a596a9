# shellcheck shell=bash
# free_ports N: prints N distinct free loopback ports, one a line. All N are bound at once
# before any is released, so that no two of them are the same (the kernel may hand out a
# port again as soon as a lone probe closes it, which once gave a node the same port for
# clients and for the quorum).
free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
sockets = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in sockets))
PY
}
