# Sourced by scripts that start their own servers on loopback
# (scripts/bench_grid.sh, tests/test_bench.sh): free_port prints a port
# that was free a moment ago; wait_port PORT waits (5 s at most) until
# something accepts connections on 127.0.0.1:PORT.

free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

wait_port() {
	python3 -c 'import socket, sys, time
end = time.time() + 5
while time.time() < end:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)' "$1"
}
