#!/usr/bin/python3
"""A real gRPC client of drld's Envoy rate limit service, for
tests/test_envoy.sh (Debian's python3-grpcio;
stubs generated at start from drld/envoy/proto/ by python3-grpc-tools, so the
client speaks exactly the .proto drld was built from).

Run it with /usr/bin/python3 (Debian's, which sees python3-grpcio).
PORT is 127.0.0.1's port, or for call and health "unix:/PATH" (a unix
domain socket). With ENVOY_CLIENT_TLS=CA_FILE[,CERT_FILE,KEY_FILE] in the environment it
connects over TLS, trusting CA_FILE, expecting the server's certificate to
name drld.test, and presenting CERT_FILE/KEY_FILE when given.
The health commands use drld/envoy/proto/grpc_health.proto (gRPC's health
checking protocol), compiled the same way.

  envoy_client.py PROTO_DIR suite PORT DOMAIN HTTP_PORT
      The protocol suite against a drld serving tests/test_envoy.sh's
      config for DOMAIN (the domain makes every store key of one run its
      own): one "ok - ..." / "not ok - ..." line per assertion.
  envoy_client.py PROTO_DIR readme PORT HTTP_PORT
      envoyproxy/ratelimit's README examples (tests/envoy_readme/) give
      the decisions its README describes.
  envoy_client.py PROTO_DIR share DOMAIN KEY=VALUE PER_THREAD PORT [PORT...]
      8 threads split over the ports send PER_THREAD requests each for one
      descriptor; prints "ok=N over=N errors=N".
  envoy_client.py PROTO_DIR call PORT DOMAIN KEY=VALUE[,KEY=VALUE...]
      One request of one descriptor; prints the overall code, the
      descriptor's code and limit_remaining and the headers to add
      ("OVER_LIMIT OVER_LIMIT 0 RateLimit-Limit=3 ..."), or the gRPC
      status code's name.
  envoy_client.py PROTO_DIR flood PORT DOMAIN KEY=VALUE N DEADLINE_S
      N calls of one descriptor at once, each with that deadline; prints
      "sent" once they are on their way, then how many ended how
      ("CANCELLED=2 UNAVAILABLE=22").
  envoy_client.py PROTO_DIR reconnect PORT DOMAIN KEY=VALUE DEADLINE_S
      Calls of one descriptor on one channel, one every 50 ms, until the
      channel has left READY and come back to it with a call answered
      after that (the server closed the connection: GOAWAY), or DEADLINE_S
      passed; prints "reconnected" or "never", then "calls=N errors=N".
  envoy_client.py PROTO_DIR conns PORT DOMAIN KEY=VALUE N
      N channels, each on a connection of its own, all open at once, one
      call of one descriptor on each; prints each call's overall code (or
      status code's name) in channel order ("OK OK OVER_LIMIT").
  envoy_client.py PROTO_DIR fdflood PORT DOMAIN KEY=VALUE N
      N plain TCP connections that send nothing, held open while one call
      (3 s deadline) tries a connection of its own; then they close and
      one more call (30 s) tries; prints the two calls' overall codes or
      status codes' names ("DEADLINE_EXCEEDED OK").
  envoy_client.py PROTO_DIR silent PORT HTTP_PORT DOMAIN KEY=VALUE N
      N plain TCP connections that never send the HTTP/2 preface, held
      open while one call (30 s deadline) and one GET /healthz try; then
      waits (60 s at most) for drld to close them; prints the call's
      code, the health check's HTTP status and "closed=N".
  envoy_client.py PROTO_DIR swapdir DIR NDOMAINS
      Make a Kubernetes ConfigMap volume in DIR (an empty directory):
      NDOMAINS files d00.yaml.. linked through "..data" to "..v1" (limit
      1 in every file; "..v2" holds the same with limit 2).
  envoy_client.py PROTO_DIR swap PID PORT HTTP_PORT DIR NDOMAINS RELOADS
      With drld (PID) serving swapdir's DIR: "..data" is swapped between
      "..v1" and "..v2" as fast as a thread can while the main thread
      sends PID a SIGHUP
      and waits (60 s at most) for drld to count the reload, RELOADS
      times; after each, every domain's limit is asked (hits 0). Prints
      "reloads=N mixed=N errors=N": mixed, the reloads whose domains
      disagree (old and new files in one config).
  envoy_client.py PROTO_DIR handshaken PORT N
      N TCP connections that send the HTTP/2 preface and an empty
      SETTINGS frame, then nothing (read, never answered); waits (60 s
      at most) for drld to close them; prints "closed=N".
  envoy_client.py PROTO_DIR together PORT DOMAIN MODE
      Calls of two and three descriptors, one over its limit, on
      tests/test_envoy.sh's "together" config for DOMAIN: MODE "default"
      expects the descriptors under their limits counted, "stop"
      (--stop-cache-key-increment-when-overlimit) none counted; exact
      remaining counts, hits_addend 2 and 3. One "ok - ..." line per
      assertion.
  envoy_client.py PROTO_DIR hold PORT DOMAIN KEY=VALUE N SECONDS
      Clients that hold their connections, as Envoy does: N channels,
      each on a connection of its own, make one call; one of them watches
      health; one more connection completes the HTTP/2 handshake and
      never answers (no PING ack). Prints "held" once all are set, holds
      them SECONDS at most (until killed), printing "watch NOT_SERVING"
      when the watch sees it, and "watch CODE" when it ends.
  envoy_client.py PROTO_DIR busy PORT DOMAIN KEY=VALUE SECONDS
      4 threads, each on a connection of its own, call in a loop, until
      a call fails (the server went away) or SECONDS pass; prints "busy"
      once every thread had an answer, then, when all stopped, how the
      calls ended ("OK=812 UNAVAILABLE=4").
  envoy_client.py PROTO_DIR health PORT SERVICE
      grpc.health.v1.Health/Check of SERVICE ("" the server): prints the
      status (SERVING, NOT_SERVING) or the gRPC status code's name.
  envoy_client.py PROTO_DIR watch PORT SERVICE
      grpc.health.v1.Health/Watch of SERVICE: prints each status as it
      comes, then "END" and the code the stream ended with.
"""
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request

