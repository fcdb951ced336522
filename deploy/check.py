"""The checks of deploy/check.sh that no off-the-shelf tool does.

  dockerfiles  every COPY/ADD source of deploy/docker/*.Dockerfile exists in
               the repository and is let through by the file's .dockerignore;
               the Rust image is at least the workspace's rust-version; every
               `cargo -p NAME` is a workspace package and every
               `target/release/NAME` one of its binaries.
  profiles     every profiles.json under deploy/kubernetes/ is a list of
               profiles with unique names that are valid label values, and
               only fields the Profile type has (server/core/src/profile.rs)
               or that deploy/README.md proposes to the Kubernetes runtime.
  contract     every pod in deploy/generated/*.yaml (the runtime's own) carries
               the labels, port, token Secret reference and hardening of
               deploy/README.md ("Contract"), and the base NetworkPolicies
               select each as intended.

Usage: python3 deploy/check.py REPO_ROOT RENDERED_BASE POD_FILE...
Runs under the venv's Python (PyYAML comes with kubernetes-validate).
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from pathlib import Path

import yaml

# Profile fields deploy/ uses that the Kubernetes runtime is to add
# (deploy/README.md, "Profiles"); each is reported while Profile lacks it.

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
REQUIRED_POD_LABELS = {
    "app.kubernetes.io/name": "hearth",
    "app.kubernetes.io/component": "job-pod",
    "app.kubernetes.io/managed-by": "hearth",
}
NAMED_POD_LABELS = ("app.kubernetes.io/instance", "hearth.dev/install", "hearth.dev/pool", "hearth.dev/profile")
NETWORK_VALUES = ("none", "egress")
TOKEN_ENV = "HEARTH_AGENT_TOKEN"

errors: list[str] = []
notes: list[str] = []


def fail(msg: str) -> None:
    errors.append(msg)


# ---------------------------------------------------------------- dockerfiles


def instructions(path: Path) -> list[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with continuation lines joined."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buf = ""
    return out


def ignore_rules(path: Path) -> list[tuple[bool, str]]:
    """(negated, pattern) of a .dockerignore, in order; the last match wins."""
    rules = []
    if path.exists():
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                neg = line.startswith("!")
                rules.append((neg, line.lstrip("!").strip("/")))
    return rules


def ignored(rel: str, rules: list[tuple[bool, str]]) -> bool:
    """Whether the build context leaves `rel` out: a rule matches a path or
    any folder above it; `**/x` matches x at any depth."""
    parts = rel.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    out = False
    for neg, pat in rules:
        if pat.startswith("**/"):
            hit = any(fnmatch.fnmatchcase(seg, pat[3:]) for seg in parts)
        else:
            hit = any(fnmatch.fnmatchcase(p, pat) for p in prefixes)
        if hit:
            out = not neg
    return out


def workspace_packages(root: Path) -> dict[str, set[str]]:
    """Package name -> its binary names, from the workspace members' manifests."""
    pkgs: dict[str, set[str]] = {}
    members = re.search(r"^members\s*=\s*\[(.*?)\]", (root / "Cargo.toml").read_text(), re.M | re.S)
    for member in re.findall(r'"([^"]+)"', members.group(1) if members else ""):
        manifest = root / member / "Cargo.toml"
        if not manifest.exists():
            fail(f"Cargo.toml: workspace member {member} has no Cargo.toml")
            continue
        text = manifest.read_text()
        m = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', text, re.M | re.S)
        if not m:
            continue
        bins = set(re.findall(r'^\[\[bin\]\]\s*\nname\s*=\s*"([^"]+)"', text, re.M))
        if (manifest.parent / "src/main.rs").exists():
            bins.add(m.group(1))
        pkgs[m.group(1)] = bins
    return pkgs


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def check_dockerfiles(root: Path) -> None:
    files = sorted((root / "deploy/docker").glob("*.Dockerfile"))
    if not files:
        fail("deploy/docker: no *.Dockerfile")
    pkgs = workspace_packages(root)
    rv = re.search(r'^rust-version\s*=\s*"([^"]+)"', (root / "Cargo.toml").read_text(), re.M)
    for df in files:
        rel_df = df.relative_to(root)
        rules = ignore_rules(df.with_name(df.name + ".dockerignore"))
        copies = 0
        for line, word, args in instructions(df):
            where = f"{rel_df}:{line}"
            if word == "ARG" and args.startswith("RUST_VERSION=") and rv:
                have = args.split("=", 1)[1]
                if version_tuple(have) < version_tuple(rv.group(1)):
                    fail(f"{where}: RUST_VERSION {have} is older than the workspace's rust-version {rv.group(1)}")
            if word in ("COPY", "ADD"):
                if args.startswith("["):
                    words = json.loads(args)
                else:
                    words = args.split()
                flags = [w for w in words if w.startswith("--")]
                paths = [w for w in words if not w.startswith("--")]
                if any(f.startswith("--from") for f in flags):
                    continue
                for src in paths[:-1]:
                    copies += 1
                    if "$" in src or "*" in src:
                        fail(f"{where}: {word} source {src!r}: name it literally so it can be checked")
                        continue
                    if not (root / src).exists():
                        fail(f"{where}: {word} source {src!r} does not exist in the repository")
                    elif ignored(src, rules):
                        fail(f"{where}: {word} source {src!r} is excluded by {df.name}.dockerignore")
            if word == "RUN" and "cargo build" in args:
                for name in re.findall(r"(?:-p|--package)\s+([A-Za-z0-9_-]+)", args):
                    if name not in pkgs:
                        fail(f"{where}: cargo package {name!r} is not a workspace member")
                built = {b for n in re.findall(r"(?:-p|--package)\s+([A-Za-z0-9_-]+)", args) for b in pkgs.get(n, ())}
                for name in re.findall(r"target/release/([A-Za-z0-9_-]+)", args):
                    if name not in built:
                        fail(f"{where}: target/release/{name} is not a binary of the packages built")
        if copies == 0:
            fail(f"{rel_df}: copies nothing from the repository")


