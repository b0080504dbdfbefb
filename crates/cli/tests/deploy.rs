//! `deploy/`: the Kubernetes manifests against the Agones and Kubernetes fields they use
//! and against each other, the Dockerfile, the systemd unit, the sysctl drop-in, and the
//! Grafana dashboard against the metrics the server exports. Nothing here starts a
//! container or a cluster: the files are read, and the `tickforge` binary is asked for its
//! flags and its drop-in.

#[path = "deploy/dashboard.rs"]
mod dashboard;
#[path = "deploy/promql.rs"]
mod promql;
#[path = "deploy/schema.rs"]
mod schema;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    let path = repo().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every document of every `deploy/k8s/*.yaml`, with the file it came from.
fn manifests() -> Vec<(String, Yaml)> {
    let dir = repo().join("deploy/k8s");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let loaded = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        docs.extend(loaded.into_iter().map(|d| (name.clone(), d)));
    }
    docs
}

/// The one manifest of `kind`.
fn manifest(kind: &str) -> Yaml {
    let mut found: Vec<Yaml> = manifests()
        .into_iter()
        .filter(|(_, d)| d["kind"].as_str() == Some(kind))
        .map(|(_, d)| d)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} in deploy/k8s");
    found.pop().unwrap()
}

fn int(y: &Yaml, what: &str) -> i64 {
    y.as_i64()
        .unwrap_or_else(|| panic!("{what}: not an integer: {y:?}"))
}

fn string<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str()
        .unwrap_or_else(|| panic!("{what}: not a string: {y:?}"))
}

/// The flags `tickforge serve --help` lists.
fn serve_flags() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_tickforge"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let flags: BTreeSet<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(String::from)
        .collect();
    assert!(flags.contains("--drain-timeout-s"), "{help}");
    flags
}

/// `serve` flags that take no value.
const SWITCHES: [&str; 5] = [
    "--agones",
    "--quiet",
    "--json",
    "--admin-auth-probes",
    "--help",
];

/// `--flag value` pairs of a `serve` command line after `serve` (a switch maps to "").
fn flag_values(args: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < args.len() {
        let flag = args[i];
        assert!(flag.starts_with("--"), "`{flag}` is not a flag");
        if SWITCHES.contains(&flag) {
            out.insert(flag.to_string(), String::new());
            i += 1;
        } else {
            let value = args
                .get(i + 1)
                .unwrap_or_else(|| panic!("{flag} has no value"));
            out.insert(flag.to_string(), value.to_string());
            i += 2;
        }
    }
    out
}

/// Flags of `flags` that `serve` does not take.
fn unknown_flags<'a>(flags: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let known = serve_flags();
    flags
        .into_iter()
        .filter(|f| !known.contains(*f))
        .cloned()
        .collect()
}