import grpc
from grpc_tools import protoc


def compile_protos(proto_dir, out):
    """Generate the Python stubs of proto_dir's .proto files into out."""
    protos = [f for f in os.listdir(proto_dir) if f.endswith(".proto")]
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    args = ["protoc", "-I" + proto_dir, "-I" + include,
            "--python_out=" + out, "--grpc_python_out=" + out] + protos
    cwd = os.getcwd()
    os.chdir(proto_dir)
    try:
        if protoc.main(args) != 0:
            sys.exit("envoy_client: protoc failed on " + proto_dir)
    finally:
        os.chdir(cwd)


def load_stubs(proto_dir):
    """Generate the Python stubs of proto_dir's .proto files (Envoy's
    and gRPC's health checking) into a temp directory and import them."""
    global health, health_grpc
    out = tempfile.mkdtemp(prefix="envoy_stubs_")
    compile_protos(proto_dir, out)
    sys.path.insert(0, out)
    import envoy_rls_pb2
    import envoy_rls_pb2_grpc
    import envoy_ratelimit_pb2
    import grpc_health_pb2 as health
    import grpc_health_pb2_grpc as health_grpc
    shutil.rmtree(out, ignore_errors=True)  # imported: no longer needed
    return envoy_rls_pb2, envoy_rls_pb2_grpc, envoy_ratelimit_pb2


rls = rls_grpc = common = None
health = health_grpc = None
failures = 0


def report(ok, what):
    global failures
    print(("ok - " if ok else "not ok - ") + what, flush=True)
    if not ok:
        failures += 1


def descriptor(entries, hits=None, limit=None):
    """entries: "k=v,k2=v2" or a list of (k, v); limit: (rpu, unit)."""
    if isinstance(entries, str):
        entries = [tuple(e.split("=", 1)) for e in entries.split(",")]
    d = common.RateLimitDescriptor(
        entries=[common.RateLimitDescriptor.Entry(key=k, value=v)
                 for k, v in entries])
    if hits is not None:
        d.hits_addend.value = hits
    if limit is not None:
        d.limit.requests_per_unit = limit[0]
        d.limit.unit = limit[1]
    return d


def port_arg(s):
    """A PORT argument: a number (127.0.0.1:PORT) or "unix:/PATH"."""
    return s if s.startswith("unix:") else int(s)


def channel(port, own=False):
    """A channel to 127.0.0.1:port, or to the unix socket "unix:/PATH":
    plaintext, or TLS as ENVOY_CLIENT_TLS says (see the usage). own: on a
    connection of its own (grpc shares one between the channels of a
    process to the same target otherwise)."""
    target = port if isinstance(port, str) else "127.0.0.1:%d" % port
    opts = [("grpc.use_local_subchannel_pool", 1)] if own else []
    tls = os.environ.get("ENVOY_CLIENT_TLS")
    if not tls:
        return grpc.insecure_channel(target, options=opts)
    files = []
    for path in tls.split(","):
        with open(path, "rb") as f:
            files.append(f.read())
    creds = grpc.ssl_channel_credentials(
        root_certificates=files[0],
        private_key=files[2] if len(files) > 2 else None,
        certificate_chain=files[1] if len(files) > 1 else None)
    return grpc.secure_channel(
        target, creds,
        options=[("grpc.ssl_target_name_override", "drld.test")] + opts)


class Client:
    def __init__(self, port, own=False):
        self.channel = channel(port, own)
        self.stub = rls_grpc.RateLimitServiceStub(self.channel)

    def call(self, domain, descriptors, hits=0, timeout=30):
        """(response, None) or (None, grpc.StatusCode)."""
        req = rls.RateLimitRequest(domain=domain, hits_addend=hits,
                                   descriptors=descriptors)
        try:
            return self.stub.ShouldRateLimit(req, timeout=timeout), None
        except grpc.RpcError as e:
            return None, e.code()


OK = 1
OVER = 2
UNIT = {"SECOND": 1, "MINUTE": 2, "HOUR": 3, "DAY": 4, "MONTH": 5,
        "YEAR": 6, "WEEK": 7}


def status_text(r, err):
    if err is not None:
        return err.name
    return "%s [%s]" % (
        rls.RateLimitResponse.Code.Name(r.overall_code),
        "; ".join("%s rpu=%d unit=%s name=%r remaining=%d reset=%ds" % (
            rls.RateLimitResponse.Code.Name(s.code),
            s.current_limit.requests_per_unit,
            rls.RateLimitResponse.RateLimit.Unit.Name(s.current_limit.unit),
            s.current_limit.name, s.limit_remaining,
            s.duration_until_reset.seconds) for s in r.statuses))


def expect(c, what, domain, descs, overall, statuses=None, hits=0):
    """One call; check the overall code and, per status, a tuple
    (code, rpu or None for no limit, unit name, remaining)."""
    r, err = c.call(domain, descs, hits)
    ok = err is None and r.overall_code == overall
    for i, want in enumerate(statuses or []):
        if not ok or i >= len(r.statuses):
            ok = False
            break
        s = r.statuses[i]
        code, rpu = want[0], want[1]
        ok = s.code == code
        if rpu is None:
            ok = ok and not s.HasField("current_limit")
        else:
            ok = ok and s.current_limit.requests_per_unit == rpu and \
                s.current_limit.unit == UNIT[want[2]]
        if len(want) > 3 and want[3] is not None:
            ok = ok and s.limit_remaining == want[3]
    report(ok, "%s (got %s)" % (what, status_text(r, err)))
    return r