# ------------------------------------------------------------------- profiles


def profile_fields(root: Path) -> set[str]:
    text = (root / "server/core/src/profile.rs").read_text()
    m = re.search(r"pub struct Profile \{(.*?)\n\}", text, re.S)
    if not m:
        fail("server/core/src/profile.rs: no `pub struct Profile`")
        return set()
    return set(re.findall(r"^\s*pub (\w+):", m.group(1), re.M))


def check_profiles(root: Path) -> None:
    known = profile_fields(root)
    files = sorted((root / "deploy/kubernetes").glob("**/profiles.json"))
    if not files:
        fail("deploy/kubernetes: no profiles.json")
    for f in files:
        rel = f.relative_to(root)
        try:
            profiles = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            fail(f"{rel}: not JSON: {e}")
            continue
        if not isinstance(profiles, list) or not profiles:
            fail(f"{rel}: want a non-empty list of profiles")
            continue
        seen = set()
        for p in profiles:
            name = p.get("name") if isinstance(p, dict) else None
            if not isinstance(name, str):
                fail(f"{rel}: a profile without a name")
                continue
            if name in seen:
                fail(f"{rel}: profile {name!r} defined twice")
            seen.add(name)
            if not (len(name) <= 63 and LABEL_VALUE.match(name) and name):
                fail(f"{rel}: profile {name!r} is not a valid label value (hearth.dev/profile)")
            for key in p:
                if key not in known:
                    fail(f"{rel}: profile {name!r}: unknown field {key!r} (not in server/core/src/profile.rs)")
            if p.get("max_pods", 1) <= 0:
                fail(f"{rel}: profile {name!r}: max_pods must be positive")
            if not isinstance(p.get("network", False), bool):
                fail(f"{rel}: profile {name!r}: network must be true or false")


# ------------------------------------------------------------------- contract


