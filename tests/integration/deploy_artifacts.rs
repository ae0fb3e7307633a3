//! The shipped Grafana dashboard and Prometheus config refer only to metrics
//! that exist in the catalogue.

#[test]
fn dashboard_uses_only_catalogued_metrics() {
    let text = include_str!("../../deploy/grafana/myplex-dashboard.json");
    let v: serde_json::Value = serde_json::from_str(text).expect("dashboard is JSON");
    let mut exprs = 0;
    for panel in v["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            exprs += 1;
            let mut found = false;
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("myplex_") {
                    found = true;
                    let base = word
                        .trim_end_matches("_bucket")
                        .trim_end_matches("_sum")
                        .trim_end_matches("_count");
                    assert!(
                        myplex::metrics::names::ALL.contains(&base),
                        "dashboard uses unknown metric {word}"
                    );
                }
            }
            assert!(found, "panel query without a myplex metric: {expr}");
        }
    }
    assert!(exprs >= 14);
    let prom = include_str!("../../deploy/prometheus/prometheus.yml");
    assert!(prom.contains("metrics_path: /metrics"));
    assert!(
        prom.contains("127.0.0.1:6034"),
        "scrapes the default admin_listen"
    );
}

// ---- Container and Kubernetes artefacts (images cannot be built here, so
// the files are parsed and the fields that matter are checked).

use serde_yaml::Value as Yaml;

const DOCKERFILE: &str = include_str!("../../deploy/docker/Dockerfile");
const IMAGE_CONFIG: &str = include_str!("../../deploy/docker/myplex.toml");
const COMPOSE: &str = include_str!("../../deploy/docker/compose.yaml");
const K8S: &[(&str, &str)] = &[
    (
        "configmap.yaml",
        include_str!("../../deploy/kubernetes/configmap.yaml"),
    ),
    (
        "secret.yaml",
        include_str!("../../deploy/kubernetes/secret.yaml"),
    ),
    (
        "deployment.yaml",
        include_str!("../../deploy/kubernetes/deployment.yaml"),
    ),
    (
        "service.yaml",
        include_str!("../../deploy/kubernetes/service.yaml"),
    ),
    ("pdb.yaml", include_str!("../../deploy/kubernetes/pdb.yaml")),
];

/// The admin endpoints that exist (src/admin/http.rs routes).
const ADMIN_GETS: &[&str] = &["/metrics", "/status", "/healthz", "/readyz"];

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr}"))
}

fn k8s(kind: &str) -> Yaml {
    let docs: Vec<Yaml> = K8S
        .iter()
        .map(|(name, text)| {
            serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{name} is YAML: {e}"))
        })
        .collect();
    let mut found: Vec<Yaml> = docs.into_iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "exactly one {kind}");
    found.remove(0)
}

fn s(v: &Yaml) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

#[test]
fn dockerfile_is_multi_stage_non_root_with_healthcheck() {
    let lines: Vec<&str> = DOCKERFILE
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let froms: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert!(froms.len() >= 2, "multi-stage build");
    assert!(froms[0].contains(" AS build"), "first stage named build");
    let runtime = froms.last().expect("runtime stage");
    assert!(
        runtime.contains("-slim") || runtime.contains("distroless"),
        "small runtime image: {runtime}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("COPY --from=build") && l.contains("myplex")),
        "runtime copies only the built binary"
    );
    let user = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("USER "))
        .expect("USER");
    let uid = user[5..].split(':').next().unwrap_or_default();
    assert!(uid != "root" && uid != "0", "non-root user: {user}");
    let cfg = myplex::config::load_str(IMAGE_CONFIG).expect("image config is valid");
    let (mysql, admin) = (port_of(&cfg.listen), port_of(&cfg.admin_listen));
    let expose = lines
        .iter()
        .find(|l| l.starts_with("EXPOSE "))
        .expect("EXPOSE");
    for p in [mysql, admin] {
        assert!(expose.contains(&p.to_string()), "EXPOSE {p}: {expose}");
    }
    let hc = DOCKERFILE
        .split("HEALTHCHECK")
        .nth(1)
        .expect("HEALTHCHECK")
        .split("\n#")
        .next()
        .unwrap_or_default();
    assert!(hc.contains("/healthz"), "healthcheck asks /healthz: {hc}");
    assert!(hc.contains(&format!("/{admin}")), "on the admin port: {hc}");
    assert!(
        DOCKERFILE.contains("COPY deploy/docker/myplex.toml /etc/myplex/myplex.toml")
            && DOCKERFILE.contains("\"--config\", \"/etc/myplex/myplex.toml\""),
        "the image runs its shipped config"
    );
    assert!(
        cfg.listen.starts_with("0.0.0.0:") && cfg.admin_listen.starts_with("0.0.0.0:"),
        "a container listens on all interfaces"
    );
}