def expect_error(c, what, domain, descs, code, hits=0):
    r, err = c.call(domain, descs, hits)
    report(err == code, "%s: %s (got %s)" % (what, code.name,
                                             status_text(r, err)))


def metrics(http_port):
    with urllib.request.urlopen(
            "http://127.0.0.1:%d/metrics" % http_port, timeout=30) as f:
        text = f.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = value
    return out


def expect_metric(http_port, name, value):
    got = metrics(http_port).get(name, "<absent>")
    report(got == str(value), "metric %s = %s (got %s)" % (name, value, got))


def suite(port, dom, http_port):
    """The protocol, on tests/test_envoy.sh's config for domain dom."""
    c = Client(port)
    H = "HOUR"
    for i, left in enumerate([2, 1, 0]):
        expect(c, "user=alice hit %d of 3/hour" % (i + 1), dom,
               [descriptor("user=alice")], OK, [(OK, 3, H, left)])
    r = expect(c, "user=alice 4th: over limit", dom,
               [descriptor("user=alice")], OVER, [(OVER, 3, H, 0)])
    reset = r.statuses[0].duration_until_reset if r else None
    report(reset is not None and 0 < reset.seconds + reset.nanos / 1e9
           <= 3600, "duration_until_reset within the hour")
    expect(c, "user=vip: the exact value beats the bare key (5/hour)", dom,
           [descriptor("user=vip")], OK, [(OK, 5, H, 4)])
    expect(c, "user=blocked: requests_per_unit 0 is always over", dom,
           [descriptor("user=blocked")], OVER, [(OVER, 0, H, 0)])
    expect(c, "user=blocked with hits_addend 0: checked, not over", dom,
           [descriptor("user=blocked", hits=0)], OK, [(OK, 0, H, 0)])
    expect(c, "path=/api/x matches the wildcard /api/* (2/hour)", dom,
           [descriptor("path=/api/x")], OK, [(OK, 2, H, 1)])
    expect(c, "path=/api/y: a wildcard value keeps its own counter", dom,
           [descriptor("path=/api/y")], OK, [(OK, 2, H, 1)])
    expect(c, "path=/other matches nothing: OK, no limit", dom,
           [descriptor("path=/other")], OK, [(OK, None)])
    expect(c, "file=files/a (share_threshold files/*, 2/hour)", dom,
           [descriptor("file=files/a")], OK, [(OK, 2, H, 1)])
    expect(c, "file=files/b shares files/a's counter", dom,
           [descriptor("file=files/b")], OK, [(OK, 2, H, 0)])
    expect(c, "file=files/c: the shared counter is spent", dom,
           [descriptor("file=files/c")], OVER, [(OVER, 2, H, 0)])
    expect(c, "nested org=acme,user=bob (2/hour)", dom,
           [descriptor("org=acme,user=bob")], OK, [(OK, 2, H, 1)])
    expect(c, "nested: org=acme alone has no limit", dom,
           [descriptor("org=acme")], OK, [(OK, None)])
    expect(c, "nested: org=other,user=bob matches nothing", dom,
           [descriptor("org=other,user=bob")], OK, [(OK, None)])
    expect(c, "user=bob alone is another counter than org=acme,user=bob",
           dom, [descriptor("user=bob")], OK, [(OK, 3, H, 2)])
    expect(c, "unlimited: OK with limit_remaining 2^32-1", dom,
           [descriptor("internal=x")], OK, [(OK, None, None, 4294967295)])
    expect(c, "shadow_mode 1/hour: 1st OK", dom,
           [descriptor("soft=s")], OK, [(OK, 1, H, 0)])
    expect(c, "shadow_mode: 2nd is over limit but answered OK", dom,
           [descriptor("soft=s")], OK, [(OK, 1, H, 0)])
    expect(c, "two descriptors, one over: overall OVER_LIMIT", dom,
           [descriptor("user=carol"), descriptor("user=blocked")], OVER,
           [(OK, 3, H, 2), (OVER, 0, H, 0)])
    expect(c, "request hits_addend 2", dom, [descriptor("user=dave")], OK,
           [(OK, 3, H, 1)], hits=2)
    expect(c, "descriptor hits_addend 0 checks without consuming", dom,
           [descriptor("user=dave", hits=0)], OK, [(OK, 3, H, 1)], hits=5)
    expect(c, "descriptor hits_addend 1 beats the request's 5", dom,
           [descriptor("user=dave", hits=1)], OK, [(OK, 3, H, 0)], hits=5)
    expect(c, "request hits_addend 0 counts as 1", dom,
           [descriptor("user=dan")], OK, [(OK, 3, H, 2)], hits=0)
    expect(c, "hits_addend over the limit: over, nothing consumed", dom,
           [descriptor("user=dan")], OVER, [(OVER, 3, H, 0)], hits=3)
    expect(c, "... then 2 more still fit", dom, [descriptor("user=dan")],
           OK, [(OK, 3, H, 0)], hits=2)
    expect(c, "limit override 1/minute: 1st OK", dom,
           [descriptor("user=erin", limit=(1, 2))], OK,
           [(OK, 1, "MINUTE", 0)])
    expect(c, "limit override 1/minute: 2nd over", dom,
           [descriptor("user=erin", limit=(1, 2))], OVER,
           [(OVER, 1, "MINUTE", 0)])
    # issue 42: an override counts on the rule's state, as
    # envoyproxy/ratelimit's keeps the key's count: 10 of 10/hour used,
    # an override of 20/hour admits exactly 10 more, not 20; the same on
    # the rule's algorithm (sliding_window 2/hour, then 4)
    for d, rpu in [("plan=p", 10), ("sliding=o", 2)]:
        expect(c, "%s: %d of %d/hour in one call" % (d, rpu, rpu), dom,
               [descriptor(d, hits=rpu)], OK, [(OK, rpu, H, 0)])
        expect(c, "override %d/hour on the used rule: %d more fit" %
               (2 * rpu, rpu), dom,
               [descriptor(d, hits=rpu, limit=(2 * rpu, 3))], OK,
               [(OK, 2 * rpu, H, 0)])
        expect(c, "... and not 1 more", dom,
               [descriptor(d, limit=(2 * rpu, 3))], OVER,
               [(OVER, 2 * rpu, H, 0)])
    expect(c, "sliding_window 2/hour: 1st", dom, [descriptor("sliding=s")],
           OK, [(OK, 2, H, 1)])
    expect(c, "sliding_window 2/hour: 2nd", dom, [descriptor("sliding=s")],
           OK, [(OK, 2, H, 0)])
    expect(c, "sliding_window 2/hour: 3rd over", dom,
           [descriptor("sliding=s")], OVER, [(OVER, 2, H, 0)])
    expect(c, "token_bucket 2/minute burst 4: 4 at once", dom,
           [descriptor("bucket=b")], OK, [(OK, 2, "MINUTE", 0)], hits=4)
    expect(c, "token_bucket: the 5th is over", dom,
           [descriptor("bucket=b")], OVER, [(OVER, 2, "MINUTE", 0)])
    # block_on_exceed: the store's denial is remembered, the next one is
    # answered by drld (the near cache) with the same status
    for i, left in enumerate([1, 0]):
        expect(c, "block_on_exceed 2/hour: %d of 2" % (i + 1), dom,
               [descriptor("near=n")], OK, [(OK, 2, H, left)])
    for by in ["the store", "the near cache"]:
        expect(c, "block_on_exceed: over, by %s" % by, dom,
               [descriptor("near=n")], OVER, [(OVER, 2, H, 0)])
    expect_metric(http_port, "drld_store_near_denials_total", 1)
    expect(c, "an unknown domain answers OK", "no-such-" + dom,
           [descriptor("user=alice")], OK, [(OK, None)])

    # malformed: an error status, and nothing counted (user=frank is
    # in every bad request beside the bad part, and is fresh after)
    good = descriptor("user=frank")
    expect_error(c, "missing domain", "", [good],
                 grpc.StatusCode.INVALID_ARGUMENT)
    expect_error(c, "empty descriptors", dom, [],
                 grpc.StatusCode.INVALID_ARGUMENT)
    expect_error(c, "a huge entry (1.5 MiB value)", dom,
                 [good, descriptor([("user", "x" * (3 << 19))])],
                 grpc.StatusCode.INVALID_ARGUMENT)
    expect_error(c, "a limit override of unit UNKNOWN", dom,
                 [good, descriptor("user=g", limit=(5, 0))],
                 grpc.StatusCode.INVALID_ARGUMENT)
    expect_error(c, "attack: a request hits_addend above 1e9", dom, [good],
                 grpc.StatusCode.INVALID_ARGUMENT, hits=1000000001)
    expect(c, "after the malformed requests user=frank is untouched", dom,
           [descriptor("user=frank")], OK, [(OK, 3, H, 2)])
    # what envoyproxy/ratelimit answers OK, no limit applying (issue 32)
    expect(c, "a descriptor without entries: OK, no limit (user=frank "
           "counted)", dom, [good, common.RateLimitDescriptor()], OK,
           [(OK, 3, H, 1), (OK, None)])
    expect(c, "an entry with an empty key: OK, no limit", dom,
           [descriptor([("", "v")])], OK, [(OK, None)])
    expect(c, "33 entries (deeper than any config): OK, no limit", dom,
           [descriptor([("user", "x%d" % i) for i in range(33)])], OK,
           [(OK, None)])
    expect(c, "a limit override of unit WEEK (7, as envoyproxy/ratelimit "
           "reads it)", dom, [descriptor("user=wk", limit=(5, 7))], OK,
           [(OK, 5, "WEEK", 4)])
    expect(c, "an override on a descriptor without entries applies", dom,
           [descriptor([], limit=(2, 3))], OK, [(OK, 2, H, 1)])

    labels = "{domain=\"%s\",descriptor=\"%%s\"}" % dom
    # user: alice 4 + bob 1 + carol 1 + dave 2+0+1 + dan 1+3+2 + frank 2
    expect_metric(http_port, "drld_envoy_total_hits_total" +
                  labels % "user", 17)
    expect_metric(http_port, "drld_envoy_over_limit_total" +
                  labels % "user", 4)
    expect_metric(http_port, "drld_envoy_shadow_mode_total" +
                  labels % "soft", 1)
    expect_metric(http_port, "drld_envoy_over_limit_total" +
                  labels % "soft", 1)
    # near limit: the hits allowed above floor(80% of 3) = 2: alice's
    # 3rd, dave's 3rd, the last of dan's 2
    expect_metric(http_port, "drld_envoy_near_limit_total" +
                  labels % "user", 3)


