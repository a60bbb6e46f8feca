#!/usr/bin/env bash
# deploy/: what can be checked without Docker, Kubernetes or Envoy (none
# is on the machines this runs on; docs/envoy.md, "Deploying"):
# - deploy/image_build.sh, the Dockerfile's build steps, is valid bash, and
#   the packages it and the Dockerfile install exist in apt;
# - the Dockerfile's runtime packages, with what they depend on, hold
#   every shared library the built drld links (ldd, dpkg -S);
# - deploy/kubernetes.yaml parses; its probes and Service name ports the
#   container declares; it runs as non-root; drld starts with the
#   Deployment's own arguments (addresses on 127.0.0.1:0) on the
#   ConfigMap's files, and stops on SIGTERM with exit 0;
# - deploy/envoy.yaml parses; the rate limit filter's cluster exists,
#   speaks HTTP/2, health-checks the "ratelimit" gRPC service, and points
#   at the Service's gRPC port; its domain is the ConfigMap's.
#
# usage: test_deploy.sh PATH/TO/drld
set -u
drld=${1:?usage: test_deploy.sh PATH/TO/drld}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
deploy="$here/../../deploy"
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
source "$here/../fixtures/tap.sh"
# under TSan (scripts/test.sh): grpc++ and abseil are not instrumented
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$here/../fixtures/tsan_grpc.supp"

if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
	if [ "${CI:-}" = true ]; then
		check 1 "python3-yaml is installed (CI=true)"
	else
		echo "# skip: python3-yaml not found"
	fi
	echo "# $((n - failed)) of $n assertions passed"
	[ "$failed" -eq 0 ]
	exit
fi

bash -n "$deploy/image_build.sh"
check $? "deploy/image_build.sh is valid bash"

# the packages named in the Dockerfile (runtime) and the build script
runtime=$(sed -n '/^FROM debian:12-slim/,$p' "$deploy/Dockerfile" |
	sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' |
	grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install|rm|update)$')
buildpkgs=$(sed -n '/apt-get install/,/^fi/p' "$deploy/image_build.sh" |
	tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' |
	grep -vE '^(apt-get|install|fi)$')
missing=
# shellcheck disable=SC2086 # one word per package
if ! apt-cache show $runtime $buildpkgs >/dev/null 2>&1; then
	for p in $runtime $buildpkgs; do
		apt-cache show "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
fi
[ -n "$runtime" ] && [ -z "$missing" ]
check $? "every package the Dockerfile and image_build.sh install exists in apt (missing:${missing:- none})"

# every library drld links comes from a runtime package or one they
# depend on (libdrl itself is installed from the build; a sanitizer's
# runtime is this build's, not the image's release build's)
need=$(ldd "$drld" | awk '$3 ~ /^\// { print $3 }' |
	grep -vE 'libdrl\.so|lib(a|ub|t|l)san\.so' |
	while read -r lib; do
		dpkg -S "$(readlink -f "$lib")" 2>/dev/null | cut -d: -f1
	done | sort -u)
# shellcheck disable=SC2086 # one word per package
have=$(apt-cache depends --recurse --no-recommends --no-suggests \
	--no-conflicts --no-breaks --no-replaces --no-enhances $runtime 2>/dev/null |
	grep -v '^ ' | sed 's/:.*//' | sort -u)
lack=$(comm -23 <(echo "$need") <(echo "$have") | tr '\n' ' ')
[ -n "$need" ] && [ -z "$lack" ]
check $? "the runtime packages hold every library drld links ($(echo "$need" | wc -l) packages; lacking: ${lack:-none})"

# the manifests
/usr/bin/python3 - "$deploy" "$tmp" >"$tmp/checks" 2>&1 <<'PY'
import os, sys, yaml
deploy, tmp = sys.argv[1], sys.argv[2]
def ok(c, what):
    print(("ok - " if c else "not ok - ") + what)
docs = list(yaml.safe_load_all(open(os.path.join(deploy, "kubernetes.yaml"))))
kinds = {d["kind"]: d for d in docs}
ok(set(kinds) == {"ConfigMap", "Deployment", "Service"},
   "kubernetes.yaml: a ConfigMap, a Deployment and a Service (got %s)" % sorted(kinds))
cm, dep, svc = kinds["ConfigMap"], kinds["Deployment"], kinds["Service"]
spec = dep["spec"]["template"]["spec"]
c = spec["containers"][0]
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
ok(spec["securityContext"].get("runAsNonRoot") is True and
   spec["securityContext"].get("runAsUser") == 10001,
   "the pod runs as non-root, the Dockerfile's user 10001")