#[test]
fn compose_starts_the_four_services_with_the_shipped_files() {
    let c: Yaml = serde_yaml::from_str(COMPOSE).expect("compose is YAML");
    let svc = &c["services"];
    for name in ["mariadb", "myplex", "prometheus", "grafana"] {
        assert!(svc[name].is_mapping(), "service {name}");
    }
    assert!(s(&svc["mariadb"]["image"]).starts_with("mariadb:10.11"));
    assert_eq!(
        s(&svc["myplex"]["depends_on"]["mariadb"]["condition"]),
        "service_healthy"
    );
    assert_eq!(
        s(&svc["myplex"]["build"]["dockerfile"]),
        "deploy/docker/Dockerfile"
    );
    let cfg = myplex::config::load_str(IMAGE_CONFIG).expect("compose config is valid");
    assert_eq!(
        cfg.backend.address.split(':').next(),
        Some("mariadb"),
        "myplex reaches the mariadb service"
    );
    let env = &svc["mariadb"]["environment"];
    assert_eq!(s(&env["MARIADB_USER"]), cfg.backend.user);
    assert_eq!(s(&env["MARIADB_PASSWORD"]), cfg.backend.password);
    let ports: Vec<&str> = svc["myplex"]["ports"]
        .as_sequence()
        .expect("myplex ports")
        .iter()
        .map(s)
        .collect();
    for p in [port_of(&cfg.listen), port_of(&cfg.admin_listen)] {
        assert!(
            ports.contains(&format!("{p}:{p}").as_str()),
            "publishes {p}"
        );
    }
    let mounts = |name: &str| -> Vec<String> {
        svc[name]["volumes"]
            .as_sequence()
            .expect("volumes")
            .iter()
            .map(|v| s(v).to_string())
            .collect()
    };
    assert!(
        mounts("myplex")
            .iter()
            .any(|m| m.starts_with("./myplex.toml:/etc/myplex/myplex.toml"))
    );
    // Prometheus shares myplex's network namespace so the shipped scrape
    // target 127.0.0.1:<admin port> reaches myplex.
    assert_eq!(s(&svc["prometheus"]["network_mode"]), "service:myplex");
    assert!(
        include_str!("../../deploy/prometheus/prometheus.yml")
            .contains(&format!("127.0.0.1:{}", port_of(&cfg.admin_listen)))
    );
    assert!(
        mounts("prometheus")
            .iter()
            .any(|m| m.starts_with("../prometheus/prometheus.yml:"))
    );
    let g = mounts("grafana");
    assert!(g.iter().any(|m| m.starts_with("../grafana/provisioning:")));
    assert!(
        g.iter()
            .any(|m| m.starts_with("../grafana/myplex-dashboard.json:/var/lib/grafana/dashboards/"))
    );
    let dash: Yaml = serde_yaml::from_str(include_str!(
        "../../deploy/grafana/provisioning/dashboards/myplex.yml"
    ))
    .expect("dashboard provider");
    assert_eq!(
        s(&dash["providers"][0]["options"]["path"]),
        "/var/lib/grafana/dashboards"
    );
    let ds: Yaml = serde_yaml::from_str(include_str!(
        "../../deploy/grafana/provisioning/datasources/prometheus.yml"
    ))
    .expect("datasource");
    assert_eq!(s(&ds["datasources"][0]["type"]), "prometheus");
    assert_eq!(s(&ds["datasources"][0]["url"]), "http://myplex:9090");
}