def readme(port, http_port):
    """envoyproxy/ratelimit's README examples, loaded unchanged."""
    c = Client(port)
    expect(c, "example 1: database=users 500/second", "mongo_cps",
           [descriptor("database=users")], OK, [(OK, 500, "SECOND", 499)])
    for i in range(5):
        expect(c, "example 2: marketing to 2061111111, message %d of 5/day"
               % (i + 1), "messaging",
               [descriptor("message_type=marketing,to_number=2061111111"),
                descriptor("to_number=2061111111")], OK,
               [(OK, 5, "DAY", 4 - i), (OK, 100, "DAY", 99 - i)])
    expect(c, "example 2: the 6th marketing message is over, the number's "
           "100/day still counts", "messaging",
           [descriptor("message_type=marketing,to_number=2061111111"),
            descriptor("to_number=2061111111")], OVER,
           [(OVER, 5, "DAY", 0), (OK, 100, "DAY", 94)])
    expect(c, "example 2: another number has its own 5/day", "messaging",
           [descriptor("message_type=marketing,to_number=2062222222")], OK,
           [(OK, 5, "DAY", 4)])
    # the README's statistics: messaging.message_type_marketing.to_number
    m = "{domain=\"messaging\",descriptor=\"%s\"}"
    expect_metric(http_port, "drld_envoy_total_hits_total" +
                  m % "message_type_marketing.to_number", 7)
    expect_metric(http_port, "drld_envoy_over_limit_total" +
                  m % "message_type_marketing.to_number", 1)
    expect_metric(http_port, "drld_envoy_total_hits_total" +
                  m % "to_number", 6)
    expect(c, "example 3: remote_address=50.0.0.1 gets 10/second",
           "edge_proxy_per_ip", [descriptor("remote_address=50.0.0.1")],
           OK, [(OK, 10, "SECOND", 0)], hits=10)
    expect(c, "example 3: 11 at once are over 10/second",
           "edge_proxy_per_ip", [descriptor("remote_address=50.0.0.2")],
           OVER, [(OVER, 10, "SECOND", 0)], hits=11)
    expect(c, "example 3: the black-listed 50.0.0.5 is always over",
           "edge_proxy_per_ip", [descriptor("remote_address=50.0.0.5")],
           OVER, [(OVER, 0, "SECOND", 0)])
    expect(c, "example 4: (key=value, subkey=subvalue) matches the nested "
           "300/second", "example4",
           [descriptor("key=value,subkey=subvalue")], OK,
           [(OK, 300, "SECOND", 299)])
    expect(c, "example 4: (key=value) alone matches no limit", "example4",
           [descriptor("key=value")], OK, [(OK, None)])
    expect(c, "example 5: ldap is unlimited", "internal",
           [descriptor("ldap=x")], OK, [(OK, None, None, 4294967295)])
    expect(c, "example 5: azure 100/minute", "internal",
           [descriptor("azure=x")], OK, [(OK, 100, "MINUTE", 99)])
    expect(c, "example 6: user-a (shadow_mode, 10/second) is never limited",
           "example6", [descriptor("service=auth-service,user=user-a")], OK,
           [(OK, 10, "SECOND", 0)], hits=11)
    expect(c, "example 6: user-b is limited at 20/second", "example6",
           [descriptor("service=auth-service,user=user-b")], OVER,
           [(OVER, 20, "SECOND", 0)], hits=21)
    expect(c, "example 7: (key_1, user) alone: 5/second", "example7",
           [descriptor("key_1=value_1,user=bkthomps")], OK,
           [(OK, 5, "SECOND", 4)])
    expect(c, "example 7: (key_2, user) alone: 10/second", "example7",
           [descriptor("key_2=value_2,user=bkthomps")], OK,
           [(OK, 10, "SECOND", 9)])
    expect(c, "example 7: both: 10/second replaces specific_limit, whose "
           "count is not changed", "example7",
           [descriptor("key_1=value_1,user=bkthomps"),
            descriptor("key_2=value_2,user=bkthomps")], OK,
           [(OK, None), (OK, 10, "SECOND", None)])
    expect(c, "example 8: key1=value1 20/minute", "example8",
           [descriptor("key1=value1")], OK, [(OK, 20, "MINUTE", 19)])
    expect(c, "example 8: key1=unspecified_value 10/minute", "example8",
           [descriptor("key1=unspecified_value")], OK,
           [(OK, 10, "MINUTE", 9)])
    expect_metric(http_port, "drld_envoy_total_hits_total{domain="
                  "\"example8\",descriptor=\"key1_unspecified_value\"}", 1)
    expect_metric(http_port, "drld_envoy_total_hits_total{domain="
                  "\"example8\",descriptor=\"key1_value1\"}", 1)
    expect_metric(http_port, "drld_envoy_shadow_mode_total{domain="
                  "\"example6\",descriptor=\"service.user_user-a\"}", 11)
    # attack (issue 33, 3): detailed_metric names a counter by the
    # request's values, so 20 values of 64 KiB made /metrics 6.5 MB; a
    # name is now cut at 256 bytes, a hash of the whole one appended
    for i in range(20):
        c.call("example8", [descriptor([("key1", "%02d" % i * 32768)])])
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port,
                                timeout=30) as f:
        text = f.read().decode()
    long_names = [ln for ln in text.splitlines()
                  if ln.startswith("drld_envoy_total_hits_total{domain="
                                   "\"example8\",descriptor=\"key1_0000")]
    report(len(text) < 300000 and len(long_names) == 1 and
           all(len(ln) < 400 and "~" in ln for ln in long_names),
           "attack: 20 descriptor values of 64 KiB under detailed_metric: "
           "/metrics stays small (got %d bytes, %d names of key1_00.., "
           "%s)" % (len(text), len(long_names),
                    long_names[0][:60] + "..." + long_names[0][-40:]
                    if long_names else "none"))
    expect(c, "example 9: key1=value1 matches value* (20/minute)",
           "example9", [descriptor("key1=value1")], OK,
           [(OK, 20, "MINUTE", 19)])
    expect(c, "example 9: key1=valueXYZ has its own counter", "example9",
           [descriptor("key1=valueXYZ")], OK, [(OK, 20, "MINUTE", 19)])
    expect(c, "example 9: key1=other matches nothing", "example9",
           [descriptor("key1=other")], OK, [(OK, None)])
    expect(c, "example 10: route=api, http_method=GET, subject_id=123: "
           "60/minute", "example10",
           [descriptor("route=api,http_method=GET,subject_id=123")], OK,
           [(OK, 60, "MINUTE", 59)])
    expect_metric(http_port, "drld_envoy_total_hits_total{domain="
                  "\"example10\",descriptor="
                  "\"route_api.http_method_GET.subject_id\"}", 1)
    expect(c, "example 11: 5 for files/a.pdf", "example11",
           [descriptor("files=files/a.pdf")], OK, [(OK, 10, "HOUR", 5)],
           hits=5)
    expect(c, "example 11: 5 for files/b.csv share the threshold",
           "example11", [descriptor("files=files/b.csv")], OK,
           [(OK, 10, "HOUR", 0)], hits=5)
    expect(c, "example 11: files/c.txt is over the shared 10/hour",
           "example11", [descriptor("files=files/c.txt")], OVER,
           [(OVER, 10, "HOUR", 0)])
    expect(c, "example 11: files_no_share/a.pdf spends its own 10",
           "example11", [descriptor("files_no_share=files_no_share/a.pdf")],
           OK, [(OK, 10, "HOUR", 0)], hits=10)
    expect(c, "example 11: files_no_share/b.csv still has 10", "example11",
           [descriptor("files_no_share=files_no_share/b.csv")], OK,
           [(OK, 10, "HOUR", 9)])


