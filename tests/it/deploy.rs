//! The Kubernetes deployment in `deploy/kubernetes/`, checked as far as a machine without a
//! cluster can: every manifest passes the schema checker `kubernetes-validate` (PyPI, with
//! the Kubernetes JSON schemas bundled, so it runs offline) in strict mode for a pinned
//! Kubernetes version, and broken copies do not; the kustomization lists every manifest; every
//! `airlock` and `airlock-broker` command and flag the manifests run exists in the real
//! binaries; broker.toml and airlock.toml in the ConfigMaps parse with the real parsers; and
//! only the broker's pod reads the forge push token.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The oldest Kubernetes the manifests are written for: user namespaces (`hostUsers: false`)
/// on by default, `appArmorProfile` and `procMount` in the API.
const KUBERNETES_VERSION: &str = "1.33.0";

/// The checker's PyPI package, at the version the tests were written against.
const CHECKER_PACKAGE: &str = "kubernetes-validate";
const CHECKER_VERSION: &str = "1.37.0";

/// Files of `deploy/kubernetes/` that `kustomization.yaml` leaves out on purpose (each says
/// why in its header); the schema checker still checks them.
const NOT_APPLIED: [&str; 2] = ["secrets.example.yaml", "worker-job.yaml"];

/// One `airlock` or `airlock-broker` command line the manifests run.
struct Invocation {
    bin: &'static str,
    subcommand: &'static [&'static str],
    flags: &'static [&'static str],
}

/// Every command line the manifests run, in one place: a manifest that runs a subcommand or a
/// flag not listed here fails `every_command_the_manifests_run_exists`, and each listed one
/// must exist in the binaries with every listed flag.
const COMMANDS_USED: [Invocation; 4] = [
    Invocation {
        bin: "airlock-broker",
        subcommand: &["serve"],
        flags: &["--config"],
    },
    Invocation {
        bin: "airlock-broker",
        subcommand: &["ui"],
        flags: &["--config", "--listen", "--token-file"],
    },
    Invocation {
        bin: "airlock",
        subcommand: &["sandbox", "run"],
        flags: &[],
    },
    Invocation {
        bin: "airlock",
        subcommand: &["worker"],
        flags: &[
            "--broker", "--config", "--repo", "--clone", "--model", "--lease", "--once",
        ],
    },
];

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// Every YAML file of `deploy/kubernetes/`, sorted by name.
fn yaml_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifests_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    files
}

/// The manifests: every YAML file but the kustomization (which is no Kubernetes object and
/// has no schema).
fn manifest_files() -> Vec<PathBuf> {
    yaml_files()
        .into_iter()
        .filter(|p| file_name(p) != "kustomization.yaml")
        .collect()
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap()
}

/// `python3` with the checker importable: the machine's own when it has one, else a copy pip
/// installs once under the target's temporary directory (from the package index, as the
/// real-project tests take their packages: the first run needs the network, later ones reuse
/// it). Fails naming the package when neither works.
fn checker_python() -> Command {
    static SITE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let site = SITE.get_or_init(|| {
        let importable = |site: Option<&Path>| {
            let mut python = Command::new("python3");
            python.args(["-c", "import kubernetes_validate, yaml"]);
            if let Some(site) = site {
                python.env("PYTHONPATH", site);
            }
            python.output().is_ok_and(|o| o.status.success())
        };
        if importable(None) {
            return None;
        }
        let site = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{CHECKER_PACKAGE}-{CHECKER_VERSION}"));
        if !importable(Some(&site)) {
            let staging = site.with_extension(format!("partial-{}", std::process::id()));
            let out = Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-compile",
                    "--target",
                ])
                .arg(&staging)
                .arg(format!("{CHECKER_PACKAGE}=={CHECKER_VERSION}"))
                .output();
            let installed = out.as_ref().is_ok_and(|o| o.status.success());
            assert!(
                installed,
                "the Kubernetes schema checker is missing and pip could not install the PyPI \
                 package {CHECKER_PACKAGE}=={CHECKER_VERSION} under {} (the tests need \
                 python3's pip and the package index): {}",
                site.display(),
                out.map(|o| text(&o.stderr))
                    .unwrap_or_else(|e| e.to_string())
            );
            // Another test binary may have won the race; either copy is complete.
            let _ = std::fs::remove_dir_all(&site);
            if std::fs::rename(&staging, &site).is_err() {
                let _ = std::fs::remove_dir_all(&staging);
            }
        }
        Some(site)
    });
    let mut python = Command::new("python3");
    if let Some(site) = site {
        python.env("PYTHONPATH", site);
    }
    python
}