#[test]
fn kubernetes_manifests_agree_with_the_config() {
    let cm = k8s("ConfigMap");
    let toml = s(&cm["data"]["myplex.toml"]);
    let cfg = myplex::config::load_str(toml).expect("ConfigMap holds a valid myplex config");
    let (mysql, admin) = (port_of(&cfg.listen), port_of(&cfg.admin_listen));
    assert!(
        cfg.pool.max_backend_connections > 0,
        "explicit per-replica budget"
    );

    let dep = k8s("Deployment");
    let pod = &dep["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let ports: Vec<(String, u64)> = c["ports"]
        .as_sequence()
        .expect("ports")
        .iter()
        .map(|p| {
            (
                s(&p["name"]).to_string(),
                p["containerPort"].as_u64().expect("port"),
            )
        })
        .collect();
    assert!(ports.contains(&("mysql".into(), mysql.into())), "{ports:?}");
    assert!(ports.contains(&("admin".into(), admin.into())), "{ports:?}");
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(s(&get["path"]), path, "{probe}");
        assert!(ADMIN_GETS.contains(&path));
        assert_eq!(s(&get["port"]), "admin", "{probe} on the admin port");
    }
    let pre = c["lifecycle"]["preStop"]["exec"]["command"]
        .as_sequence()
        .expect("preStop exec");
    let sleep: u64 = s(&pre[1]).parse().expect("sleep seconds");
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace");
    assert!(
        grace >= sleep + 30,
        "grace period {grace} covers the preStop sleep {sleep} and the 30 s drain"
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], Yaml::Bool(true));
    assert!(pod["securityContext"]["runAsUser"].as_u64().expect("uid") > 0);
    assert_eq!(
        c["securityContext"]["allowPrivilegeEscalation"],
        Yaml::Bool(false)
    );
    // The config comes from the ConfigMap, the password from the Secret.
    let args: Vec<&str> = c["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .map(s)
        .collect();
    let mount = s(&c["volumeMounts"][0]["mountPath"]);
    assert_eq!(args, ["--config", &format!("{mount}/myplex.toml")]);
    assert_eq!(
        s(&pod["volumes"][0]["configMap"]["name"]),
        s(&cm["metadata"]["name"])
    );
    let secret = k8s("Secret");
    let env = &c["env"][0];
    assert_eq!(s(&env["name"]), "MYPLEX_BACKEND__PASSWORD");
    let key = s(&env["valueFrom"]["secretKeyRef"]["key"]);
    assert_eq!(
        s(&env["valueFrom"]["secretKeyRef"]["name"]),
        s(&secret["metadata"]["name"])
    );
    assert!(secret["stringData"][key].is_string(), "Secret has {key}");
    // No surge: a surge pod would add its whole budget on top.
    assert_eq!(
        dep["spec"]["strategy"]["rollingUpdate"]["maxSurge"].as_u64(),
        Some(0)
    );

    let labels = &dep["spec"]["selector"]["matchLabels"];
    assert_eq!(&dep["spec"]["template"]["metadata"]["labels"], labels);
    let svc = k8s("Service");
    assert_eq!(&svc["spec"]["selector"], labels);
    let targets: Vec<&str> = svc["spec"]["ports"]
        .as_sequence()
        .expect("service ports")
        .iter()
        .map(|p| s(&p["targetPort"]))
        .collect();
    assert!(targets.contains(&"mysql") && targets.contains(&"admin"));
    let pdb = k8s("PodDisruptionBudget");
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], labels);
    let replicas = dep["spec"]["replicas"].as_u64().expect("replicas");
    assert!(
        pdb["spec"]["maxUnavailable"]
            .as_u64()
            .expect("maxUnavailable")
            < replicas
    );
}

// ---- The admin endpoint's token (issue 16, item 14).

