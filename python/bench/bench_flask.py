"""flask-limiter under gunicorn (4 workers), driven by wrk: requests/s and
Redis commands per request (INFO commandstats, reset before each run), for
scripts/bench_python.sh. Prints one line "NAME rps cmds_per_request".

usage: bench_flask.py NAME STORAGE STRATEGY REDIS_PORT SECONDS
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
APP_DIR = os.path.join(HERE, "..", "tests")  # tests/flask_app.py


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args],
                          capture_output=True, text=True, check=True).stdout


def commands(port):
    """Commands Redis ran since CONFIG RESETSTAT, but INFO and CONFIG."""
    text = redis(port, "INFO", "commandstats")
    return sum(int(calls) for name, calls in
               re.findall(r"cmdstat_(\w+):calls=(\d+)", text)
               if name not in ("info", "config"))


def main(name, storage, strategy, redis_port, seconds):
    port = free_port()
    env = dict(os.environ, DRL_APP_STORAGE=storage, DRL_APP_STRATEGY=strategy,
               DRL_APP_LIMIT="1000000/hour", DRL_APP_PREFIX=name,
               PYTHONPATH=os.pathsep.join([APP_DIR,
                                           os.environ.get("PYTHONPATH", "")]))
    gunicorn = subprocess.Popen(
        [sys.executable, "/usr/bin/gunicorn", "-w", "4", "-b",
         "127.0.0.1:%d" % port, "--log-level", "warning", "flask_app:app"],
        env=env)
    try:
        url = "http://127.0.0.1:%d/" % port
        deadline = time.monotonic() + 60
        while subprocess.run(["curl", "-sf", "-o", "/dev/null", url]).returncode:
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.2)
        subprocess.run(["wrk", "-t1", "-c8", "-d1s", url],
                       capture_output=True)  # warm every worker
        redis(redis_port, "CONFIG", "RESETSTAT")
        out = subprocess.run(["wrk", "-t2", "-c16", "-d%ds" % seconds, url],
                             capture_output=True, text=True).stdout
        n = int(re.search(r"(\d+) requests in", out).group(1))
        bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
        assert bad is None, "requests were denied or failed: " + out
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        print("%s %.0f %.2f" % (name, rps, commands(redis_port) / n))
    finally:
        gunicorn.send_signal(signal.SIGTERM)
        gunicorn.wait(30)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
         int(sys.argv[5]))
