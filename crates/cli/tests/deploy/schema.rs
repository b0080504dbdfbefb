//! The Kubernetes, Agones and Prometheus Operator fields the manifests under `deploy/k8s`
//! may use, and a validator that holds each YAML document to them.
//!
//! Not the whole API: the fields these manifests use and a few beside them, each spelled as
//! its Go struct's `json:` tag spells it, so a misspelled or misplaced key fails here
//! instead of being dropped by the API server's pruning. Where each list comes from:
//!
//! - Agones (googleforgames/agones, `pkg/apis/`): `agones/v1/fleet.go` (FleetSpec),
//!   `agones/v1/gameserver.go` (GameServerTemplateSpec, GameServerSpec, GameServerPort,
//!   Health, SdkServer, CounterStatus, the PortPolicy constants), `agones/v1/common.go`
//!   (Priority and its Counter/List, Ascending/Descending, Increment/Decrement constants),
//!   `scheduling.go` (Packed, Distributed), `autoscaling/v1/fleetautoscaler.go`
//!   (FleetAutoscalerSpec, FleetAutoscalerPolicy, CounterPolicy, BufferPolicy,
//!   FleetAutoscalerSync, FixedIntervalSync and the policy types),
//!   `allocation/v1/gameserverallocation.go` (GameServerAllocationSpec,
//!   GameServerSelector, CounterSelector, CounterAction, MetaPatch).
//! - Kubernetes, as Agones vendors it: `k8s.io/api/core/v1/types.go` (PodTemplateSpec,
//!   PodSpec, Container, ContainerPort, EnvVar, EnvVarSource, SecretKeySelector, Probe,
//!   HTTPGetAction, ResourceRequirements, SecurityContext, PodSecurityContext,
//!   Capabilities, SeccompProfile, Volume, EmptyDirVolumeSource, VolumeMount, Secret),
//!   `k8s.io/api/apps/v1/types.go` (DeploymentStrategy, RollingUpdateDeployment),
//!   `k8s.io/apimachinery/pkg/apis/meta/v1/types.go` (ObjectMeta, LabelSelector).
//! - Prometheus Operator (`pkg/apis/monitoring/v1/podmonitor_types.go`): PodMonitorSpec,
//!   PodMetricsEndpoint.

use yaml_rust2::Yaml;