/// The compose file and the image config agree on the admin token: the
/// config names the secret's mount, myplex and Prometheus both get the
/// secret, and Prometheus sends it on its scrape.
#[test]
fn docker_admin_endpoint_asks_for_the_token() {
    let cfg = myplex::config::load_str(IMAGE_CONFIG).expect("image config is valid");
    let c: Yaml = serde_yaml::from_str(COMPOSE).expect("compose is YAML");
    let secrets = c["secrets"].as_mapping().expect("top-level secrets");
    let (name, def) = secrets
        .iter()
        .find(|(n, _)| cfg.admin_token_file == format!("/run/secrets/{}", s(n)))
        .unwrap_or_else(|| {
            panic!(
                "admin_token_file {} is not a compose secret's mount",
                cfg.admin_token_file
            )
        });
    let name = s(name);
    let file = s(&def["file"]);
    assert_eq!(file, "./admin_token");
    assert!(
        !include_str!("../../deploy/docker/admin_token")
            .trim()
            .is_empty(),
        "the shipped token file holds a token"
    );
    for svc in ["myplex", "prometheus"] {
        let got: Vec<&str> = c["services"][svc]["secrets"]
            .as_sequence()
            .unwrap_or_else(|| panic!("{svc} secrets"))
            .iter()
            .map(s)
            .collect();
        assert!(got.contains(&name), "{svc} gets {name}: {got:?}");
    }
    assert!(
        !cfg.admin_metrics_public,
        "compose scrapes with the token, so /metrics stays protected"
    );
    let prom: Yaml = serde_yaml::from_str(include_str!("../../deploy/prometheus/prometheus.yml"))
        .expect("prometheus config is YAML");
    let auth = &prom["scrape_configs"][0]["authorization"];
    assert_eq!(s(&auth["type"]), "Bearer");
    assert_eq!(s(&auth["credentials_file"]), cfg.admin_token_file);
}

/// The ConfigMap's token file is the Secret's admin-token key, mounted by
/// the Deployment; the probes' paths stay open.
#[test]
fn kubernetes_admin_endpoint_asks_for_the_token() {
    let cm = k8s("ConfigMap");
    let cfg = myplex::config::load_str(s(&cm["data"]["myplex.toml"])).expect("valid config");
    let dep = k8s("Deployment");
    let pod = &dep["spec"]["template"]["spec"];
    let secret = k8s("Secret");
    let secret_name = s(&secret["metadata"]["name"]);
    let mounts = pod["containers"][0]["volumeMounts"]
        .as_sequence()
        .expect("mounts");
    let volumes = pod["volumes"].as_sequence().expect("volumes");
    let found = mounts.iter().find_map(|m| {
        let dir = s(&m["mountPath"]);
        let file = cfg.admin_token_file.strip_prefix(dir)?.strip_prefix('/')?;
        let v = volumes.iter().find(|v| v["name"] == m["name"])?;
        let sec = &v["secret"];
        if !sec.is_mapping() || s(&sec["secretName"]) != secret_name {
            return None;
        }
        let item = sec["items"]
            .as_sequence()?
            .iter()
            .find(|i| s(&i["path"]) == file)?;
        Some(s(&item["key"]).to_string())
    });
    let key = found.unwrap_or_else(|| {
        panic!(
            "admin_token_file {} is not a mounted key of Secret {secret_name}",
            cfg.admin_token_file
        )
    });
    assert!(
        secret["stringData"][key.as_str()].is_string(),
        "Secret has {key}"
    );
    // Annotation-based scraping cannot send a token.
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"],
        Yaml::String("true".into())
    );
    assert!(
        cfg.admin_metrics_public,
        "scraped by annotation: /metrics open"
    );
}

/// A config that publishes the admin endpoint without a token is refused.
#[test]
fn published_admin_endpoint_without_a_token_is_refused() {
    let open = IMAGE_CONFIG
        .lines()
        .filter(|l| !l.starts_with("admin_token_file"))
        .collect::<Vec<_>>()
        .join("\n");
    let e = myplex::config::load_str(&open).expect_err("refused without a token");
    assert!(e.to_string().contains("admin_token_file"), "{e}");
}