def share(domain, entry, per_thread, ports):
    counts = {"ok": 0, "over": 0, "errors": 0}
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker(port):
        c = Client(port)
        mine = {"ok": 0, "over": 0, "errors": 0}
        start.wait()
        for _ in range(per_thread):
            r, err = c.call(domain, [descriptor(entry)])
            if err is not None:
                mine["errors"] += 1
            elif r.overall_code == OK:
                mine["ok"] += 1
            else:
                mine["over"] += 1
        with lock:
            for k in counts:
                counts[k] += mine[k]

    threads = [threading.Thread(target=worker, args=(ports[i % len(ports)],))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("ok=%d over=%d errors=%d" % (counts["ok"], counts["over"],
                                      counts["errors"]))


def call(port, domain, entries):
    """One request; prints the overall code, the first status's code and
    remaining, and the headers to add (KEY=VALUE)."""
    r, err = Client(port).call(domain, [descriptor(entries)])
    if err is not None:
        print(err.name)
        return
    names = rls.RateLimitResponse.Code.Name
    print(" ".join([names(r.overall_code), names(r.statuses[0].code),
                    str(r.statuses[0].limit_remaining)] +
                   ["%s=%s" % (h.key, h.value)
                    for h in r.response_headers_to_add]))


def together(port, dom, mode):
    """Several descriptors in one call, one over its limit (a: 10/day,
    b: 4/day, c: 100/day): counted alone ("default") or all or nothing
    ("stop")."""
    stop = mode == "stop"
    # the windows are days: stay clear of a UTC midnight (2 minutes)
    left = 86400 - time.time() % 86400
    if left < 120:
        time.sleep(left + 1)
    c = Client(port)
    D = "DAY"
    d = descriptor
    expect(c, "two descriptors of 3 hits, both under", dom,
           [d("a=v", 3), d("b=v", 3)], OK,
           [(OK, 10, D, 7), (OK, 4, D, 1)])
    expect(c, "two descriptors of 3 hits, b over: a %s" %
           ("not counted" if stop else "counted"), dom,
           [d("a=v", 3), d("b=v", 3)], OVER,
           [(OK, 10, D, 7 if stop else 4), (OVER, 4, D, 0)])
    expect(c, "then, with 0 hits: a at %d, b at 1" % (7 if stop else 4), dom,
           [d("a=v", 0), d("b=v", 0)], OK,
           [(OK, 10, D, 7 if stop else 4), (OK, 4, D, 1)])
    expect(c, "three descriptors, request hits_addend 2, all under", dom,
           [d("a=w"), d("b=w"), d("c=w")], OK,
           [(OK, 10, D, 8), (OK, 4, D, 2), (OK, 100, D, 98)], hits=2)
    expect(c, "three descriptors, the middle one (3 hits) over: a and c %s"
           % ("not counted" if stop else "counted"), dom,
           [d("a=w"), d("b=w", 3), d("c=w")], OVER,
           [(OK, 10, D, 8 if stop else 6), (OVER, 4, D, 0),
            (OK, 100, D, 98 if stop else 96)], hits=2)
    expect(c, "then, with 0 hits: exact counts", dom,
           [d("a=w", 0), d("b=w", 0), d("c=w", 0)], OK,
           [(OK, 10, D, 8 if stop else 6), (OK, 4, D, 2),
            (OK, 100, D, 98 if stop else 96)])
    expect(c, "three descriptors of 2 hits: all under again, b full", dom,
           [d("a=w"), d("b=w"), d("c=w")], OK,
           [(OK, 10, D, 6 if stop else 4), (OK, 4, D, 0),
            (OK, 100, D, 96 if stop else 94)], hits=2)
    expect(c, "one descriptor alone over: decided as always", dom,
           [d("b=w")], OVER, [(OVER, 4, D, 0)])


def overall(r, err):
    """A call's overall code, or its status code's name."""
    if err is not None:
        return err.name
    return rls.RateLimitResponse.Code.Name(r.overall_code)


def conns(port, domain, entries, n):
    """One call on each of n connections, all open at once."""
    clients = [Client(port, own=True) for _ in range(n)]
    print(" ".join(overall(*c.call(domain, [descriptor(entries)]))
                   for c in clients))
    for c in clients:
        c.channel.close()


def fdflood(port, domain, entries, n):
    """A call while n idle connections are open, then one after."""
    socks = [socket.create_connection(("127.0.0.1", port))
             for _ in range(n)]
    out = []
    for timeout in (3, 30):
        if timeout == 30:
            for s in socks:
                s.close()
        c = Client(port, own=True)
        out.append(overall(*c.call(domain, [descriptor(entries)],
                                   timeout=timeout)))
        c.channel.close()
    print(" ".join(out))


def wait_closed(socks, seconds):
    """How many of socks the server closes within `seconds` (what they
    receive is read and dropped); then every one is closed."""
    import select
    left = {s.fileno(): s for s in socks}
    p = select.poll()
    for fd in left:
        p.register(fd, select.POLLIN)
    closed = 0
    end = time.monotonic() + seconds
    while left and time.monotonic() < end:
        for fd, _ in p.poll(1000):
            s = left[fd]
            try:
                gone = s.recv(65536) == b""
            except OSError:
                gone = True
            if gone:
                p.unregister(fd)
                del left[fd]
                s.close()
                closed += 1
    for s in left.values():
        s.close()
    return closed


def silent(port, http_port, domain, entries, n):
    """n TCP connections that never send the HTTP/2 preface, held open
    while one call (30 s deadline) and one GET /healthz (30 s) try; then
    how many of them drld has closed within 60 s. Prints the call's
    overall code (or status code's name), the health check's HTTP status
    (or the error) and the closed count: "OK 200 closed=400"."""
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port),
                                                  timeout=30))
        except OSError:
            break  # counted as closed below: the count asked for stays
    c = Client(port, own=True)
    out = [overall(*c.call(domain, [descriptor(entries)], timeout=30))]
    c.channel.close()
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" %
                                    http_port, timeout=30) as f:
            out.append(str(f.status))
    except OSError as e:
        out.append(type(e).__name__)
    out.append("closed=%d" % (n - len(socks) + wait_closed(socks, 60)))
    print(" ".join(out))


