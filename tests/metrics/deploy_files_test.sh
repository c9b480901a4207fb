#!/bin/bash
# Static checks of deploy/ and the Dockerfile: Prometheus config and rules pass promtool, the
# dashboard JSON and every YAML file parse and hang together (names, ports, paths, units), and the
# systemd unit has its hardening settings (systemd_unit_test.sh runs systemd-analyze on it). Docker,
# Grafana and Kubernetes do not run here; these checks catch what can be caught without them.
set -euo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
deploy=$src/deploy
# Debian's interpreter, for Debian's python3-yaml (a pyenv or venv python3 may lack it), unless
# VRAMLAB_PYTHON names another interpreter that has yaml (scripts/gpu-build.sh --test sets it).
py=${VRAMLAB_PYTHON:-/usr/bin/python3}
source "$src/tests/support/checks.sh"

check "promtool check config deploy/prometheus/prometheus.yml" \
  promtool check config "$deploy/prometheus/prometheus.yml"
check "promtool check rules" promtool check rules "$deploy/prometheus/rules/vramlab-alerts.yml"
check "promtool test rules: the store and authentication alerts fire when they should" \
  promtool test rules "$deploy/prometheus/tests/vramlab-alerts.test.yml"

check "dashboard JSON: parses, every panel has a unit and a datasource, variables and ids" \
  "$py" - "$deploy/grafana/dashboards/vramlab.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["uid"] == "vramlab", d["uid"]
names = [v["name"] for v in d["templating"]["list"]]
assert {"datasource", "instance", "gpu"} <= set(names), names
ids, data_panels = set(), 0
for p in d["panels"]:
    assert p["id"] not in ids, f"duplicate panel id {p['id']}"
    ids.add(p["id"])
    g = p["gridPos"]
    assert g["x"] + g["w"] <= 24, f"{p['title']} wider than the grid"
    if p["type"] == "row":
        continue
    data_panels += 1
    unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    assert unit, f"panel {p['title']!r} has no unit"
    assert p["datasource"]["uid"] == "${datasource}", p["title"]
    refs = [t["refId"] for t in p["targets"]]
    assert refs and len(refs) == len(set(refs)), f"{p['title']}: refIds {refs}"
    for t in p["targets"]:
        assert t["expr"].strip(), p["title"]
        if "_bytes" in t["expr"] and "/" not in t["expr"]:
            assert unit == "bytes", f"{p['title']}: byte series with unit {unit}"
        if "_ratio" in t["expr"] or "/ (vramlab_gpu_memory_limit_bytes" in t["expr"]:
            assert unit == "percentunit", f"{p['title']}: ratio with unit {unit}"
        if "_seconds" in t["expr"]:
            assert unit == "s", f"{p['title']}: seconds with unit {unit}"
assert data_panels >= 12, data_panels
# The store and access health has panels (the alerts on them are in prometheus/rules).
exprs = " ".join(t["expr"] for p in d["panels"] if p["type"] != "row" for t in p["targets"])
for metric in ("vramlab_store_writable", "vramlab_events_not_stored_total", "vramlab_auth_throttled_total"):
    assert metric in exprs, f"no panel shows {metric}"
# The Daemon stat falls back to up, then to 0, so a daemon that is down shows DOWN, not "No data".
(daemon,) = [p for p in d["panels"] if p["title"] == "Daemon"]
expr = daemon["targets"][0]["expr"]
assert "or on (instance) up{" in expr and expr.endswith("or on () vector(0)"), expr
texts = {k: v["text"] for m in daemon["fieldConfig"]["defaults"]["mappings"] for k, v in m["options"].items()}
assert texts.get("0") == "DOWN", texts
print(f"{data_panels} data panels")
PY

check "Grafana provisioning YAML: datasource uid and dashboard path match compose" \
  "$py" - "$deploy" <<'PY'
