"""Schemathesis hooks for tests/schemathesis.sh.

A few schema-valid requests are refused for reasons no static document can
state: they name something the service or the tenant does not have (a
profile, a bundle, a policy's route), or break a rule between two fields
(a budget's floor above its ceiling), or a control policy that does not
compile, or a key expiring at a time already past, or a job's `input` holds a NUL or nests
deeper than 64 levels (its schema says so only in words, see hearth-core's `openapi::input`), or a
set of files holds a path that another needs as a directory (`a` beside `a/b`), or a path
component longer than 255 bytes (a pattern can only count characters). tests/schemathesis.toml lets those operations answer 422 to valid
data; this check makes sure every such 422 gives one of those reasons and
nothing else, so a validator stricter than the document still fails the run.
"""

import re

import schemathesis

# Operation -> (error codes, `details` fields of `validation_failed`, with the
# message they must carry) that depend on state or on several fields.
# A file's path: a rule between the paths of a set of files, or a length in
# bytes.
FILES = ("is a file and also a directory", "at most 255 bytes")
# `input` holds no NUL at any depth and nests at most 64 levels: rules only a
# recursive schema could state, which SDK generators cannot read (the
# document says them in words).
INPUT = ("may not contain NUL", "levels deep")

STATE_DEPENDENT = {
    "POST /v1/jobs": (
        {"unknown_profile", "unknown_bundle"},
        {"input": INPUT, "code.files.*": FILES},
    ),
    "POST /v1/bundles": (set(), {"files.*": FILES}),
    "PUT /v1/admin/tenants/{tenant_id}/budgets/{profile}": (
        {"unknown_profile"},
        {"floor_gpus": ("exceeds ceiling_gpus",)},
    ),
    "POST /v1/control/events": (
        set(),
        {"route": ("unknown route",), "input": ("takes at most",)},
    ),
    "POST /v1/control/sessions": (
        set(),
        {"route": ("unknown route",), "state": ("registers",)},
    ),
    "POST /v1/control/policies": ({"invalid_policy"}, {}),
    # Each job of a batch as one job (their fields named `jobs[i].job.<field>`).
    "POST /v1/jobs/batch": (
        set(),
        {"profile": ("unknown profile",), "code.bundle": ("no bundle",), "input": INPUT, "code.files.*": FILES},
    ),
    # A key's expiry must be in the future: a time the document cannot pin.
    "POST /v1/keys": (set(), {"expires_at": ("must be in the future",)}),
    "POST /v1/admin/tenants/{tenant_id}/keys": (set(), {"expires_at": ("must be in the future",)}),
}

# `[3].route` -> `route`: a field of one event in a batch;
# `jobs[3].job.profile` -> `profile`: a field of one job of a batch.
ITEM = re.compile(r"^(jobs)?\[\d+\]\.(job\.)?")
# `code.files.a/b` -> `code.files.*`: one file of a set, by its path.
FILE = re.compile(r"^((?:code\.)?files)\..*$", re.S)


def rule_field(field):
    return FILE.sub(r"\1.*", ITEM.sub("", field))


@schemathesis.check
def refusals_of_valid_data_name_state(ctx, response, case):
    """A 422 to schema-valid data names state or a rule across fields."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    rule = STATE_DEPENDENT.get(f"{case.method.upper()} {case.path}")
    if rule is None:
        return None
    codes, fields = rule
    body = response.json()
    code = body.get("code")
    if code in codes:
        return None
    details = body.get("details") or []
    if code == "validation_failed" and details and all(
        (wants := fields.get(rule_field(d.get("field", "")))) is not None
        and any(w in d.get("message", "") for w in wants)
        for d in details
    ):
        return None
    raise AssertionError(
        f"Schema-valid data refused for a reason the document could state: {body}"
    )