ok(c["readinessProbe"]["grpc"]["port"] == ports["grpc"] and
   c["readinessProbe"]["grpc"]["service"] == "ratelimit",
   "readiness: gRPC health of \"ratelimit\" on the grpc port")
ok(c["livenessProbe"]["httpGet"]["port"] in ("http", ports["http"]) and
   c["livenessProbe"]["httpGet"]["path"] == "/healthz",
   "liveness: HTTP /healthz on the http port")
ok(all(p["targetPort"] in ports for p in svc["spec"]["ports"]) and
   svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"],
   "the Service targets the container's named ports and the pods' labels")
args = c["args"]
listen = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}
ok(listen["--listen"].endswith(":%d" % ports["http"]) and
   listen["--grpc-listen"].endswith(":%d" % ports["grpc"]),
   "drld listens where the container's ports are")
mount = c["volumeMounts"][0]["mountPath"]
ok(listen["--envoy-config"] == mount, "--envoy-config is the ConfigMap's mount")
# the ConfigMap's files, and drld's arguments with loopback addresses
os.makedirs(os.path.join(tmp, "cfg"))
for name, text in cm["data"].items():
    open(os.path.join(tmp, "cfg", name), "w").write(text)
with open(os.path.join(tmp, "args"), "w") as f:
    for a in args:
        k = a.split("=", 1)[0]
        if k in ("--listen", "--grpc-listen"):
            a = k + "=127.0.0.1:0"
        elif k == "--envoy-config":
            a = k + "=" + os.path.join(tmp, "cfg")
        f.write(a + "\n")
domains = {yaml.safe_load(t)["domain"] for t in cm["data"].values()}
env = yaml.safe_load(open(os.path.join(deploy, "envoy.yaml")))
clusters = {x["name"]: x for x in env["static_resources"]["clusters"]}
hcm = env["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
rl = [f for f in hcm["http_filters"] if f["name"] == "envoy.filters.http.ratelimit"]
ok(len(rl) == 1, "envoy.yaml: one rate limit filter")
rlc = rl[0]["typed_config"]
name = rlc["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"]
ok(name in clusters, "the filter's cluster \"%s\" exists" % name)
cl = clusters[name]
opts = cl["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
ok("http2_protocol_options" in opts["explicit_http_config"], "the cluster speaks HTTP/2")
ok(cl["health_checks"][0]["grpc_health_check"]["service_name"] == "ratelimit",
   "the cluster health-checks the \"ratelimit\" gRPC service")
port = cl["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]["port_value"]
svc_grpc = [p["port"] for p in svc["spec"]["ports"] if p["name"] == "grpc"]
ok(svc_grpc == [port], "the cluster points at the Service's gRPC port")
ok(rlc["domain"] in domains, "the filter's domain \"%s\" is the ConfigMap's" % rlc["domain"])
ok(rlc["rate_limit_service"]["transport_api_version"] == "V3", "transport_api_version V3")
PY
while IFS= read -r line; do
	case $line in
	"ok - "*) check 0 "${line#ok - }" ;;
	"not ok - "*) check 1 "${line#not ok - }" ;;
	*) echo "# $line" ;;
	esac
done <"$tmp/checks"

# drld with the Deployment's arguments, on the ConfigMap's files
if [ -s "$tmp/args" ]; then
	mapfile -t args <"$tmp/args"
	"$drld" "${args[@]}" 2>"$tmp/drld.err" &
	pid=$!
	for ((i = 0; i < 400; i++)); do
		grep -q '^drld: listening on' "$tmp/drld.err" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	grep -q '^drld: listening on' "$tmp/drld.err" &&
		grep -q '^drld: grpc listening on' "$tmp/drld.err"
	check $? "drld starts with the Deployment's arguments ($(head -c 300 "$tmp/drld.err" | tr '\n' ' '))"
	kill -TERM "$pid"
	wait "$pid"
	st=$?
	pid=
	[ "$st" -eq 0 ]
	check $? "and exits 0 on SIGTERM (got $st)"
	[ "$st" -eq 0 ] || sed 's/^/#   stderr: /' "$tmp/drld.err" | head -60
fi
echo "# $((n - failed)) of $n assertions passed"
[ "$failed" -eq 0 ]