import json, os, sys, yaml
deploy = sys.argv[1]
ds = yaml.safe_load(open(f"{deploy}/grafana/provisioning/datasources/prometheus.yaml"))
assert ds["apiVersion"] == 1
(source,) = ds["datasources"]
assert source["type"] == "prometheus" and source["uid"] == "vramlab-prometheus"
dash = json.load(open(f"{deploy}/grafana/dashboards/vramlab.json"))
current = [v for v in dash["templating"]["list"] if v["name"] == "datasource"][0]["current"]["value"]
assert current == source["uid"], (current, source["uid"])
providers = yaml.safe_load(open(f"{deploy}/grafana/provisioning/dashboards/vramlab.yaml"))["providers"]
path = providers[0]["options"]["path"]
compose = yaml.safe_load(open(f"{deploy}/docker-compose.yml"))
mounts = compose["services"]["grafana"]["volumes"]
assert f"./grafana/dashboards:{path}:ro" in mounts, (path, mounts)
assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in mounts, mounts
home = compose["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
assert home == f"{path}/vramlab.json", home
# Prometheus in compose scrapes the daemon's service name on the metrics port.
prom = yaml.safe_load(open(f"{deploy}/prometheus/prometheus.yml"))
targets = prom["scrape_configs"][0]["static_configs"][0]["targets"]
assert targets == ["vramlabd:9464"], targets
assert source["url"] == "http://prometheus:9090"
PY

check "docker-compose.yml: GPU reservation, loopback-only ports, mounts that exist" \
  "$py" - "$deploy" <<'PY'
import os, sys, yaml
deploy = sys.argv[1]
c = yaml.safe_load(open(f"{deploy}/docker-compose.yml"))
s = c["services"]
assert set(s) == {"vramlabd", "prometheus", "grafana"}, set(s)
(device,) = s["vramlabd"]["deploy"]["resources"]["reservations"]["devices"]
assert device["driver"] == "nvidia" and "gpu" in device["capabilities"], device
assert s["vramlabd"]["build"]["dockerfile"] == "Dockerfile"
assert os.path.isfile(os.path.join(deploy, s["vramlabd"]["build"]["context"], "Dockerfile"))
for name, service in s.items():
    for port in service.get("ports", []):
        assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("./"):
            assert os.path.exists(os.path.join(deploy, source)), f"{name}: {source} missing"
        else:
            assert source in c["volumes"], f"{name}: undeclared volume {source}"
PY

check "k8s manifests: DaemonSet on GPU nodes, ports and names agree across objects" \
  "$py" - "$deploy/k8s" <<'PY'
import os, sys, yaml
k8s = sys.argv[1]
docs = {}
for f in sorted(os.listdir(k8s)):
    if f.endswith(".yaml"):
        for d in yaml.safe_load_all(open(os.path.join(k8s, f))):
            docs[d["kind"]] = d
ds, svc, sm = docs["DaemonSet"], docs["Service"], docs["ServiceMonitor"]
spec = ds["spec"]["template"]["spec"]
assert spec["nodeSelector"], "no nodeSelector"
assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
(c,) = spec["containers"]
assert int(c["resources"]["limits"]["nvidia.com/gpu"]) >= 1
assert spec["securityContext"]["runAsNonRoot"] is True
assert c["securityContext"]["allowPrivilegeEscalation"] is False
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
assert ports == {"grpc": 7433, "metrics": 9464}, ports
for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
    assert c[probe]["grpc"]["port"] == ports["grpc"], probe
# Readiness asks for the API service by name (the daemon answers it, health_check_probe_test).
assert c["readinessProbe"]["grpc"]["service"] == "vramlab.v1.VramlabService", c["readinessProbe"]
labels = ds["spec"]["template"]["metadata"]["labels"]
assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()
assert svc["spec"]["selector"].items() <= labels.items()
assert svc["spec"]["clusterIP"] == "None"
svc_ports = {p["name"]: p["targetPort"] for p in svc["spec"]["ports"]}
assert svc_ports["metrics"] == "metrics" and svc_ports["grpc"] == "grpc", svc_ports
assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
assert sm["spec"]["endpoints"][0]["port"] == "metrics"
mounts = {m["name"] for m in c["volumeMounts"]}
volumes = {v["name"] for v in spec["volumes"]}
assert mounts <= volumes, mounts - volumes
data = [v for v in spec["volumes"] if v["name"] == "data"][0]
assert data["hostPath"]["path"] == "/var/lib/vramlab"
kust = yaml.safe_load(open(os.path.join(k8s, "kustomization.yaml")))
for r in kust["resources"]:
    assert os.path.isfile(os.path.join(k8s, r)), r
PY

check "systemd unit: StateDirectory, Restart=on-failure, NoNewPrivileges, NVIDIA devices" \
  grep -qzP 'StateDirectory=vramlab\n[\s\S]*Restart=on-failure[\s\S]*LimitNOFILE=[\s\S]*NoNewPrivileges=yes[\s\S]*ProtectSystem=strict[\s\S]*DeviceAllow=char-nvidia-frontend rw' \
  "$deploy/systemd/vramlabd.service"

check "Dockerfile: two CMake trees, non-root user, health check, files it copies exist" \
  "$py" - "$src" <<'PY'
import os, re, sys
src = sys.argv[1]
text = open(os.path.join(src, "Dockerfile")).read()
joined = text.replace("\\\n", " ")
stages = re.findall(r"^FROM (\S+) AS (\S+)", joined, re.M)
assert [s[1] for s in stages] == ["worker-build", "server-build", "runtime"], stages
assert "-DVRAMLAB_BUILD_SERVER=OFF" in joined and "-DVRAMLAB_BUILD_WORKER=OFF" in joined
assert "torch.utils.cmake_prefix_path" in joined
users = re.findall(r"^USER (\S+)", joined, re.M)
assert users and not users[-1].startswith(("root", "0")), users
assert re.search(r'^HEALTHCHECK .*CMD \["/usr/local/bin/vramlab", .*"server", "--health"\]', joined, re.M)
for source in re.findall(r"^COPY (?!--from)(?:--\S+ )*(.+) \S+$", joined, re.M):
    for path in source.split():
        assert os.path.exists(os.path.join(src, path)), f"COPY source {path} missing"
PY

checks_done "deployment"