/// The checker's verdict on `files`: strict (unknown fields are errors), against
/// [`KUBERNETES_VERSION`].
fn run_checker(files: &[PathBuf]) -> Output {
    checker_python()
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "-k",
            KUBERNETES_VERSION,
        ])
        .args(files)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A Kubernetes object, as far as these tests read it.
#[derive(Debug, Deserialize)]
struct Object {
    kind: String,
    metadata: Metadata,
    #[serde(default)]
    data: BTreeMap<String, String>,
    #[serde(default)]
    spec: Option<WorkloadSpec>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    name: String,
}

/// The part of a Deployment's, StatefulSet's or Job's spec that holds its pods (absent in
/// other kinds' specs).
#[derive(Debug, Deserialize)]
struct WorkloadSpec {
    #[serde(default)]
    template: Option<PodTemplate>,
}

#[derive(Debug, Deserialize)]
struct PodTemplate {
    spec: PodSpec,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    containers: Vec<Container>,
    #[serde(default)]
    init_containers: Vec<Container>,
    #[serde(default)]
    volumes: Vec<Volume>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    name: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<EnvVar>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvVar {
    #[serde(default)]
    value_from: Option<EnvSource>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvSource {
    #[serde(default)]
    secret_key_ref: Option<NameRef>,
}

#[derive(Debug, Deserialize)]
struct NameRef {
    name: String,
}

#[derive(Debug, Deserialize)]
struct Volume {
    #[serde(default)]
    secret: Option<SecretVolume>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretVolume {
    secret_name: String,
}

#[derive(Debug, Deserialize)]
struct Kustomization {
    resources: Vec<String>,
}

impl Object {
    fn pod(&self) -> Option<&PodSpec> {
        Some(&self.spec.as_ref()?.template.as_ref()?.spec)
    }
}

impl PodSpec {
    fn all_containers(&self) -> impl Iterator<Item = &Container> {
        self.init_containers.iter().chain(&self.containers)
    }

    /// The names of the Secrets the pod reads, as variables or as volumes.
    fn secrets(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .all_containers()
            .flat_map(|c| &c.env)
            .filter_map(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
            .map(|r| r.name.as_str())
            .chain(
                self.volumes
                    .iter()
                    .filter_map(|v| v.secret.as_ref())
                    .map(|s| s.secret_name.as_str()),
            )
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// Every document of `files`, read by the YAML library the checker itself uses (PyYAML) and
/// handed over as JSON, with the name of its file.
fn documents_of<T: for<'de> Deserialize<'de>>(files: &[PathBuf]) -> Vec<(String, T)> {
    let script = "import json, sys, yaml\n\
                  out = [[f, d] for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d]\n\
                  print(json.dumps(out))";
    let out = checker_python()
        .args(["-c", script])
        .args(files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let docs: Vec<(String, T)> = serde_json::from_slice(&out.stdout).unwrap();
    docs.into_iter()
        .map(|(f, d)| (file_name(Path::new(&f)).to_owned(), d))
        .collect()
}

fn objects() -> Vec<(String, Object)> {
    documents_of(&manifest_files())
}

#[test]
fn every_manifest_passes_the_schema_checker_in_strict_mode() {
    let files = manifest_files();
    let documents = objects().len();
    let out = run_checker(&files);
    let report = text(&out.stdout);
    assert!(
        out.status.success(),
        "{CHECKER_PACKAGE} refused deploy/kubernetes/:\n{report}{}",
        text(&out.stderr)
    );
    // A kind or apiVersion it has no schema for is only a warning to the checker: here it is a
    // failure, and every document must have been checked.
    for line in report.lines() {
        assert!(line.starts_with("INFO "), "{line}\n{report}");
    }
    let passed = report
        .lines()
        .filter(|l| l.contains(" passed for resource "))
        .count();
    assert_eq!(passed, documents, "{report}");
    let version = checker_python()
        .args(["-m", "kubernetes_validate", "--version"])
        .output()
        .unwrap();
    eprintln!(
        "{CHECKER_PACKAGE} {} checked {documents} objects against Kubernetes {KUBERNETES_VERSION}",
        text(&version.stdout).trim()
    );
}

#[test]
fn the_schema_checker_rejects_broken_manifests() {
    let original = std::fs::read_to_string(manifests_dir().join("worker.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A wrong type, and a misspelt field that only strict mode catches.
    for (name, from, to, named) in [
        (
            "replicas.yaml",
            "  replicas: 2\n",
            "  replicas: \"two\"\n",
            "replicas",
        ),
        (
            "unknown-field.yaml",
            "      hostUsers: false\n",
            "      hostUsers: false\n      hostUser: false\n",
            "hostUser",
        ),
    ] {
        assert_eq!(original.matches(from).count(), 1, "{from:?} in worker.yaml");
        let broken = dir.path().join(name);
        std::fs::write(&broken, original.replace(from, to)).unwrap();
        let out = run_checker(std::slice::from_ref(&broken));
        let report = text(&out.stdout);
        assert!(!out.status.success(), "{name} passed:\n{report}");
        let error = report
            .lines()
            .find(|l| l.starts_with("ERROR "))
            .unwrap_or_else(|| panic!("no ERROR line for {name}:\n{report}"));
        assert!(
            error.contains("deployment/airlock-worker") && error.contains(named),
            "{error}"
        );
    }
}

#[test]
fn the_kustomization_lists_every_manifest_but_the_examples() {
    let kustomization = manifests_dir().join("kustomization.yaml");
    let docs: Vec<(String, Kustomization)> = documents_of(&[kustomization]);
    let [(_, kustomization)] = docs.as_slice() else {
        panic!("one kustomization document");
    };
    let mut listed = kustomization.resources.clone();
    listed.sort();
    let expected: Vec<String> = manifest_files()
        .iter()
        .map(|p| file_name(p).to_owned())
        .filter(|n| !NOT_APPLIED.contains(&n.as_str()))
        .collect();
    assert_eq!(listed, expected);
    for name in NOT_APPLIED {
        assert!(manifests_dir().join(name).is_file(), "{name}");
    }
}

/// `bin`'s path: `airlock` is this package's binary, `airlock-broker` the broker package's.
fn binary(bin: &str) -> PathBuf {
    match bin {
        "airlock" => PathBuf::from(env!("CARGO_BIN_EXE_airlock")),
        other => airlock_testkit::bin::path(other),
    }
}

/// Whether `flag` appears in `help` as a whole option name (`--config <CONFIG>`, `--once`).
fn mentions_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let after = help[at + flag.len()..].chars().next();
        let before = help[..at].chars().last();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[test]
fn every_command_the_manifests_run_exists() {
    // What the manifests run: the binary, the leading words (the subcommand), the `--flags`
    // (a `--` ends them: what follows is the sandboxed command).
    let mut run = Vec::new();
    for (file, object) in objects() {
        let Some(pod) = object.pod() else { continue };
        for container in pod.all_containers() {
            let words: Vec<&str> = container
                .command
                .iter()
                .chain(&container.args)
                .map(String::as_str)
                .collect();
            let Some((&bin, rest)) = words.split_first() else {
                continue;
            };
            if bin != "airlock" && bin != "airlock-broker" {
                continue;
            }
            let rest: Vec<&str> = rest.iter().copied().take_while(|w| *w != "--").collect();
            let subcommand: Vec<&str> = rest
                .iter()
                .copied()
                .take_while(|w| !w.starts_with('-'))
                .collect();
            let flags: Vec<&str> = rest
                .iter()
                .filter(|w| w.starts_with("--"))
                .map(|w| w.split('=').next().unwrap_or(w))
                .collect();
            let at = format!(
                "{file}: {} container {}",
                object.metadata.name, container.name
            );
            let listed = COMMANDS_USED
                .iter()
                .find(|i| i.bin == bin && i.subcommand == subcommand.as_slice())
                .unwrap_or_else(|| {
                    panic!(
                        "{at} runs `{bin} {}`, not in COMMANDS_USED",
                        subcommand.join(" ")
                    )
                });
            for flag in flags {
                assert!(
                    listed.flags.contains(&flag),
                    "{at} passes {flag}, not in COMMANDS_USED"
                );
            }
            run.push(format!("{bin} {}", subcommand.join(" ")));
        }
    }
    for invocation in &COMMANDS_USED {
        let name = format!("{} {}", invocation.bin, invocation.subcommand.join(" "));
        assert!(
            run.contains(&name),
            "COMMANDS_USED lists `{name}`, which no manifest runs"
        );
        let out = Command::new(binary(invocation.bin))
            .args(invocation.subcommand)
            .arg("--help")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{name} --help` failed: {}",
            text(&out.stderr)
        );
        let help = text(&out.stdout);
        for flag in invocation.flags {
            assert!(
                mentions_flag(&help, flag),
                "`{name}` has no {flag}:\n{help}"
            );
        }
    }
}

fn config_map_file(objects: &[(String, Object)], map: &str, key: &str) -> String {
    objects
        .iter()
        .find(|(_, o)| o.kind == "ConfigMap" && o.metadata.name == map)
        .and_then(|(_, o)| o.data.get(key))
        .unwrap_or_else(|| panic!("ConfigMap {map} with {key}"))
        .clone()
}

#[test]
fn the_configuration_files_in_the_config_maps_parse() {
    let objects = objects();
    let broker_toml = config_map_file(&objects, "airlock-broker-config", "broker.toml");
    let config = airlock_broker::config::BrokerConfig::parse(&broker_toml, Path::new("/etc"))
        .unwrap_or_else(|e| panic!("broker.toml does not parse: {e}\n{broker_toml}"));
    assert!(config.repositories.contains_key("acme/widgets"));
    assert!(
        matches!(
            config.state_db,
            airlock_broker::config::StateDb::Postgres { .. }
        ),
        "{broker_toml}"
    );
    let airlock_toml = config_map_file(&objects, "airlock-worker-config", "airlock.toml");
    let config =
        airlock_supervisor::config::Config::parse(&airlock_toml, Path::new("airlock.toml"))
            .unwrap_or_else(|e| panic!("airlock.toml does not parse: {e}\n{airlock_toml}"));
    let endpoint = config.broker.endpoint().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(
            endpoint,
            Some(airlock_supervisor::transport::BrokerEndpoint::Tls(_))
        ),
        "{airlock_toml}"
    );
    assert_eq!(
        config.broker.tree_transfer(),
        airlock_protocol::TreeTransfer::Bytes
    );
}

#[test]
fn only_the_broker_pod_reads_the_forge_push_token() {
    // Which workloads may read each Secret: the push token, the broker's TLS key, the page's
    // token and the database password never reach a worker; the model key never the broker.
    let readers: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("airlock-forge", &["Deployment/airlock-broker"][..]),
        ("airlock-broker-tls", &["Deployment/airlock-broker"][..]),
        ("airlock-ui-token", &["Deployment/airlock-broker"][..]),
        (
            "airlock-postgres",
            &["Deployment/airlock-broker", "StatefulSet/postgres"][..],
        ),
        (
            "airlock-worker",
            &["Deployment/airlock-worker", "Job/airlock-worker-once"][..],
        ),
        (
            "airlock-worker-tls",
            &["Deployment/airlock-worker", "Job/airlock-worker-once"][..],
        ),
    ]);
    let mut forge_readers = Vec::new();
    for (file, object) in objects() {
        let Some(pod) = object.pod() else { continue };
        let workload = format!("{}/{}", object.kind, object.metadata.name);
        for secret in pod.secrets() {
            let allowed = readers.get(secret).unwrap_or_else(|| {
                panic!("{file}: {workload} reads Secret {secret}, not in the table")
            });
            assert!(
                allowed.contains(&workload.as_str()),
                "{file}: {workload} reads {secret}"
            );
            if secret == "airlock-forge" {
                forge_readers.push(workload.clone());
            }
        }
    }
    assert_eq!(forge_readers, ["Deployment/airlock-broker"]);
}