def selects(selector: dict, labels: dict) -> bool:
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        k, op, vals = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and labels.get(k) in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def check_pod(where: str, pod: dict, policies: dict[str, dict]) -> None:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    spec = pod.get("spec") or {}
    for k, v in REQUIRED_POD_LABELS.items():
        if labels.get(k) != v:
            fail(f"{where}: label {k} must be {v!r}, is {labels.get(k)!r}")
    for k in NAMED_POD_LABELS:
        v = labels.get(k)
        if not v or not LABEL_VALUE.match(v) or len(v) > 63:
            fail(f"{where}: label {k} missing or not a valid label value: {v!r}")
    if labels.get("app.kubernetes.io/instance") != labels.get("hearth.dev/install"):
        fail(f"{where}: app.kubernetes.io/instance must equal hearth.dev/install")
    net = labels.get("hearth.dev/network")
    if net not in NETWORK_VALUES:
        fail(f"{where}: label hearth.dev/network must be one of {NETWORK_VALUES}, is {net!r}")
    for k in labels:
        if "tenant" in k.lower() or "caller" in k.lower():
            fail(f"{where}: label {k}: pods carry no tenant or caller")
    if spec.get("restartPolicy") != "Never":
        fail(f"{where}: restartPolicy must be Never")
    if spec.get("automountServiceAccountToken") is not False:
        fail(f"{where}: automountServiceAccountToken must be false")
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        fail(f"{where}: no host namespaces")
    psc = spec.get("securityContext") or {}
    if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        fail(f"{where}: pod seccompProfile must be RuntimeDefault")
    containers = spec.get("containers") or []
    agent_ports = [
        p for c in containers for p in c.get("ports") or [] if p.get("name") == "agent" and p.get("protocol", "TCP") == "TCP"
    ]
    if len(agent_ports) != 1:
        fail(f"{where}: exactly one container port named `agent` (TCP), found {len(agent_ports)}")
    for c in containers + (spec.get("initContainers") or []):
        sc = c.get("securityContext") or {}
        name = c.get("name")
        run_as_non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        if run_as_non_root is not True:
            fail(f"{where}: container {name}: runAsNonRoot must be true")
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(f"{where}: container {name}: readOnlyRootFilesystem must be true")
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(f"{where}: container {name}: allowPrivilegeEscalation must be false")
        if sc.get("privileged"):
            fail(f"{where}: container {name}: not privileged")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
            fail(f"{where}: container {name}: capabilities must drop ALL")
        if (c.get("resources") or {}).get("limits", {}).get("memory") is None:
            fail(f"{where}: container {name}: a memory limit")
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    # The agent's token comes from the pod's own Secret, never the spec.
    refs = [
        (e.get("valueFrom") or {}).get("secretKeyRef") or {}
        for c in containers
        for e in c.get("env") or []
        if e.get("name") == TOKEN_ENV
    ]
    if len(refs) != 1 or refs[0].get("name") != f"{meta.get('name')}-token" or refs[0].get("key") != "token":
        fail(f"{where}: {TOKEN_ENV} must come from Secret {meta.get('name')}-token, key token")
    literal = [e for c in containers for e in c.get("env") or [] if "token" in e.get("name", "").lower() and "value" in e]
    if literal:
        fail(f"{where}: a token written into the pod spec: {literal[0].get('name')}")
    for v in volumes.values():
        if "hostPath" in v:
            fail(f"{where}: volume {v['name']}: no hostPath")

    # What the base NetworkPolicies make of it.
    def applies(name: str) -> bool:
        pol = policies.get(name)
        if pol is None:
            fail(f"rendered base: NetworkPolicy {name} missing")
            return False
        return selects(pol["spec"]["podSelector"], labels)

    if not applies("hearth-job-ingress"):
        fail(f"{where}: not selected by NetworkPolicy hearth-job-ingress (open to any ingress)")
    if not applies("hearth-job-deny-egress"):
        fail(f"{where}: not selected by NetworkPolicy hearth-job-deny-egress")
    if applies("hearth-job-allow-egress") != (net == "egress"):
        fail(f"{where}: NetworkPolicy hearth-job-allow-egress must select exactly the pods with network")
    if applies("hearth-broker-ingress"):
        fail(f"{where}: a job pod selected as a broker")


def check_contract(rendered_base: Path, pod_files: list[Path], root: Path) -> None:
    docs = [d for d in yaml.safe_load_all(rendered_base.read_text()) if d]
    policies = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "NetworkPolicy"}
    pods_seen = 0
    for f in pod_files:
        for i, doc in enumerate(d for d in yaml.safe_load_all(f.read_text()) if d):
            if doc.get("kind") == "Pod":
                pods_seen += 1
                name = (doc.get("metadata") or {}).get("name")
                check_pod(f"{f.relative_to(root)}: pod {name}", doc, policies)
    if pods_seen == 0:
        fail("contract: no job pod to check (deploy/generated/ is empty)")


def main() -> int:
    root = Path(sys.argv[1]).resolve()
    rendered_base = Path(sys.argv[2]).resolve()
    pod_files = [Path(p).resolve() for p in sys.argv[3:]]
    check_dockerfiles(root)
    check_profiles(root)
    check_contract(rendered_base, pod_files, root)
    for n in notes:
        print(f"note: {n}")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
