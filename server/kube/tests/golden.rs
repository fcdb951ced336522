//! The pod specs the runtime generates, as committed golden files under
//! `deploy/generated/` that CI validates against the Kubernetes 1.33
//! schemas (`deploy/validate.sh`, kubernetes-validate --strict). This test
//! fails when the generated specs change and the files were not renewed:
//! `HEARTH_BLESS=1 cargo test -p hearth-kube --test golden`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use hearth_core::Profile;
use hearth_kube::{Gpu, ProfileSettings, Template};
use serde_json::Value;

fn template() -> Template {
    let gpu = |gpu: Gpu| ProfileSettings {
        tolerations: vec![
            serde_json::from_value(serde_json::json!({
                "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"
            }))
            .unwrap(),
        ],
        priority_class: Some("hearth-gpu".to_owned()),
        gpu,
    };
    Template {
        namespace: "hearth".to_owned(),
        install: "hearth".to_owned(),
        agent_port: 7070,
        run_as: 65532,
        settings: BTreeMap::from([
            ("gpu-whole".to_owned(), gpu(Gpu::Whole)),
            (
                "gpu-shared".to_owned(),
                gpu(Gpu::Resource {
                    name: "nvidia.com/gpu.shared".to_owned(),
                    quantity: "1".to_owned(),
                }),
            ),
            (
                "gpu-hami".to_owned(),
                gpu(Gpu::Hami {
                    memory_mib: 10240,
                    cores_percent: 25,
                }),
            ),
            (
                "gpu-dra".to_owned(),
                gpu(Gpu::Dra {
                    claim_template: "gpu-share".to_owned(),
                }),
            ),
        ]),
    }
}

fn profiles() -> Vec<Profile> {
    let mut all = Profile::defaults();
    let gpu = |name: &str, gpus: u32| Profile {
        image: "ghcr.io/hearth/base-cuda:0.1".to_owned(),
        cpu_millis: 4000,
        memory_mib: 16384,
        gpus,
        node_selector: BTreeMap::from([("nvidia.com/gpu.present".to_owned(), "true".to_owned())]),
        ..Profile::cpu(name)
    };
    all.push(gpu("gpu-whole", 1));
    all.push(gpu("gpu-shared", 0));
    all.push(gpu("gpu-hami", 0));
    all.push(gpu("gpu-dra", 0));
    all
}

/// Block-style YAML of a JSON value: every string quoted (so `"true"` or
/// `"Never"` stay strings), keys bare where YAML allows.
fn yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let key = if k
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
                {
                    k.clone()
                } else {
                    Value::String(k.clone()).to_string()
                };
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        let _ = writeln!(out, "{pad}{key}:");
                        yaml(v, indent + 2, out);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        let _ = writeln!(out, "{pad}{key}:");
                        yaml(v, indent, out);
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}{key}: {}", scalar(v));
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                let mut inner = String::new();
                yaml(item, indent + 2, &mut inner);
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        // The first key goes on the dash's line.
                        let inner = inner.replacen(&format!("{pad}  "), &format!("{pad}- "), 1);
                        out.push_str(&inner);
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}- {}", scalar(item));
                    }
                }
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", scalar(other));
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
        other => other.to_string(),
    }
}

#[test]
fn generated_pod_specs_match_the_committed_golden_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/generated");
    let bless = std::env::var_os("HEARTH_BLESS").is_some();
    let t = template();
    let mut stale = Vec::new();
    for profile in profiles() {
        let pod = t.pod("hearth-pod-0123456789abcdef", &profile).unwrap();
        let mut value = serde_json::to_value(&pod).unwrap();
        // Key order as the API documents it: apiVersion and kind first.
        let mut ordered = serde_json::Map::new();
        ordered.insert("apiVersion".to_owned(), Value::String("v1".to_owned()));
        ordered.insert("kind".to_owned(), Value::String("Pod".to_owned()));
        for (k, v) in value.as_object_mut().unwrap().iter() {
            ordered.insert(k.clone(), v.clone());
        }
        let mut text = format!(
            "# Generated by `cargo test -p hearth-kube --test golden` (HEARTH_BLESS=1 renews it):\n\
             # the pod the Kubernetes runtime creates for profile `{}`. Do not edit.\n",
            profile.name
        );
        yaml(&Value::Object(ordered), 0, &mut text);
        let path = dir.join(format!("pod-{}.yaml", profile.name));
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current != text {
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty(),
        "stale golden pod specs (renew with HEARTH_BLESS=1): {stale:?}"
    );
}

#[test]
fn the_yaml_writer_keeps_structure() {
    let v = serde_json::json!({"a": {"b": ["x", {"c": 1, "d": true}], "e": {}}, "f": "true"});
    let mut out = String::new();
    yaml(&v, 0, &mut out);
    assert_eq!(
        out,
        "a:\n  b:\n  - \"x\"\n  - c: 1\n    d: true\n  e: {}\nf: \"true\"\n"
    );
}

/// The profiles deploy/ ships parse as the service reads them, and every
/// one of them makes a valid pod.
#[test]
fn the_profiles_in_deploy_make_pods() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes");
    for (profiles, settings) in [
        ("base/profiles.json", "base/kube-profiles.json"),
        (
            "overlays/gpu/profiles.json",
            "overlays/gpu/kube-profiles.json",
        ),
    ] {
        let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap();
        let profiles: Vec<Profile> = serde_json::from_str(&read(profiles)).unwrap();
        let settings: BTreeMap<String, ProfileSettings> =
            serde_json::from_str(&read(settings)).unwrap();
        let mut t = template();
        for name in settings.keys() {
            assert!(
                profiles.iter().any(|p| &p.name == name),
                "settings for an unknown profile {name}"
            );
        }
        t.settings = settings;
        t.check().unwrap();
        for p in &profiles {
            t.pod("hearth-pod-0", p).unwrap();
        }
    }
}