def swap_setup(cdir, ndomains):
    """A ConfigMap-style volume in cdir; see the usage of swap."""
    for v in (1, 2):
        vdir = os.path.join(cdir, "..v%d" % v)
        os.makedirs(vdir, exist_ok=True)
        for i in range(ndomains):
            with open(os.path.join(vdir, "d%02d.yaml" % i), "w") as f:
                f.write("domain: d%02d\ndescriptors:\n  - key: k\n"
                        "    rate_limit: {unit: hour, requests_per_unit: "
                        "%d}\n" % (i, v))
    link = os.path.join(cdir, "..data")
    os.symlink("..v1", link)
    for i in range(ndomains):
        os.symlink(os.path.join("..data", "d%02d.yaml" % i),
                   os.path.join(cdir, "d%02d.yaml" % i))


def swap(pid, port, http_port, cdir, ndomains, reloads):
    """ConfigMap-style swaps racing with SIGHUP reloads; see the usage."""
    import signal
    link = os.path.join(cdir, "..data")
    stop = threading.Event()

    def flipper():
        v = 1
        while not stop.is_set():
            v = 3 - v
            tmp = os.path.join(cdir, "..data_tmp")
            os.symlink("..v%d" % v, tmp)
            os.rename(tmp, link)  # atomic, as kubelet swaps it

    def done_reloads():
        m = metrics(http_port)
        return sum(int(float(m.get(
            'drld_config_reloads_total{result="%s"}' % r, "0")))
            for r in ("ok", "error"))

    t = threading.Thread(target=flipper)
    t.start()
    c = Client(port)
    mixed = errors = done = 0
    try:
        for _ in range(reloads):
            before = done_reloads()
            os.kill(pid, signal.SIGHUP)
            end = time.monotonic() + 60
            while done_reloads() <= before and time.monotonic() < end:
                time.sleep(0.02)
            if done_reloads() <= before:
                break
            done += 1
            seen = set()
            for i in range(ndomains):
                r, err = c.call("d%02d" % i, [descriptor("k=x")], hits=0)
                if err is not None or not r.statuses[0].HasField(
                        "current_limit"):
                    errors += 1
                else:
                    seen.add(r.statuses[0].current_limit.requests_per_unit)
            if len(seen) > 1:
                mixed += 1
    finally:
        stop.set()
        t.join()
    print("reloads=%d mixed=%d errors=%d" % (done, mixed, errors))