fn port_of(addr: &str) -> i64 {
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

#[test]
fn every_manifest_holds_to_the_schema_of_its_kind() {
    let docs = manifests();
    let mut problems = Vec::new();
    for (file, doc) in &docs {
        for e in schema::validate(doc) {
            problems.push(format!("{file}: {e}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let kinds: BTreeSet<&str> = docs
        .iter()
        .filter_map(|(_, d)| d["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "Fleet",
            "FleetAutoscaler",
            "GameServerAllocation",
            "PodMonitor",
            "Secret"
        ])
    );
}

#[test]
fn the_schema_refuses_a_broken_fleet() {
    let text = read("deploy/k8s/fleet.yaml")
        .replace("      counters:\n", "      counter:\n")
        .replace("portPolicy: Dynamic", "portPolicy: dynamic")
        .replace(
            "terminationGracePeriodSeconds: 90",
            "terminationGracePeriodSecond: 90",
        );
    let doc = &YamlLoader::load_from_str(&text).unwrap()[0];
    let errors = schema::validate(doc);
    let paths: Vec<&str> = errors
        .iter()
        .map(|e| e.split(':').next().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "spec.template.spec.ports[0].portPolicy",
            "spec.template.spec.counter",
            "spec.template.spec.template.spec.terminationGracePeriodSecond",
        ],
        "{errors:#?}"
    );
    // A key given twice is refused by the YAML reader itself, not silently overwritten.
    let twice = "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nmetadata: {name: b}\n";
    assert!(YamlLoader::load_from_str(twice).is_err());
}

#[test]
fn the_fleet_runs_the_server_as_the_rest_of_deploy_expects() {
    let fleet = manifest("Fleet");
    let gs = &fleet["spec"]["template"]["spec"];
    let pod = &gs["template"]["spec"];
    let name = string(&gs["container"], "spec.template.spec.container");
    let container = pod["containers"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no container named {name}"));
    let args: Vec<&str> = container["args"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|a| string(a, "args"))
        .collect();
    assert_eq!(args[0], "serve");
    let flags = flag_values(&args[1..]);
    assert_eq!(unknown_flags(flags.keys()), Vec::<String>::new());
    assert!(flags.contains_key("--agones"));

    // The game port Agones exposes is the one the server binds, over UDP.
    let game = &gs["ports"][0];
    assert_eq!(string(&game["protocol"], "protocol"), "UDP");
    assert_eq!(
        int(&game["containerPort"], "containerPort"),
        port_of(&flags["--bind"])
    );
    assert_eq!(flags["--workers"], "1", "one game port, one worker");
    // The probes reach the admin server on the port it binds.
    let admin = container["ports"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str() == Some("admin"))
        .expect("a container port named admin");
    assert_eq!(
        int(&admin["containerPort"], "admin"),
        port_of(&flags["--admin-bind"])
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(
            container[probe]["httpGet"]["path"].as_str(),
            Some("/healthz")
        );
        assert_eq!(container[probe]["httpGet"]["port"].as_str(), Some("admin"));
    }

    // A drain finishes before the kubelet kills the pod, and the liveness probe (a draining
    // server's /healthz answers 503) does not restart it first.
    let drain: f64 = flags["--drain-timeout-s"].parse().unwrap();
    let grace = int(&pod["terminationGracePeriodSeconds"], "grace") as f64;
    assert!(grace > drain, "grace {grace} s ≤ drain {drain} s");
    let live = &container["livenessProbe"];
    let tolerated = int(&live["failureThreshold"], "failureThreshold")
        * int(&live["periodSeconds"], "periodSeconds");
    assert!(
        tolerated as f64 > drain,
        "liveness gives up after {tolerated} s"
    );

    // The rooms a GameServer offers are the matches its workers will host.
    let rooms = int(&gs["counters"]["rooms"]["capacity"], "rooms capacity");
    let per_worker: i64 = flags["--max-matches-per-worker"].parse().unwrap();
    let workers: i64 = flags["--workers"].parse().unwrap();
    assert_eq!(rooms, per_worker * workers);
    assert_eq!(int(&gs["counters"]["rooms"]["count"], "rooms count"), 0);

    // The key and the admin token come from the Secret, under keys it has.
    let secret = manifest("Secret");
    let env = container["env"].as_vec().unwrap();
    for var in ["TICKFORGE_PRIVATE_KEY", "TICKFORGE_ADMIN_TOKEN"] {
        let e = env
            .iter()
            .find(|e| e["name"].as_str() == Some(var))
            .unwrap_or_else(|| panic!("{var} not set"));
        let from = &e["valueFrom"]["secretKeyRef"];
        assert_eq!(from["name"], secret["metadata"]["name"], "{var}");
        assert!(
            !secret["stringData"][string(&from["key"], "key")].is_badvalue(),
            "{var}: the Secret has no key {:?}",
            from["key"]
        );
    }

    // Unprivileged, as the image's user, writing only where the results file goes.
    let pod_security = &pod["securityContext"];
    assert_eq!(pod_security["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(
        int(&pod_security["runAsUser"], "runAsUser"),
        dockerfile_uid(&read("deploy/Dockerfile")).unwrap()
    );
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(security["readOnlyRootFilesystem"].as_bool(), Some(true));
    let results = Path::new(&flags["--results-file"]);
    let mounts: Vec<&str> = container["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|m| string(&m["mountPath"], "mountPath"))
        .collect();
    assert!(
        mounts.iter().any(|m| results.starts_with(m)),
        "{} is on no volume: {mounts:?}",
        results.display()
    );
}

#[test]
fn the_autoscaler_and_the_allocation_pack_the_fleets_rooms() {
    let fleet = manifest("Fleet");
    let fleet_name = string(&fleet["metadata"]["name"], "fleet name");
    let counters = &fleet["spec"]["template"]["spec"]["counters"];
    let per_server = int(&counters["rooms"]["capacity"], "rooms capacity");

    let fas = manifest("FleetAutoscaler");
    assert_eq!(fas["spec"]["fleetName"].as_str(), Some(fleet_name));
    let policy = &fas["spec"]["policy"];
    assert_eq!(policy["type"].as_str(), Some("Counter"));
    let counter = &policy["counter"];
    let key = string(&counter["key"], "counter.key");
    assert!(
        !counters[key].is_badvalue(),
        "the Fleet has no Counter {key}"
    );
    // Agones' CounterPolicy validation (fleetautoscaler.go, ValidateCounterPolicy), for an
    // integer bufferSize.
    let buffer = int(&counter["bufferSize"], "bufferSize");
    let min = int(&counter["minCapacity"], "minCapacity");
    let max = int(&counter["maxCapacity"], "maxCapacity");
    assert!(buffer > 0);
    assert!(min <= max && max >= buffer);
    assert!(min == 0 || min >= buffer);
    // In whole GameServers, so the bounds are capacities the Fleet can have.
    for (what, v) in [("minCapacity", min), ("maxCapacity", max)] {
        assert_eq!(
            v % per_server,
            0,
            "{what} {v} is not whole GameServers of {per_server}"
        );
    }

    let gsa = manifest("GameServerAllocation");
    let spec = &gsa["spec"];
    let states: Vec<&str> = spec["selectors"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|s| {
            assert_eq!(
                s["matchLabels"]["agones.dev/fleet"].as_str(),
                Some(fleet_name)
            );
            assert!(int(&s["counters"][key]["minAvailable"], "minAvailable") >= 1);
            string(&s["gameServerState"], "gameServerState")
        })
        .collect();
    assert_eq!(states, ["Allocated", "Ready"], "part-full servers first");
    let priority = &spec["priorities"][0];
    assert_eq!(priority["type"].as_str(), Some("Counter"));
    assert_eq!(priority["key"].as_str(), Some(key));
    assert_eq!(
        priority["order"].as_str(),
        Some("Ascending"),
        "fullest first"
    );
    assert_eq!(spec["counters"][key]["action"].as_str(), Some("Increment"));
    assert_eq!(int(&spec["counters"][key]["amount"], "amount"), 1);

    // The PodMonitor selects the pods (the template's labels and Agones' role label, which
    // gameserver.go's podObjectMeta sets) and scrapes the admin port.
    let pm = manifest("PodMonitor");
    let pod_template = &fleet["spec"]["template"]["spec"]["template"];
    let pod_labels = pod_template["metadata"]["labels"].as_hash().unwrap();
    for (k, v) in pm["spec"]["selector"]["matchLabels"].as_hash().unwrap() {
        let agones_role = k.as_str() == Some("agones.dev/role") && v.as_str() == Some("gameserver");
        assert!(
            agones_role || pod_labels.get(k) == Some(v),
            "the pods do not carry {k:?}: {v:?}"
        );
    }
    let ports: Vec<&str> = pod_template["spec"]["containers"][0]["ports"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|p| string(&p["name"], "port name"))
        .collect();
    for e in pm["spec"]["podMetricsEndpoints"].as_vec().unwrap() {
        assert!(ports.contains(&string(&e["port"], "port")), "{ports:?}");
        assert_eq!(e["path"].as_str(), Some("/metrics"));
    }
}

/// Instructions of a Dockerfile, continuation lines joined and comments dropped, as
/// `(INSTRUCTION, arguments)`.
fn dockerfile_instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let (word, rest) = current
                    .split_once(char::is_whitespace)
                    .unwrap_or((&current, ""));
                out.push((word.to_ascii_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

/// The runtime stage's user id, when it is a number.
fn dockerfile_uid(text: &str) -> Option<i64> {
    let instructions = dockerfile_instructions(text);
    let (_, user) = instructions.iter().rev().find(|(i, _)| i == "USER")?;
    user.split(':').next()?.parse().ok()
}

/// What keeps `text` from being a multi-stage build of tickforge that runs it as a user
/// other than root.
fn dockerfile_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    struct Stage {
        name: String,
        image: String,
        instructions: Vec<(String, String)>,
    }
    let mut stages: Vec<Stage> = Vec::new();
    for (instruction, args) in dockerfile_instructions(text) {
        if instruction == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => name.to_string(),
                _ => String::new(),
            };
            stages.push(Stage {
                name,
                image: words[0].to_string(),
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push((instruction, args));
        }
    }
    if stages.len() < 2 {
        return vec![format!(
            "{} stage(s): want a build stage and a runtime stage",
            stages.len()
        )];
    }
    let Stage {
        name: build_name,
        image: build_image,
        instructions: build,
    } = &stages[0];
    if !build_image.starts_with("rust:") {
        problems.push(format!(
            "the build stage starts from {build_image}, not rust:"
        ));
    }
    if !build
        .iter()
        .any(|(i, a)| i == "RUN" && a.contains("cargo build --release --locked -p tickforge"))
    {
        problems
            .push("the build stage never runs cargo build --release --locked -p tickforge".into());
    }
    let runtime = &stages.last().unwrap().instructions;
    let find = |want: &str| {
        runtime
            .iter()
            .rev()
            .find(|(i, _)| i == want)
            .map(|(_, a)| a.as_str())
    };
    match find("USER").map(|u| u.split(':').next().unwrap_or("")) {
        None => problems.push("the runtime stage has no USER: it runs as root".into()),
        Some("root" | "0") => problems.push("the runtime stage runs as root".into()),
        Some(_) => {}
    }
    let entrypoint: Option<Vec<String>> =
        find("ENTRYPOINT").and_then(|e| serde_json::from_str(e).ok());
    let binary = match entrypoint.as_deref() {
        Some([first, ..]) if first.ends_with("/tickforge") => first.clone(),
        _ => {
            problems.push("the ENTRYPOINT is not the exec form of a tickforge binary".into());
            String::new()
        }
    };
    let copied = runtime.iter().any(|(i, a)| {
        i == "COPY" && a.contains(&format!("--from={build_name}")) && a.ends_with(&binary)
    });
    if !copied {
        problems.push(format!(
            "the runtime stage does not copy {binary} from the build stage"
        ));
    }
    if !find("EXPOSE").is_some_and(|e| e.split_whitespace().any(|p| p.ends_with("/udp"))) {
        problems.push("no UDP port exposed".into());
    }
    problems
}

#[test]
fn the_dockerfile_builds_in_one_stage_and_runs_unprivileged_in_another() {
    let text = read("deploy/Dockerfile");
    assert_eq!(dockerfile_problems(&text), Vec::<String>::new());
    assert_ne!(dockerfile_uid(&text), Some(0));
    // The toolchain it builds with is at least the workspace's minimum.
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap()).collect() };
    let arg = text
        .lines()
        .find_map(|l| l.strip_prefix("ARG RUST_VERSION="))
        .expect("ARG RUST_VERSION");
    let workspace = read("Cargo.toml");
    let minimum = workspace
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    assert!(version(arg) >= version(minimum), "{arg} < {minimum}");
    // The context leaves out the build output and history, and keeps what cargo needs.
    let ignore = read(".dockerignore");
    let ignored: BTreeSet<&str> = ignore
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    for out in ["target", ".git"] {
        assert!(ignored.contains(out), "{out} is sent to the daemon");
    }
    for needed in ["crates", "maps", "Cargo.toml", "Cargo.lock", ".cargo"] {
        assert!(
            !ignored.contains(needed),
            "{needed} is left out of the context"
        );
    }
}

#[test]
fn the_dockerfile_check_refuses_a_root_single_stage_image() {
    let single = "FROM rust:1.95\nRUN cargo build --release --locked -p tickforge\n\
                  ENTRYPOINT [\"/usr/local/bin/tickforge\"]\n";
    assert_eq!(
        dockerfile_problems(single),
        ["1 stage(s): want a build stage and a runtime stage"]
    );
    let root = read("deploy/Dockerfile").replace("USER 65532:65532", "USER root");
    assert_eq!(
        dockerfile_problems(&root),
        ["the runtime stage runs as root"]
    );
    let not_copied =
        read("deploy/Dockerfile").replace("--from=build /out/tickforge", "/out/tickforge");
    assert_eq!(
        dockerfile_problems(&not_copied),
        ["the runtime stage does not copy /usr/local/bin/tickforge from the build stage"]
    );
}

/// A unit file's settings by section, continuation lines joined: `[(section, key, value)]`.
fn unit_settings(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty()
            && (trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';'))
        {
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let (k, v) = current.split_once('=').expect("key=value");
                out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

/// `KEY=value` lines of an EnvironmentFile.
fn env_file(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// A cpulist (`2-7`, `2,3,4`, `0-1,4`) as CPU numbers.
fn cpus(list: &str) -> BTreeSet<u32> {
    list.split([',', ' '])
        .filter(|p| !p.is_empty())
        .flat_map(|p| match p.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<u32>>(),
            None => vec![p.parse().unwrap()],
        })
        .collect()
}

/// What keeps the unit from draining on stop, on its cores, at its priority, unprivileged.
fn unit_problems(unit: &str, env: &str) -> Vec<String> {
    let settings = unit_settings(unit);
    let env = env_file(env);
    let get = |key: &str| -> Option<&str> {
        settings
            .iter()
            .rev()
            .find(|(s, k, _)| s == "Service" && k == key)
            .map(|(_, _, v)| v.as_str())
    };
    let mut problems = Vec::new();
    let mut want = |key: &str, value: &str| {
        if get(key) != Some(value) {
            problems.push(format!("{key}={:?}, want {value}", get(key)));
        }
    };
    want("KillSignal", "SIGTERM");
    want("Restart", "on-failure");
    want("NoNewPrivileges", "yes");
    want("ProtectSystem", "strict");
    want("DynamicUser", "yes");
    let exec = get("ExecStart").unwrap_or("");
    let words: Vec<String> = exec
        .split_whitespace()
        .map(|w| {
            // ${VAR} as systemd expands it from the EnvironmentFile.
            match w.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
                Some(var) => env.get(var).cloned().unwrap_or_else(|| {
                    problems.push(format!(
                        "ExecStart uses ${{{var}}}, which the env file lacks"
                    ));
                    String::new()
                }),
                None => w.to_string(),
            }
        })
        .collect();
    if words.get(1).map(String::as_str) != Some("serve") {
        return vec![format!("ExecStart is not `tickforge serve`: {exec}")];
    }
    let args: Vec<&str> = words[2..].iter().map(String::as_str).collect();
    let flags = flag_values(&args);
    for f in unknown_flags(flags.keys()) {
        problems.push(format!("ExecStart: serve takes no {f}"));
    }
    let number = |v: Option<&str>| -> f64 {
        v.unwrap_or("")
            .trim_end_matches('s')
            .parse()
            .unwrap_or(f64::NAN)
    };
    let drain = number(flags.get("--drain-timeout-s").map(String::as_str));
    let stop = number(get("TimeoutStopSec"));
    if stop.is_nan() || drain.is_nan() || stop <= drain {
        problems.push(format!(
            "TimeoutStopSec {stop} s does not outlast the drain ({drain} s)"
        ));
    }
    let affinity = cpus(get("CPUAffinity").unwrap_or(""));
    let cores = cpus(flags.get("--cores").map_or("", String::as_str));
    if cores.is_empty() || !cores.is_subset(&affinity) {
        problems.push(format!(
            "--cores {cores:?} not within CPUAffinity {affinity:?}"
        ));
    }
    let rt = number(flags.get("--rt-priority").map(String::as_str));
    let limit = number(get("LimitRTPRIO"));
    if rt.is_nan() || limit.is_nan() || rt > limit {
        problems.push(format!("--rt-priority {rt} above LimitRTPRIO {limit}"));
    }
    if get("RestrictRealtime") == Some("yes") {
        problems.push("RestrictRealtime=yes refuses SCHED_FIFO".into());
    }
    let state = get("StateDirectory").unwrap_or("");
    let results = flags.get("--results-file").map_or("", String::as_str);
    if state.is_empty() || !results.starts_with(&format!("%S/{state}/")) {
        problems.push(format!(
            "--results-file {results} is not in StateDirectory {state}"
        ));
    }
    problems
}

#[test]
fn the_systemd_unit_drains_within_its_stop_timeout_on_its_cores() {
    let unit = read("deploy/systemd/tickforge.service");
    let env = read("deploy/systemd/tickforge.env");
    assert_eq!(unit_problems(&unit, &env), Vec::<String>::new());
    // The same check refuses a unit that would kill a drain or pin outside its cores.
    let short = unit
        .replace("TimeoutStopSec=90", "TimeoutStopSec=30")
        .replace("CPUAffinity=2-7", "CPUAffinity=0-1");
    assert_eq!(
        unit_problems(&short, &env),
        [
            "TimeoutStopSec 30 s does not outlast the drain (60 s)",
            "--cores {2, 3, 4, 5} not within CPUAffinity {0, 1}",
        ]
    );
    let misspelled = unit.replace("--drain-timeout-s", "--drain-timeout");
    assert!(
        unit_problems(&misspelled, &env)
            .contains(&"ExecStart: serve takes no --drain-timeout".to_string()),
        "{:?}",
        unit_problems(&misspelled, &env)
    );
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        // Straight to standard error: libtest shows a passing test's `eprintln!` only under
        // --nocapture, and a skip must show in every run.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: systemd_analyze_verifies_the_unit: no systemd-analyze on this host"
        );
        return;
    }
    // Verified as installed, with the binary these tests built in place of
    // /usr/local/bin/tickforge (verify wants an executable there).
    let dir = std::env::temp_dir().join(format!("tickforge-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unit = read("deploy/systemd/tickforge.service")
        .replace("/usr/local/bin/tickforge", env!("CARGO_BIN_EXE_tickforge"));
    let path = dir.join("tickforge.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Unknown or misspelled keys are only warned about: any word from it fails the test.
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
}

#[test]
fn the_sysctl_drop_in_is_what_doctor_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_tickforge"))
        .args(["doctor", "--sysctl"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(printed.contains("\nnet.core.rmem_max = "), "{printed}");
    assert_eq!(
        read("deploy/sysctl/90-tickforge.conf"),
        printed,
        "regenerate with: tickforge doctor --sysctl > deploy/sysctl/90-tickforge.conf"
    );
}

#[test]
fn every_dashboard_query_names_a_metric_the_server_exports() {
    let dashboard: Value = serde_json::from_str(&read("deploy/grafana/tickforge.json")).unwrap();
    let exported = dashboard::exported();
    let queries = dashboard::queries(&dashboard);
    assert_eq!(
        dashboard::problems(&queries, &exported),
        Vec::<String>::new()
    );

    // The issue's list: frame time and its categories, late ticks and hitches, matches and
    // players, bandwidth and packets, drops by reason; frame time per round and budget
    // violations by category.
    let used: BTreeSet<String> = queries
        .iter()
        .flat_map(|(_, e, _)| promql::refs(e).unwrap().selectors)
        .map(|s| s.metric)
        .collect();
    for metric in [
        "tickforge_match_frame_seconds_bucket",
        "tickforge_frame_seconds_bucket",
        "tickforge_late_ticks_total",
        "tickforge_hitches_total",
        "tickforge_matches",
        "tickforge_players_connected",
        "tickforge_bytes_total",
        "tickforge_packets_total",
        "tickforge_datagrams_dropped_total",
        "tickforge_round_frame_seconds_sum",
        "tickforge_budget_violations_total",
        // And what replication left out, for a crowd's operators.
        "tickforge_replication_left_out_total",
        "tickforge_replication_max_staleness_ticks",
    ] {
        assert!(used.contains(metric), "no panel shows {metric}");
    }
}

#[test]
fn the_dashboard_check_refuses_names_the_server_does_not_export() {
    let exported = dashboard::exported();
    let q = |expr: &str| vec![("panel `t`".to_string(), expr.to_string(), true)];
    for (expr, problem) in [
        (
            r#"rate(tickforge_late_ticks{instance=~"$instance"}[5m])"#,
            "panel `t`: tickforge_late_ticks is not exported",
        ),
        (
            r#"sum by (reasons) (rate(tickforge_datagrams_dropped_total{instance=~"$instance"}[5m]))"#,
            "panel `t`: no metric has the label reasons",
        ),
        (
            r#"tickforge_match_frame_seconds_bucket{instance=~"$instance",le="0.0002"}"#,
            "panel `t`: tickforge_match_frame_seconds_bucket has no bucket le=\"0.0002\"",
        ),
        (
            r#"tickforge_bytes_total{instance=~"$instance",dir="in"}"#,
            "panel `t`: tickforge_bytes_total has no label dir",
        ),
        (
            "tickforge_matches",
            "panel `t`: tickforge_matches is not filtered by $instance",
        ),
        ("vector(1)", "panel `t`: names no metric: vector(1)"),
    ] {
        assert_eq!(
            dashboard::problems(&q(expr), &exported),
            [problem],
            "{expr}"
        );
    }
}

#[test]
fn the_dashboard_is_one_grafana_dashboard_over_one_prometheus_variable() {
    let d: Value = serde_json::from_str(&read("deploy/grafana/tickforge.json")).unwrap();
    assert_eq!(d["uid"], "tickforge");
    let variables: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "instance"]);
    let mut ids = BTreeSet::new();
    for p in d["panels"].as_array().unwrap() {
        assert!(
            ids.insert(p["id"].as_i64().unwrap()),
            "panel id {} twice",
            p["id"]
        );
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().unwrap();
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}");
        let refs: BTreeSet<&str> = targets
            .iter()
            .map(|t| t["refId"].as_str().unwrap())
            .collect();
        assert_eq!(refs.len(), targets.len(), "{title}: a refId twice");
        let grid = &p["gridPos"];
        assert!(
            grid["x"].as_i64().unwrap() + grid["w"].as_i64().unwrap() <= 24,
            "{title}"
        );
    }
}
