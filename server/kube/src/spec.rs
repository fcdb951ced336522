//! What a Hearth pod looks like to Kubernetes: the Pod and Secret objects
//! generated from a [`Profile`] and the install's settings, and the checks
//! the API server's schema does not make (names, label values, quantities).
//! Pure: no I/O.

use std::collections::BTreeMap;

use hearth_core::Profile;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    PodResourceClaim, PodSecurityContext, PodSpec, Probe, ResourceClaim, ResourceRequirements,
    SeccompProfile, Secret, SecretKeySelector, SecurityContext, TCPSocketAction, Toleration,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

/// Label naming the install (one Hearth deployment) a pod belongs to.
pub const INSTALL_LABEL: &str = "hearth.dev/install";
/// Label naming the pool (one per profile).
pub const POOL_LABEL: &str = "hearth.dev/pool";
/// Label naming the profile.
pub const PROFILE_LABEL: &str = "hearth.dev/profile";
/// Label saying whether the pod's jobs may reach the network (`egress`) or
/// not (`none`): the install's NetworkPolicies deny every job pod egress
/// unless it says `egress` (deploy/kubernetes/base/networkpolicy.yaml).
pub const NETWORK_LABEL: &str = "hearth.dev/network";
/// Annotation holding the hash of what the pod was made from: an adopted
/// pod serves its profile only while the profile is unchanged.
pub const SPEC_HASH_ANNOTATION: &str = "hearth.dev/spec-hash";
/// Annotation holding the leadership epoch of the leader that started or
/// adopted the pod: a leader deletes no pod a newer one holds.
pub const EPOCH_ANNOTATION: &str = "hearth.dev/leader-epoch";
/// Key of the token in a pod's Secret.
pub const TOKEN_KEY: &str = "token";
/// The agent's container.
pub const CONTAINER: &str = "agent";
/// Where the agent keeps the job directories (an `emptyDir`).
pub const POD_ROOT: &str = "/hearth";

/// How a profile's GPU is asked of the cluster. A pod's GPU resources cannot
/// change after creation, so a pod is created with what it needs when
/// active; standby stays zero-VRAM because the agent opens no GPU context
/// until a job binds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Gpu {
    /// `profile.gpus` whole devices as `nvidia.com/gpu` (none for CPU profiles).
    #[default]
    Whole,
    /// A share through an extended resource the cluster offers, e.g. a
    /// time-sliced or MPS replica (`nvidia.com/gpu.shared: 1`).
    Resource { name: String, quantity: String },
    /// HAMi-style limits: one device with a memory (MiB) and core (percent) cap.
    Hami { memory_mib: u32, cores_percent: u32 },
    /// Dynamic resource allocation: a claim from this ResourceClaimTemplate.
    Dra { claim_template: String },
}

/// Kubernetes settings of one profile, beyond the profile itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileSettings {
    pub tolerations: Vec<Toleration>,
    pub priority_class: Option<String>,
    pub gpu: Gpu,
}

/// Everything a pod is made from besides its profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub namespace: String,
    pub install: String,
    /// TCP port the agent listens on.
    pub agent_port: u16,
    /// UID and GID everything in the pod runs as (never root).
    pub run_as: i64,
    pub settings: BTreeMap<String, ProfileSettings>,
}

/// A name or value the runtime refuses before the API server sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} `{value}`: {why}")]
pub struct Invalid {
    pub what: &'static str,
    pub value: String,
    pub why: &'static str,
}

fn invalid(what: &'static str, value: &str, why: &'static str) -> Invalid {
    Invalid {
        what,
        value: value.to_owned(),
        why,
    }
}