def handshaken(port, n):
    """n TCP connections that send the HTTP/2 preface and an empty
    SETTINGS frame, then nothing: how many drld closes within 60 s."""
    hello = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
             b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    socks = []
    for _ in range(n):
        socks.append(socket.create_connection(("127.0.0.1", port),
                                              timeout=30))
        socks[-1].sendall(hello)
    print("closed=%d" % wait_closed(socks, 60))


def hold(port, domain, entries, n, seconds):
    """Connections held idle, as Envoy holds them (see the usage)."""
    clients = [Client(port, own=True) for _ in range(n)]
    for c in clients:
        r, err = c.call(domain, [descriptor(entries)])
        if err is not None:
            print("call %s" % err.name, flush=True)

    def watch():
        stub = health_grpc.HealthStub(clients[0].channel)
        try:
            for x in stub.Watch(health.HealthCheckRequest(service="")):
                if x.status == 2:
                    print("watch NOT_SERVING", flush=True)
            print("watch OK", flush=True)
        except grpc.RpcError as e:
            print("watch %s" % e.code().name, flush=True)

    threading.Thread(target=watch, daemon=True).start()
    silent_one = socket.create_connection(("127.0.0.1", port), timeout=30)
    silent_one.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                       b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    print("held", flush=True)
    time.sleep(seconds)