/// What a value may be.
#[derive(Debug)]
pub enum Shape {
    /// A mapping with these keys and no others.
    Fields(&'static [Field]),
    /// A mapping from any name (a Counter's, a label's) to values of one shape.
    Keyed(&'static Shape),
    List(&'static Shape),
    Str,
    Int,
    Bool,
    /// An integer, or a string such as `25%` or a port's name (Kubernetes' IntOrString).
    IntOrStr,
    /// A resource quantity: `"1"`, `500m`, `512Mi`, or a plain number.
    Quantity,
    /// One of these strings.
    OneOf(&'static [&'static str]),
}

/// One key of a [`Shape::Fields`] mapping.
#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub shape: &'static Shape,
    pub required: bool,
}

const fn opt(name: &'static str, shape: &'static Shape) -> Field {
    Field {
        name,
        shape,
        required: false,
    }
}

const fn req(name: &'static str, shape: &'static Shape) -> Field {
    Field {
        name,
        shape,
        required: true,
    }
}

const STR: Shape = Shape::Str;
const INT: Shape = Shape::Int;
const BOOL: Shape = Shape::Bool;
const INT_OR_STR: Shape = Shape::IntOrStr;
const QUANTITY: Shape = Shape::Quantity;
const STRINGS: Shape = Shape::List(&STR);
const STRING_MAP: Shape = Shape::Keyed(&STR);

// meta/v1
const OBJECT_META: Shape = Shape::Fields(&[
    opt("name", &STR),
    opt("generateName", &STR),
    opt("namespace", &STR),
    opt("labels", &STRING_MAP),
    opt("annotations", &STRING_MAP),
]);
const LABEL_SELECTOR_REQUIREMENT: Shape = Shape::Fields(&[
    req("key", &STR),
    req(
        "operator",
        &Shape::OneOf(&["In", "NotIn", "Exists", "DoesNotExist"]),
    ),
    opt("values", &STRINGS),
]);
const LABEL_SELECTOR: Shape = Shape::Fields(&[
    opt("matchLabels", &STRING_MAP),
    opt(
        "matchExpressions",
        &Shape::List(&LABEL_SELECTOR_REQUIREMENT),
    ),
]);

// core/v1
const PROTOCOL: Shape = Shape::OneOf(&["UDP", "TCP", "SCTP"]);
const CONTAINER_PORT: Shape = Shape::Fields(&[
    opt("name", &STR),
    req("containerPort", &INT),
    opt("hostPort", &INT),
    opt("protocol", &PROTOCOL),
]);
const SECRET_KEY_SELECTOR: Shape =
    Shape::Fields(&[req("name", &STR), req("key", &STR), opt("optional", &BOOL)]);
const ENV_VAR: Shape = Shape::Fields(&[
    req("name", &STR),
    opt("value", &STR),
    opt(
        "valueFrom",
        &Shape::Fields(&[opt("secretKeyRef", &SECRET_KEY_SELECTOR)]),
    ),
]);
const PROBE: Shape = Shape::Fields(&[
    opt(
        "httpGet",
        &Shape::Fields(&[
            opt("path", &STR),
            req("port", &INT_OR_STR),
            opt("scheme", &Shape::OneOf(&["HTTP", "HTTPS"])),
        ]),
    ),
    opt("initialDelaySeconds", &INT),
    opt("timeoutSeconds", &INT),
    opt("periodSeconds", &INT),
    opt("successThreshold", &INT),
    opt("failureThreshold", &INT),
]);
const RESOURCE_REQUIREMENTS: Shape = Shape::Fields(&[
    opt("requests", &Shape::Keyed(&QUANTITY)),
    opt("limits", &Shape::Keyed(&QUANTITY)),
]);
const SECCOMP_PROFILE: Shape = Shape::Fields(&[
    req(
        "type",
        &Shape::OneOf(&["RuntimeDefault", "Localhost", "Unconfined"]),
    ),
    opt("localhostProfile", &STR),
]);
const SECURITY_CONTEXT: Shape = Shape::Fields(&[
    opt(
        "capabilities",
        &Shape::Fields(&[opt("add", &STRINGS), opt("drop", &STRINGS)]),
    ),
    opt("privileged", &BOOL),
    opt("runAsUser", &INT),
    opt("runAsGroup", &INT),
    opt("runAsNonRoot", &BOOL),
    opt("readOnlyRootFilesystem", &BOOL),
    opt("allowPrivilegeEscalation", &BOOL),
    opt("seccompProfile", &SECCOMP_PROFILE),
]);
const POD_SECURITY_CONTEXT: Shape = Shape::Fields(&[
    opt("runAsUser", &INT),
    opt("runAsGroup", &INT),
    opt("runAsNonRoot", &BOOL),
    opt("fsGroup", &INT),
    opt("seccompProfile", &SECCOMP_PROFILE),
]);
const VOLUME_MOUNT: Shape = Shape::Fields(&[
    req("name", &STR),
    req("mountPath", &STR),
    opt("readOnly", &BOOL),
    opt("subPath", &STR),
]);
const VOLUME: Shape = Shape::Fields(&[
    req("name", &STR),
    opt(
        "emptyDir",
        &Shape::Fields(&[opt("medium", &STR), opt("sizeLimit", &QUANTITY)]),
    ),
]);
const CONTAINER: Shape = Shape::Fields(&[
    req("name", &STR),
    req("image", &STR),
    opt(
        "imagePullPolicy",
        &Shape::OneOf(&["Always", "IfNotPresent", "Never"]),
    ),
    opt("command", &STRINGS),
    opt("args", &STRINGS),
    opt("env", &Shape::List(&ENV_VAR)),
    opt("ports", &Shape::List(&CONTAINER_PORT)),
    opt("readinessProbe", &PROBE),
    opt("livenessProbe", &PROBE),
    opt("startupProbe", &PROBE),
    opt("resources", &RESOURCE_REQUIREMENTS),
    opt("securityContext", &SECURITY_CONTEXT),
    opt("volumeMounts", &Shape::List(&VOLUME_MOUNT)),
]);
const POD_SPEC: Shape = Shape::Fields(&[
    req("containers", &Shape::List(&CONTAINER)),
    opt("terminationGracePeriodSeconds", &INT),
    opt("securityContext", &POD_SECURITY_CONTEXT),
    opt("serviceAccountName", &STR),
    opt("automountServiceAccountToken", &BOOL),
    opt("nodeSelector", &STRING_MAP),
    opt("priorityClassName", &STR),
    opt("volumes", &Shape::List(&VOLUME)),
]);
const POD_TEMPLATE_SPEC: Shape =
    Shape::Fields(&[opt("metadata", &OBJECT_META), req("spec", &POD_SPEC)]);

// apps/v1
const DEPLOYMENT_STRATEGY: Shape = Shape::Fields(&[
    opt("type", &Shape::OneOf(&["RollingUpdate", "Recreate"])),
    opt(
        "rollingUpdate",
        &Shape::Fields(&[
            opt("maxSurge", &INT_OR_STR),
            opt("maxUnavailable", &INT_OR_STR),
        ]),
    ),
]);

// agones.dev/v1
const SCHEDULING: Shape = Shape::OneOf(&["Packed", "Distributed"]);
const PRIORITY: Shape = Shape::Fields(&[
    req("type", &Shape::OneOf(&["Counter", "List"])),
    req("key", &STR),
    req("order", &Shape::OneOf(&["Ascending", "Descending"])),
]);
const GAME_SERVER_PORT: Shape = Shape::Fields(&[
    opt("name", &STR),
    opt("range", &STR),
    opt(
        "portPolicy",
        &Shape::OneOf(&["Static", "Dynamic", "Passthrough", "None"]),
    ),
    opt("container", &STR),
    opt("containerPort", &INT),
    opt("hostPort", &INT),
    opt("protocol", &Shape::OneOf(&["UDP", "TCP", "TCPUDP"])),
]);
const COUNTER_STATUS: Shape = Shape::Fields(&[opt("count", &INT), opt("capacity", &INT)]);
const GAME_SERVER_SPEC: Shape = Shape::Fields(&[
    opt("container", &STR),
    opt("ports", &Shape::List(&GAME_SERVER_PORT)),
    opt(
        "health",
        &Shape::Fields(&[
            opt("disabled", &BOOL),
            opt("periodSeconds", &INT),
            opt("failureThreshold", &INT),
            opt("initialDelaySeconds", &INT),
        ]),
    ),
    opt("scheduling", &SCHEDULING),
    opt(
        "sdkServer",
        &Shape::Fields(&[
            opt(
                "logLevel",
                &Shape::OneOf(&["Info", "Debug", "Error", "Trace"]),
            ),
            opt("grpcPort", &INT),
            opt("httpPort", &INT),
        ]),
    ),
    req("template", &POD_TEMPLATE_SPEC),
    opt("counters", &Shape::Keyed(&COUNTER_STATUS)),
]);
const GAME_SERVER_TEMPLATE_SPEC: Shape = Shape::Fields(&[
    opt("metadata", &OBJECT_META),
    req("spec", &GAME_SERVER_SPEC),
]);
const FLEET_SPEC: Shape = Shape::Fields(&[
    opt("replicas", &INT),
    opt("strategy", &DEPLOYMENT_STRATEGY),
    opt("scheduling", &SCHEDULING),
    opt("priorities", &Shape::List(&PRIORITY)),
    req("template", &GAME_SERVER_TEMPLATE_SPEC),
]);

// autoscaling.agones.dev/v1
const COUNTER_POLICY: Shape = Shape::Fields(&[
    req("key", &STR),
    req("maxCapacity", &INT),
    opt("minCapacity", &INT),
    req("bufferSize", &INT_OR_STR),
]);
const BUFFER_POLICY: Shape = Shape::Fields(&[
    req("maxReplicas", &INT),
    opt("minReplicas", &INT),
    req("bufferSize", &INT_OR_STR),
]);
const FLEET_AUTOSCALER_SPEC: Shape = Shape::Fields(&[
    req("fleetName", &STR),
    req(
        "policy",
        &Shape::Fields(&[
            req(
                "type",
                &Shape::OneOf(&[
                    "Buffer", "Webhook", "Counter", "List", "Schedule", "Chain", "Wasm",
                ]),
            ),
            opt("buffer", &BUFFER_POLICY),
            opt("counter", &COUNTER_POLICY),
        ]),
    ),
    opt(
        "sync",
        &Shape::Fields(&[
            req("type", &Shape::OneOf(&["FixedInterval"])),
            req("fixedInterval", &Shape::Fields(&[req("seconds", &INT)])),
        ]),
    ),
]);

// allocation.agones.dev/v1
const COUNTER_SELECTOR: Shape = Shape::Fields(&[
    opt("minCount", &INT),
    opt("maxCount", &INT),
    opt("minAvailable", &INT),
    opt("maxAvailable", &INT),
]);
const GAME_SERVER_SELECTOR: Shape = Shape::Fields(&[
    opt("matchLabels", &STRING_MAP),
    opt(
        "matchExpressions",
        &Shape::List(&LABEL_SELECTOR_REQUIREMENT),
    ),
    opt("gameServerState", &Shape::OneOf(&["Ready", "Allocated"])),
    opt("counters", &Shape::Keyed(&COUNTER_SELECTOR)),
]);
const COUNTER_ACTION: Shape = Shape::Fields(&[
    opt("action", &Shape::OneOf(&["Increment", "Decrement"])),
    opt("amount", &INT),
    opt("capacity", &INT),
]);
const GAME_SERVER_ALLOCATION_SPEC: Shape = Shape::Fields(&[
    opt("scheduling", &SCHEDULING),
    opt("priorities", &Shape::List(&PRIORITY)),
    opt("selectors", &Shape::List(&GAME_SERVER_SELECTOR)),
    opt(
        "metadata",
        &Shape::Fields(&[opt("labels", &STRING_MAP), opt("annotations", &STRING_MAP)]),
    ),
    opt("counters", &Shape::Keyed(&COUNTER_ACTION)),
]);

// monitoring.coreos.com/v1
const POD_METRICS_ENDPOINT: Shape = Shape::Fields(&[
    opt("port", &STR),
    opt("path", &STR),
    opt("scheme", &Shape::OneOf(&["http", "https"])),
    opt("interval", &STR),
    opt("scrapeTimeout", &STR),
    opt("honorLabels", &BOOL),
]);
const POD_MONITOR_SPEC: Shape = Shape::Fields(&[
    opt("jobLabel", &STR),
    opt("podTargetLabels", &STRINGS),
    req("podMetricsEndpoints", &Shape::List(&POD_METRICS_ENDPOINT)),
    req("selector", &LABEL_SELECTOR),
]);

const fn top(spec: Field) -> [Field; 4] {
    [
        req("apiVersion", &STR),
        req("kind", &STR),
        req("metadata", &OBJECT_META),
        spec,
    ]
}

const FLEET: [Field; 4] = top(req("spec", &FLEET_SPEC));
const FLEET_AUTOSCALER: [Field; 4] = top(req("spec", &FLEET_AUTOSCALER_SPEC));
const GAME_SERVER_ALLOCATION: [Field; 4] = top(req("spec", &GAME_SERVER_ALLOCATION_SPEC));
const POD_MONITOR: [Field; 4] = top(req("spec", &POD_MONITOR_SPEC));
const SECRET: [Field; 6] = [
    req("apiVersion", &STR),
    req("kind", &STR),
    req("metadata", &OBJECT_META),
    opt("type", &STR),
    opt("stringData", &STRING_MAP),
    opt("data", &STRING_MAP),
];

/// Each kind the manifests may hold, by its `apiVersion` and `kind`.
pub const KINDS: [(&str, &str, &Shape); 5] = [
    ("agones.dev/v1", "Fleet", &Shape::Fields(&FLEET)),
    (
        "autoscaling.agones.dev/v1",
        "FleetAutoscaler",
        &Shape::Fields(&FLEET_AUTOSCALER),
    ),
    (
        "allocation.agones.dev/v1",
        "GameServerAllocation",
        &Shape::Fields(&GAME_SERVER_ALLOCATION),
    ),
    (
        "monitoring.coreos.com/v1",
        "PodMonitor",
        &Shape::Fields(&POD_MONITOR),
    ),
    ("v1", "Secret", &Shape::Fields(&SECRET)),
];

/// Every way `doc` departs from the schema of its kind, each as `path: what`.
pub fn validate(doc: &Yaml) -> Vec<String> {
    let api = doc["apiVersion"].as_str().unwrap_or("");
    let kind = doc["kind"].as_str().unwrap_or("");
    let Some((_, _, shape)) = KINDS.iter().find(|(a, k, _)| *a == api && *k == kind) else {
        return vec![format!(
            "apiVersion `{api}`, kind `{kind}`: not a kind the schema knows"
        )];
    };
    let mut errors = Vec::new();
    check(doc, shape, "", &mut errors);
    errors
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn check(value: &Yaml, shape: &Shape, path: &str, errors: &mut Vec<String>) {
    let mut wrong = |want: &str| errors.push(format!("{path}: expected {want}, got {value:?}"));
    match shape {
        Shape::Fields(fields) => {
            let Yaml::Hash(map) = value else {
                return wrong("a mapping");
            };
            for (k, v) in map {
                let Some(key) = k.as_str() else {
                    errors.push(format!("{path}: key {k:?} is not a string"));
                    continue;
                };
                match fields.iter().find(|f| f.name == key) {
                    Some(f) => check(v, f.shape, &join(path, key), errors),
                    None => errors.push(format!(
                        "{}: not a field here (known: {})",
                        join(path, key),
                        fields.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
                    )),
                }
            }
            for f in fields.iter().filter(|f| f.required) {
                if !map.contains_key(&Yaml::String(f.name.to_string())) {
                    errors.push(format!("{}: required, missing", join(path, f.name)));
                }
            }
        }
        Shape::Keyed(inner) => {
            let Yaml::Hash(map) = value else {
                return wrong("a mapping");
            };
            for (k, v) in map {
                match k.as_str() {
                    Some(key) => check(v, inner, &join(path, key), errors),
                    None => errors.push(format!("{path}: key {k:?} is not a string")),
                }
            }
        }
        Shape::List(inner) => {
            let Yaml::Array(items) = value else {
                return wrong("a list");
            };
            for (i, item) in items.iter().enumerate() {
                check(item, inner, &format!("{path}[{i}]"), errors);
            }
        }
        Shape::Str => {
            if value.as_str().is_none() {
                wrong("a string")
            }
        }
        Shape::Int => {
            if value.as_i64().is_none() {
                wrong("an integer")
            }
        }
        Shape::Bool => {
            if value.as_bool().is_none() {
                wrong("true or false")
            }
        }
        Shape::IntOrStr => {
            if value.as_i64().is_none() && value.as_str().is_none() {
                wrong("an integer or a string")
            }
        }
        Shape::Quantity => {
            if !matches!(value, Yaml::Integer(_) | Yaml::Real(_) | Yaml::String(_)) {
                wrong("a quantity")
            }
        }
        Shape::OneOf(choices) => match value.as_str() {
            Some(s) if choices.contains(&s) => {}
            _ => wrong(&format!("one of {}", choices.join(", "))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(text: &str) -> Vec<String> {
        let docs = yaml_rust2::YamlLoader::load_from_str(text).unwrap();
        validate(&docs[0])
    }

    const FLEET_OK: &str = "
apiVersion: agones.dev/v1
kind: Fleet
metadata: {name: f}
spec:
  template:
    spec:
      counters: {rooms: {count: 0, capacity: 4}}
      template:
        spec:
          containers: [{name: c, image: i}]
";

    #[test]
    fn a_small_fleet_passes() {
        assert_eq!(errors_of(FLEET_OK), Vec::<String>::new());
    }

    #[test]
    fn a_misspelled_key_fails_with_its_path() {
        let text = FLEET_OK.replace("counters:", "counter:");
        assert_eq!(
            errors_of(&text),
            [
                "spec.template.spec.counter: not a field here (known: container, ports, health, \
              scheduling, sdkServer, template, counters)"
            ]
        );
    }

    #[test]
    fn a_wrong_type_or_value_fails() {
        let text = FLEET_OK.replace("count: 0", "count: \"0\"");
        let errors = errors_of(&text);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("spec.template.spec.counters.rooms.count: expected an integer"),
            "{errors:?}"
        );
        let text = "apiVersion: allocation.agones.dev/v1\nkind: GameServerAllocation\n\
                    metadata: {}\nspec:\n  priorites: []\n  priorities:\n  \
                    - {type: Counter, key: rooms, order: Asending}\n";
        let errors = errors_of(text);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("spec.priorites: not a field here"));
        assert!(errors[1]
            .starts_with("spec.priorities[0].order: expected one of Ascending, Descending"));
    }

    #[test]
    fn a_missing_required_field_and_an_unknown_kind_fail() {
        let text = "apiVersion: autoscaling.agones.dev/v1\nkind: FleetAutoscaler\nmetadata: {}\n\
                    spec:\n  policy: {type: Counter, counter: {key: rooms, bufferSize: 1, \
                    maxCapacity: 9}}\n";
        assert_eq!(errors_of(text), ["spec.fleetName: required, missing"]);
        let text = "apiVersion: agones.dev/v1\nkind: GameServerSet\nmetadata: {}\n";
        assert_eq!(
            errors_of(text),
            ["apiVersion `agones.dev/v1`, kind `GameServerSet`: not a kind the schema knows"]
        );
    }
}