/// An RFC 1123 label: at most 63 lower-case letters, digits and `-`,
/// starting and ending with a letter or digit. Pod names are held to it
/// (not only to the longer DNS subdomain) so they also fit in label values.
pub fn check_dns_label(what: &'static str, name: &str) -> Result<(), Invalid> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if name.is_empty() || name.len() > 63 {
        return Err(invalid(what, name, "must be 1 to 63 characters"));
    }
    if !name.chars().all(ok_char) {
        return Err(invalid(what, name, "only a-z, 0-9 and `-` are allowed"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(invalid(
            what,
            name,
            "must start and end with a letter or digit",
        ));
    }
    Ok(())
}

/// An RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub fn check_dns_subdomain(what: &'static str, name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > 253 {
        return Err(invalid(what, name, "must be 1 to 253 characters"));
    }
    for part in name.split('.') {
        check_dns_label(what, part).map_err(|_| {
            invalid(
                what,
                name,
                "each dot-separated part must be an RFC 1123 label",
            )
        })?;
    }
    Ok(())
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_` and `.`,
/// starting and ending with an alphanumeric.
pub fn check_label_value(what: &'static str, value: &str) -> Result<(), Invalid> {
    if value.len() > 63 {
        return Err(invalid(what, value, "must be at most 63 characters"));
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(invalid(
            what,
            value,
            "only letters, digits, `-`, `_` and `.` are allowed",
        ));
    }
    let edge = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if !edge(value.chars().next()) || !edge(value.chars().last()) {
        return Err(invalid(
            what,
            value,
            "must start and end with a letter or digit",
        ));
    }
    Ok(())
}

/// A qualified name (label keys, extended resource names):
/// `[prefix/]name`, the prefix a DNS subdomain, the name at most 63
/// alphanumerics, `-`, `_` and `.` starting and ending with an alphanumeric.
pub fn check_qualified_name(what: &'static str, value: &str) -> Result<(), Invalid> {
    let name = match value.split_once('/') {
        Some((prefix, name)) => {
            check_dns_subdomain(what, prefix)?;
            name
        }
        None => value,
    };
    if name.is_empty() {
        return Err(invalid(what, value, "the name part is empty"));
    }
    check_label_value(what, name).map_err(|e| Invalid {
        value: value.to_owned(),
        ..e
    })
}

/// A resource quantity in the canonical forms Hearth writes or accepts:
/// a non-negative decimal number with an optional binary (`Ki`..`Ei`) or
/// decimal (`m`, `k`, `M`, `G`, `T`, `P`, `E`) suffix.
pub fn check_quantity(what: &'static str, value: &str) -> Result<(), Invalid> {
    const SUFFIXES: [&str; 14] = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E", "",
    ];
    let number = SUFFIXES
        .iter()
        .find_map(|s| value.strip_suffix(s).filter(|n| !n.is_empty()))
        .ok_or_else(|| invalid(what, value, "not a quantity"))?;
    let (whole, frac) = number.split_once('.').unwrap_or((number, "0"));
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if !digits(whole) || !digits(frac) {
        return Err(invalid(what, value, "not a non-negative decimal quantity"));
    }
    Ok(())
}

impl Template {
    /// The settings of `profile` (defaults when none are configured).
    pub fn settings(&self, profile: &str) -> ProfileSettings {
        self.settings.get(profile).cloned().unwrap_or_default()
    }

    /// Checks everything of the install's own settings once, at start.
    pub fn check(&self) -> Result<(), Invalid> {
        check_dns_label("namespace", &self.namespace)?;
        check_label_value("install", &self.install)?;
        if self.install.is_empty() {
            return Err(invalid("install", "", "must not be empty"));
        }
        if self.agent_port == 0 {
            return Err(invalid("agent port", "0", "must be a port number"));
        }
        if self.run_as <= 0 {
            return Err(invalid(
                "run-as uid",
                &self.run_as.to_string(),
                "must not be root",
            ));
        }
        for (name, s) in &self.settings {
            check_label_value("profile", name)?;
            if let Some(pc) = &s.priority_class {
                check_dns_subdomain("priority class", pc)?;
            }
            match &s.gpu {
                Gpu::Whole => {}
                Gpu::Resource { name, quantity } => {
                    check_qualified_name("gpu resource", name)?;
                    check_quantity("gpu quantity", quantity)?;
                }
                Gpu::Hami {
                    memory_mib,
                    cores_percent,
                } => {
                    if *memory_mib == 0 || *cores_percent == 0 || *cores_percent > 100 {
                        return Err(invalid(
                            "hami share",
                            &format!("{memory_mib} MiB, {cores_percent} %"),
                            "memory must be positive and cores 1 to 100 percent",
                        ));
                    }
                }
                Gpu::Dra { claim_template } => {
                    check_dns_subdomain("resource claim template", claim_template)?
                }
            }
        }
        Ok(())
    }

    /// The labels of every pod of `profile`: install, pool and profile only
    /// (never a tenant or caller: pods are shared infrastructure).
    pub fn labels(&self, profile: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (INSTALL_LABEL.to_owned(), self.install.clone()),
            (POOL_LABEL.to_owned(), profile.to_owned()),
            (PROFILE_LABEL.to_owned(), profile.to_owned()),
        ])
    }

    /// The labels of a pod of `profile`: [`Template::labels`], the standard
    /// `app.kubernetes.io` ones that the install's NetworkPolicies select job
    /// pods by, and whether its jobs have network ([`NETWORK_LABEL`]).
    pub fn pod_labels(&self, profile: &Profile) -> BTreeMap<String, String> {
        let mut labels = self.labels(&profile.name);
        labels.extend([
            ("app.kubernetes.io/name".to_owned(), "hearth".to_owned()),
            (
                "app.kubernetes.io/instance".to_owned(),
                self.install.clone(),
            ),
            (
                "app.kubernetes.io/component".to_owned(),
                "job-pod".to_owned(),
            ),
            (
                "app.kubernetes.io/managed-by".to_owned(),
                "hearth".to_owned(),
            ),
            (
                NETWORK_LABEL.to_owned(),
                if profile.network { "egress" } else { "none" }.to_owned(),
            ),
        ]);
        labels
    }

    /// The label selector of the install's pods.
    pub fn selector(&self) -> String {
        format!("{INSTALL_LABEL}={}", self.install)
    }

    /// What a pod of `profile` is made from, hashed: pods made from the
    /// same inputs are interchangeable. The start-latency objective is the
    /// pool's, not the pod's: a new one replaces no pod (and pods made
    /// before profiles had one keep their hash).
    pub fn spec_hash(&self, profile: &Profile) -> String {
        let mut made_of = serde_json::to_value(profile).expect("a profile serializes");
        if let Some(fields) = made_of.as_object_mut() {
            fields.remove("start_objective");
        }
        let inputs = serde_json::json!({
            "profile": made_of,
            "settings": self.settings(&profile.name),
            "port": self.agent_port,
            "run_as": self.run_as,
        });
        hearth_core::sha256_hex(inputs.to_string().as_bytes())[..16].to_owned()
    }

    /// The name of pod `name`'s token Secret.
    pub fn secret_name(name: &str) -> String {
        format!("{name}-token")
    }

    /// The Secret holding pod `name`'s token.
    pub fn secret(&self, name: &str, token: &str) -> Secret {
        let mut labels = self.labels("");
        labels.retain(|k, _| k == INSTALL_LABEL);
        Secret {
            metadata: ObjectMeta {
                name: Some(Self::secret_name(name)),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([(
                TOKEN_KEY.to_owned(),
                ByteString(token.as_bytes().to_vec()),
            )])),
            immutable: Some(true),
            ..Secret::default()
        }
    }

    /// The Pod for Hearth pod `name` of `profile`.
    pub fn pod(
        &self,
        name: &str,
        profile: &Profile,
    ) -> Result<k8s_openapi::api::core::v1::Pod, Invalid> {
        check_dns_label("pod name", name)?;
        check_label_value("profile", &profile.name)?;
        if profile.name.is_empty() {
            return Err(invalid("profile", "", "must not be empty"));
        }
        if profile.image.is_empty() || profile.image.chars().any(char::is_whitespace) {
            return Err(invalid(
                "image",
                &profile.image,
                "must be an image reference",
            ));
        }
        if profile.cpu_millis == 0 || profile.memory_mib == 0 {
            return Err(invalid(
                "profile resources",
                &profile.name,
                "cpu and memory must be positive",
            ));
        }
        for (k, v) in &profile.node_selector {
            check_qualified_name("node selector key", k)?;
            check_label_value("node selector value", v)?;
        }
        let settings = self.settings(&profile.name);

        let mut limits = BTreeMap::from([
            (
                "cpu".to_owned(),
                Quantity(format!("{}m", profile.cpu_millis)),
            ),
            (
                "memory".to_owned(),
                Quantity(format!("{}Mi", profile.memory_mib)),
            ),
        ]);
        let mut claims = None;
        let mut pod_claims = None;
        match &settings.gpu {
            Gpu::Whole if profile.gpus > 0 => {
                limits.insert(
                    "nvidia.com/gpu".to_owned(),
                    Quantity(profile.gpus.to_string()),
                );
            }
            Gpu::Whole => {}
            Gpu::Resource { name, quantity } => {
                limits.insert(name.clone(), Quantity(quantity.clone()));
            }
            Gpu::Hami {
                memory_mib,
                cores_percent,
            } => {
                limits.insert("nvidia.com/gpu".to_owned(), Quantity("1".to_owned()));
                limits.insert(
                    "nvidia.com/gpumem".to_owned(),
                    Quantity(memory_mib.to_string()),
                );
                limits.insert(
                    "nvidia.com/gpucores".to_owned(),
                    Quantity(cores_percent.to_string()),
                );
            }
            Gpu::Dra { claim_template } => {
                claims = Some(vec![ResourceClaim {
                    name: "gpu".to_owned(),
                    ..ResourceClaim::default()
                }]);
                pod_claims = Some(vec![PodResourceClaim {
                    name: "gpu".to_owned(),
                    resource_claim_template_name: Some(claim_template.clone()),
                    ..PodResourceClaim::default()
                }]);
            }
        }
        for (what, q) in &limits {
            check_quantity("resource quantity", &q.0).map_err(|e| Invalid {
                what: "resource",
                value: format!("{what}={}", q.0),
                ..e
            })?;
        }
        // Requests equal limits (extended resources must): the pod gets
        // what it may use, and is the last to be evicted under pressure.
        let resources = ResourceRequirements {
            requests: Some(limits.clone()),
            limits: Some(limits),
            claims,
        };

        let mut args = vec![
            "--listen".to_owned(),
            format!("tcp:0.0.0.0:{}", self.agent_port),
            "--root".to_owned(),
            POD_ROOT.to_owned(),
            // The pod is the sandbox.
            "--sandbox".to_owned(),
            "none".to_owned(),
        ];
        if profile.disk_mib > 0 {
            args.extend(["--disk-mib".to_owned(), profile.disk_mib.to_string()]);
        }
        let env = vec![
            EnvVar {
                name: "HEARTH_AGENT_TOKEN".to_owned(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: Self::secret_name(name),
                        key: TOKEN_KEY.to_owned(),
                        optional: Some(false),
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
            EnvVar {
                name: "HOME".to_owned(),
                value: Some("/tmp".to_owned()),
                ..EnvVar::default()
            },
        ];
        let seccomp = || {
            Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                ..SeccompProfile::default()
            })
        };
        let container = Container {
            name: CONTAINER.to_owned(),
            image: Some(profile.image.clone()),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            command: Some(vec!["hearth-agent".to_owned()]),
            args: Some(args),
            env: Some(env),
            ports: Some(vec![ContainerPort {
                name: Some("agent".to_owned()),
                container_port: i32::from(self.agent_port),
                protocol: Some("TCP".to_owned()),
                ..ContainerPort::default()
            }]),
            readiness_probe: Some(Probe {
                tcp_socket: Some(TCPSocketAction {
                    port: IntOrString::Int(i32::from(self.agent_port)),
                    ..TCPSocketAction::default()
                }),
                period_seconds: Some(1),
                failure_threshold: Some(3),
                ..Probe::default()
            }),
            resources: Some(resources),
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                privileged: Some(false),
                read_only_root_filesystem: Some(true),
                run_as_non_root: Some(true),
                run_as_user: Some(self.run_as),
                run_as_group: Some(self.run_as),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".to_owned()]),
                    add: None,
                }),
                seccomp_profile: seccomp(),
                ..SecurityContext::default()
            }),
            volume_mounts: Some(vec![
                VolumeMount {
                    name: "pod".to_owned(),
                    mount_path: POD_ROOT.to_owned(),
                    ..VolumeMount::default()
                },
                VolumeMount {
                    name: "tmp".to_owned(),
                    mount_path: "/tmp".to_owned(),
                    ..VolumeMount::default()
                },
            ]),
            ..Container::default()
        };
        let size = |mib: u32| (mib > 0).then(|| Quantity(format!("{mib}Mi")));
        let spec = PodSpec {
            restart_policy: Some("Never".to_owned()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            node_selector: (!profile.node_selector.is_empty())
                .then(|| profile.node_selector.clone()),
            tolerations: (!settings.tolerations.is_empty()).then(|| settings.tolerations.clone()),
            priority_class_name: settings.priority_class.clone(),
            resource_claims: pod_claims,
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(self.run_as),
                run_as_group: Some(self.run_as),
                fs_group: Some(self.run_as),
                seccomp_profile: seccomp(),
                ..PodSecurityContext::default()
            }),
            containers: vec![container],
            volumes: Some(vec![
                Volume {
                    name: "pod".to_owned(),
                    empty_dir: Some(EmptyDirVolumeSource {
                        size_limit: size(profile.disk_mib),
                        ..EmptyDirVolumeSource::default()
                    }),
                    ..Volume::default()
                },
                Volume {
                    name: "tmp".to_owned(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                },
            ]),
            termination_grace_period_seconds: Some(5),
            ..PodSpec::default()
        };
        Ok(k8s_openapi::api::core::v1::Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(self.namespace.clone()),
                labels: Some(self.pod_labels(profile)),
                annotations: Some(BTreeMap::from([(
                    SPEC_HASH_ANNOTATION.to_owned(),
                    self.spec_hash(profile),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn template() -> Template {
        Template {
            namespace: "hearth".to_owned(),
            install: "prod".to_owned(),
            agent_port: 7070,
            run_as: 65532,
            settings: BTreeMap::new(),
        }
    }

    #[test]
    fn names_follow_rfc_1123() {
        for ok in ["a", "pod-0123", &"x".repeat(63)] {
            check_dns_label("n", ok).unwrap();
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"x".repeat(64)] {
            assert!(check_dns_label("n", bad).is_err(), "{bad}");
        }
        check_dns_subdomain("n", "a.b-c.d").unwrap();
        assert!(check_dns_subdomain("n", "a..b").is_err());
        check_label_value("v", "").unwrap();
        check_label_value("v", "cpu_small.v1").unwrap();
        for bad in ["_a", "a.", "a b", "é"] {
            assert!(check_label_value("v", bad).is_err(), "{bad}");
        }
        check_qualified_name("r", "nvidia.com/gpu.shared").unwrap();
        assert!(check_qualified_name("r", "Nvidia.com/gpu").is_err());
        assert!(check_qualified_name("r", "nvidia.com/").is_err());
    }

    #[test]
    fn quantities_are_checked() {
        for ok in ["1", "500m", "1024Mi", "0.5", "2Gi", "10k"] {
            check_quantity("q", ok).unwrap();
        }
        for bad in ["", "m", "-1", "1.5.2", "1 Gi", "1gi", "1e3x", ".5"] {
            assert!(check_quantity("q", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pods_are_hardened_and_carry_no_secret() {
        let t = template();
        let pod = t.pod("pod-1", &Profile::cpu("cpu-small")).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.automount_service_account_token, Some(false));
        let c = &spec.containers[0];
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(
            sc.capabilities.as_ref().unwrap().drop.as_deref(),
            Some(&["ALL".to_owned()][..])
        );
        let res = c.resources.as_ref().unwrap();
        assert_eq!(res.limits.as_ref().unwrap()["cpu"].0, "1000m");
        assert_eq!(res.requests.as_ref().unwrap()["memory"].0, "1024Mi");
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels.keys().cloned().collect::<Vec<_>>(),
            [
                "app.kubernetes.io/component",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/managed-by",
                "app.kubernetes.io/name",
                INSTALL_LABEL,
                NETWORK_LABEL,
                POOL_LABEL,
                PROFILE_LABEL
            ]
        );
        assert_eq!(labels[NETWORK_LABEL], "none", "cpu-small has no network");
        let with_network = Profile {
            network: true,
            ..Profile::cpu("cpu-net")
        };
        let net = t.pod("pod-2", &with_network).unwrap();
        assert_eq!(net.metadata.labels.unwrap()[NETWORK_LABEL], "egress");
        let text = serde_json::to_string(&pod).unwrap();
        assert!(text.contains("secretKeyRef"));
        assert!(!text.contains("tenant"));
        let token = hearth_core::agent::pod_token(b"install-secret", "pod-1");
        assert!(!text.contains(&token));
    }

    #[test]
    fn gpu_shares_map_to_the_configured_mechanism() {
        let mut t = template();
        let gpu = Profile {
            gpus: 2,
            ..Profile::cpu("gpu")
        };
        let limits = |t: &Template, p: &Profile| {
            let pod = t.pod("p", p).unwrap();
            pod.spec.unwrap().containers[0]
                .resources
                .clone()
                .unwrap()
                .limits
                .unwrap()
        };
        assert_eq!(limits(&t, &gpu)["nvidia.com/gpu"].0, "2");
        t.settings.insert(
            "gpu".to_owned(),
            ProfileSettings {
                gpu: Gpu::Resource {
                    name: "nvidia.com/gpu.shared".to_owned(),
                    quantity: "1".to_owned(),
                },
                ..ProfileSettings::default()
            },
        );
        t.check().unwrap();
        let l = limits(&t, &gpu);
        assert_eq!(l["nvidia.com/gpu.shared"].0, "1");
        assert!(!l.contains_key("nvidia.com/gpu"));
        t.settings.get_mut("gpu").unwrap().gpu = Gpu::Resource {
            name: "nvidia.com/gpu.shared".to_owned(),
            quantity: "one".to_owned(),
        };
        assert!(t.check().is_err());
        t.settings.get_mut("gpu").unwrap().gpu = Gpu::Hami {
            memory_mib: 4096,
            cores_percent: 25,
        };
        assert_eq!(limits(&t, &gpu)["nvidia.com/gpumem"].0, "4096");
        t.settings.get_mut("gpu").unwrap().gpu = Gpu::Dra {
            claim_template: "gpu-share".to_owned(),
        };
        let pod = t.pod("p", &gpu).unwrap();
        let claims = pod.spec.unwrap().resource_claims.unwrap();
        assert_eq!(
            claims[0].resource_claim_template_name.as_deref(),
            Some("gpu-share")
        );
    }

    #[test]
    fn a_pods_hash_follows_what_it_is_made_of_not_its_pools_objective() {
        let t = template();
        let p = Profile::cpu("cpu-small");
        let aiming = Profile {
            start_objective: hearth_core::StartObjective {
                percentile: 0.99,
                class: hearth_core::StartClass::Standby,
            },
            ..p.clone()
        };
        assert_eq!(t.spec_hash(&p), t.spec_hash(&aiming));
        let larger = Profile {
            memory_mib: p.memory_mib * 2,
            ..p.clone()
        };
        assert_ne!(t.spec_hash(&p), t.spec_hash(&larger));
    }

    #[test]
    fn bad_inputs_are_refused_before_the_api_server() {
        let t = template();
        assert!(t.pod("Pod_1", &Profile::cpu("c")).is_err());
        assert!(t.pod(&"p".repeat(64), &Profile::cpu("c")).is_err());
        let mut p = Profile::cpu("c");
        p.node_selector
            .insert("bad key!".to_owned(), "v".to_owned());
        assert!(t.pod("p", &p).is_err());
        let mut p = Profile::cpu("c");
        p.image = "has space".to_owned();
        assert!(t.pod("p", &p).is_err());
        assert!(t.pod("p", &Profile::cpu("bad profile")).is_err());
    }
}