def busy(port, domain, entries, seconds):
    """Clients calling without a pause (see the usage)."""
    counts = {}
    lock = threading.Lock()
    started = threading.Barrier(5)
    end = time.monotonic() + seconds

    def worker():
        c = Client(port, own=True)
        first = True
        while time.monotonic() < end:
            r, err = c.call(domain, [descriptor(entries)], timeout=30)
            name = overall(r, err)
            with lock:
                counts[name] = counts.get(name, 0) + 1
            if first:
                first = False
                started.wait()
            if err is not None:
                break
        if first:
            started.wait()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    print("busy", flush=True)
    for t in threads:
        t.join()
    print(" ".join("%s=%d" % kv for kv in sorted(counts.items())),
          flush=True)


def flood(port, domain, entries, n, deadline):
    """n calls of one descriptor at once on one channel, each with a
    deadline of `deadline` seconds; prints "sent" when all are started
    (flushed, for a script to wait on), then, when every call has ended,
    how each ended: "DEADLINE_EXCEEDED=3 OK=0 UNAVAILABLE=21" (the
    overall code of an answer, else the gRPC status code; every name
    with a count, in order)."""
    c = Client(port)
    req = rls.RateLimitRequest(domain=domain,
                               descriptors=[descriptor(entries)])
    calls = [c.stub.ShouldRateLimit.future(req, timeout=deadline)
             for _ in range(n)]
    print("sent", flush=True)
    counts = {}
    for f in calls:
        try:
            name = rls.RateLimitResponse.Code.Name(f.result().overall_code)
        except grpc.RpcError as e:
            name = e.code().name
        counts[name] = counts.get(name, 0) + 1
    print(" ".join("%s=%d" % kv for kv in sorted(counts.items())),
          flush=True)


def reconnect(port, domain, entries, deadline):
    """Calls on one channel until it has reconnected once (see the
    usage)."""
    ch = channel(port)
    stub = rls_grpc.RateLimitServiceStub(ch)
    states = []
    ch.subscribe(states.append)  # grpc's own thread appends
    req = rls.RateLimitRequest(domain=domain,
                               descriptors=[descriptor(entries)])
    calls = errors = 0
    left = False  # READY seen, then something else
    end = time.monotonic() + deadline
    done = False
    while not done and time.monotonic() < end:
        try:
            stub.ShouldRateLimit(req, timeout=30)
        except grpc.RpcError:
            errors += 1
        calls += 1
        seen = list(states)
        if grpc.ChannelConnectivity.READY in seen:
            first = seen.index(grpc.ChannelConnectivity.READY)
            after = seen[first + 1:]
            left = left or any(x != grpc.ChannelConnectivity.READY
                               for x in after)
            done = left and after[-1:] == [grpc.ChannelConnectivity.READY]
        time.sleep(0.05)
    print("reconnected" if done else "never")
    print("calls=%d errors=%d" % (calls, errors), flush=True)
    ch.close()


def health_check(port, service):
    """Health/Check of service: prints its status or the error's code."""
    stub = health_grpc.HealthStub(
        channel(port))
    try:
        r = stub.Check(health.HealthCheckRequest(service=service),
                       timeout=30)
        print(health.HealthCheckResponse.ServingStatus.Name(r.status))
    except grpc.RpcError as e:
        print(e.code().name)


def health_watch(port, service):
    """Health/Watch of service: each status as it comes (flushed, for a
    script to wait on), then "END" and how the stream ended. Bounded: a
    stream that neither changes nor ends in 120 s ends DEADLINE_EXCEEDED."""
    stub = health_grpc.HealthStub(
        channel(port))
    code = "OK"
    try:
        for r in stub.Watch(health.HealthCheckRequest(service=service),
                            timeout=120):
            print(health.HealthCheckResponse.ServingStatus.Name(r.status),
                  flush=True)
    except grpc.RpcError as e:
        code = e.code().name
    print("END", code, flush=True)


def main(argv):
    global rls, rls_grpc, common
    if len(argv) < 3:
        sys.exit(__doc__)
    rls, rls_grpc, common = load_stubs(os.path.abspath(argv[1]))
    cmd, args = argv[2], argv[3:]
    if cmd == "suite":
        suite(int(args[0]), args[1], int(args[2]))
    elif cmd == "readme":
        readme(int(args[0]), int(args[1]))
    elif cmd == "share":
        share(args[0], args[1], int(args[2]), [int(p) for p in args[3:]])
    elif cmd == "call":
        # "\\0" in the domain stands for a NUL byte (a shell argument
        # cannot hold one)
        call(port_arg(args[0]), args[1].replace("\\0", "\0"), args[2])
    elif cmd == "together":
        together(int(args[0]), args[1], args[2])
    elif cmd == "hold":
        hold(int(args[0]), args[1], args[2], int(args[3]), float(args[4]))
    elif cmd == "busy":
        busy(int(args[0]), args[1], args[2], float(args[3]))
    elif cmd == "conns":
        conns(port_arg(args[0]), args[1], args[2], int(args[3]))
    elif cmd == "silent":
        silent(int(args[0]), int(args[1]), args[2], args[3], int(args[4]))
    elif cmd == "handshaken":
        handshaken(int(args[0]), int(args[1]))
    elif cmd == "swapdir":
        swap_setup(args[0], int(args[1]))
    elif cmd == "swap":
        swap(int(args[0]), int(args[1]), int(args[2]), args[3],
             int(args[4]), int(args[5]))
    elif cmd == "fdflood":
        fdflood(int(args[0]), args[1], args[2], int(args[3]))
    elif cmd == "flood":
        flood(int(args[0]), args[1], args[2], int(args[3]), float(args[4]))
    elif cmd == "reconnect":
        reconnect(int(args[0]), args[1], args[2], float(args[3]))
    elif cmd == "health":
        health_check(port_arg(args[0]), args[1])
    elif cmd == "watch":
        health_watch(int(args[0]), args[1])
    else:
        sys.exit(__doc__)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
